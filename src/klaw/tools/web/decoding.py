"""`BoundedDecoder`: a body's content-coding undone from its raw bytes, never more than the limit out.

httpx's own decoders inflate each chunk whole: one 64 KB chunk of a gzip bomb can inflate to tens
of megabytes, and a stacked coding (`gzip, gzip`) turns 1.7 KB on the wire into a gigabyte inside a
single call, before any size check can run (decision 294). Here every zlib call is given the room
left under `maxBytes` as its `max_length`, so decoding stops one byte past the limit whatever the
ratio. One coding at most: gzip (x-gzip) or deflate, the ones klaw asks for in `Accept-Encoding`;
a stacked or unknown coding is refused, naming it.
"""

from __future__ import annotations

import zlib

from klaw.tools.web.errors import WebError

ACCEPT_ENCODING = "gzip, deflate"
_GZIP = zlib.MAX_WBITS | 16
_ZLIB = zlib.MAX_WBITS
_RAW_DEFLATE = -zlib.MAX_WBITS
_WBITS = {"gzip": _GZIP, "x-gzip": _GZIP, "deflate": _ZLIB}


def content_coding(header: str) -> str | None:
    """The one content-coding `header` names (lower case), None for none/identity; WebError otherwise."""
    codings = [part.strip().lower() for part in header.split(",")]
    codings = [coding for coding in codings if coding and coding != "identity"]
    shown = ", ".join(coding[:20] for coding in codings[:5])
    if len(codings) > 1:
        raise WebError(
            f"the server sent the page compressed {len(codings)} times over (Content-Encoding: {shown}):"
            " web_fetch undoes one compression only, as a page compressed twice can unpack to gigabytes"
        )
    if codings and codings[0] not in _WBITS:
        raise WebError(
            f"the server sent the page in a compression web_fetch cannot undo (Content-Encoding: {shown});"
            f" it asks for {ACCEPT_ENCODING} only"
        )
    return codings[0] if codings else None


class BoundedDecoder:
    """Raw body bytes in, decoded bytes out, at most `limit` + 1 of them in all (one past: "too large")."""

    def __init__(self, coding: str | None, limit: int) -> None:
        self._coding = coding
        self._limit = limit
        self._produced = 0
        self._first = True
        self._inflater = zlib.decompressobj(_WBITS[coding]) if coding is not None else None

    def decode(self, raw: bytes) -> bytes:
        """The bytes `raw` decodes to, cut at one past the limit (the caller refuses the page then)."""
        room = max(self._limit + 1 - self._produced, 0)
        out = raw[:room] if self._inflater is None else self._inflate(raw, room)
        self._produced += len(out)
        return out

    def _inflate(self, raw: bytes, room: int) -> bytes:
        """At most `room` bytes from `raw`: zlib's `max_length` bounds the output of every call, and a
        max_length of 0 would mean "no limit", so nothing is asked once the room is spent. Data after
        the end of the stream is ignored, as httpx does."""
        assert self._inflater is not None
        if room <= 0 or self._inflater.eof or not raw:
            return b""
        first, self._first = self._first, False
        try:
            return self._inflater.decompress(raw, room)
        except zlib.error as exc:
            if first and self._coding == "deflate":  # servers that send raw deflate without the zlib header
                self._inflater = zlib.decompressobj(_RAW_DEFLATE)
                return self._inflate(raw, room)
            raise WebError(f"the page's {self._coding} data is corrupt ({exc})") from None
