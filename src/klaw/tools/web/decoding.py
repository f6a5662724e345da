"""web_fetch's content-coding: the one it asks for, the one it takes, and the words it unpacks a page with.

The unpacking itself is klaw's shared bounded one (`klaw/unpacking.py`, decision 363): every zlib call gives
out at most 64 KB, so a gzip bomb never unpacks a read whole before `fetch.py` counts it against `maxBytes`
(decision 294). What stays here is web_fetch's own rule on the header: it asks for gzip and deflate, and
undoes one of them only (a page compressed twice over can unpack to gigabytes, and no server compresses a page
twice unasked), refused with words naming the header and how the tool reads pages.
"""

from __future__ import annotations

from klaw.tools.web.errors import WebError
from klaw.unpacking import Words

ACCEPT_ENCODING = "gzip, deflate"
_UNDONE = frozenset({"gzip", "x-gzip", "deflate"})
PAGE = Words(sender="the server", thing="the page", whose="the page's")


def content_coding(header: str) -> list[str]:
    """The content-coding `header` names (lower case), [] for none/identity; WebError when it names more than
    one, or one web_fetch did not ask for."""
    codings = [part.strip().lower() for part in header.split(",")]
    codings = [coding for coding in codings if coding and coding != "identity"]
    shown = ", ".join(coding[:20] for coding in codings[:5])
    if len(codings) > 1:
        raise WebError(
            f"the server sent the page compressed {len(codings)} times over (Content-Encoding: {shown}):"
            " web_fetch undoes one compression only, as a page compressed twice can unpack to gigabytes"
        )
    if codings and codings[0] not in _UNDONE:
        raise WebError(
            f"the server sent the page in a compression web_fetch cannot undo (Content-Encoding: {shown});"
            f" it asks for {ACCEPT_ENCODING} only"
        )
    return codings
