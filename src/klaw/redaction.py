"""Secrets kept out of text a person or a log will read: the credentials in a URL's userinfo.

A base URL may carry a password (`https://user:pw@proxy/v1`), and every message naming the endpoint
(a failed turn's reply in the chat, a log line, `klaw config check`) would repeat it. Text is masked
where it is made, so a new message cannot forget. Imports nothing of klaw: `llm` and the config use it.
"""

from __future__ import annotations

import re

MASK = "••••••"

# scheme://userinfo@ — userinfo is everything up to the first '@' before the host (no '/', no space).
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/\s@]+)@")


def mask_url_credentials(text: str) -> str:
    """`text` with every URL's password masked (`user:••••••@`); a userinfo without a colon is masked
    whole, since a lone token there (`https://TOKEN@host`) is a secret too."""

    def replace(match: re.Match[str]) -> str:
        user, colon, _ = match["userinfo"].partition(":")
        shown = f"{user}:{MASK}" if colon else MASK
        return f"{match['scheme']}{shown}@"

    return _USERINFO.sub(replace, text)
