"""Secrets kept out of text a person or a log will read: the credentials in a URL's userinfo and the
values of its query string.

A base URL may carry a password (`https://user:pw@proxy/v1`) or a key in its query (Azure's and some
proxies' `…/v1?api-key=SECRET`), and every message naming the endpoint
(a failed turn's reply in the chat, a log line, `klaw config check`) would repeat it. Text is masked
where it is made, so a new message cannot forget. Imports nothing of klaw: `llm` and the config use it.
"""

from __future__ import annotations

import re

MASK = "••••••"

# scheme://userinfo@ — userinfo is everything up to the first '@' before the host (no '/', no space).
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/\s@]+)@")
# scheme://… ? query — up to a space, a quote, a fragment or a closing bracket around the URL.
_QUERY = re.compile(r"(?P<before>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s?#'\"<>]*\?)(?P<query>[^\s#'\"<>)\]]*)")


def mask_url_credentials(text: str) -> str:
    """`text` with every URL's password masked (`user:••••••@`) and each value in its query string
    (`?api-key=••••••&api-version=••••••`: which parameter is a key cannot be told, so none is shown,
    the names kept for the person to recognise); a userinfo without a colon, or a parameter without a
    value, is masked whole, since a lone token there (`https://TOKEN@host`, `?TOKEN`) is a secret too."""

    def userinfo(match: re.Match[str]) -> str:
        user, colon, _ = match["userinfo"].partition(":")
        shown = f"{user}:{MASK}" if colon else MASK
        return f"{match['scheme']}{shown}@"

    def query(match: re.Match[str]) -> str:
        parameters = [_masked_parameter(part) for part in match["query"].split("&")]
        return match["before"] + "&".join(parameters)

    return _QUERY.sub(query, _USERINFO.sub(userinfo, text))


def _masked_parameter(part: str) -> str:
    name, equals, value = part.partition("=")
    if not equals:
        return MASK if name else ""
    return f"{name}={MASK}" if value else f"{name}="
