"""A server's compressed answer, unpacked a bounded piece at a time (decisions 333, 342).

klaw asks a model server and a URL MCP server for answers uncompressed, but a server or a proxy in front of
it may compress anyway. Both read the answer through `unpacked` (the model client with httpx, the MCP SDK with
httpx2: `codings` takes either's headers), so the cap each counts is of the unpacked bytes. httpx's
own decoders unpack each network read whole (`zlib`'s `decompress(data)` without a limit): one 64 KB read
of a gzip bomb unpacks to ~64 MB, and a stacked coding (`gzip, gzip`) turns 10 KB on the wire into
gigabytes inside a single call, before any count of the bytes can run. Here every zlib call is given
`PIECE` as its `max_length`, and what it could not unpack yet waits in `unconsumed_tail` for the next call:
whatever the ratio, at most `PIECE` bytes exist at a time beyond what the reader above keeps, so the
count above it (`llm/answer_cap.py`, `tools/mcp/http_answers.py`: 16 MB each) cuts a bomb at the cap.

gzip (x-gzip) and deflate are undone, up to `MAX_CODINGS` stacked; any other coding (br, zstd: httpx
would need packages klaw does not install) is refused by `codings`, naming it.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass
from typing import Protocol

from klaw.errors import KlawError

PIECE = 64 * 1024
MAX_CODINGS = 2
ZLIB_HEADER = 2  # bytes
GZIP_MAGIC = b"\x1f\x8b"
MAX_GZIP_MEMBERS = 1000
"""gzip members read one after another; more is a stream of (empty) members that would never end."""
_GZIP = zlib.MAX_WBITS | 16
_WBITS = {"gzip": _GZIP, "x-gzip": _GZIP, "deflate": zlib.MAX_WBITS}
UNDONE = "gzip and deflate"


class CodingError(KlawError, ValueError):
    """A coding klaw does not undo, or compressed data that is corrupt; its text says which."""


class Headers(Protocol):
    """An answer's headers: httpx's or httpx2's (the MCP SDK's), which are not the same class."""

    def __contains__(self, key: object) -> bool: ...

    def get_list(self, key: str, split_commas: bool = False) -> list[str]: ...


def codings(headers: Headers) -> list[str]:
    """The content-codings of an answer, in the order they were applied ([] for none or identity);
    `CodingError` for one klaw does not undo or too many stacked."""
    if "content-encoding" not in headers:  # nearly every answer: no list built on each model request
        return []
    named = [value.strip().lower() for value in headers.get_list("content-encoding", split_commas=True)]
    named = [coding for coding in named if coding and coding != "identity"]
    unknown = [coding[:20] for coding in named if coding not in _WBITS]
    if unknown:
        raise CodingError(f"it sent its answer in a compression klaw cannot undo ({', '.join(unknown[:3])})")
    if len(named) > MAX_CODINGS:
        raise CodingError(f"it sent its answer compressed {len(named)} times over")
    return named


@dataclass(frozen=True)
class Words:
    """Who sent the compressed data and what it was, for `CodingError`'s text: a model's or MCP server's answer
    by default ("its gzip data is corrupt"), a web page for web_fetch ("the page's gzip data is corrupt")."""

    sender: str = "it"
    thing: str = "its answer"
    whose: str = "its"


def unpacked(raw: AsyncIterable[bytes], applied: list[str], words: Words = Words()) -> AsyncIterable[bytes]:
    """`raw` with the `applied` codings undone, last applied first, in pieces of at most `PIECE` bytes."""
    stream = raw
    for coding in reversed(applied):
        stream = _undone(stream, coding, words)
    return stream


async def _undone(raw: AsyncIterable[bytes], coding: str, words: Words) -> AsyncIterator[bytes]:
    """One coding undone. The answer ends where the compressed stream does: what follows is not read (httpx
    read it and threw it away, so a server could send junk there without end, never counted), unless it is
    another gzip member (RFC 1952: a gzip file may be several, one after another; a page served as such lost
    all but its first, presented as whole; adversary13), up to `MAX_GZIP_MEMBERS`. A stream that ends before
    its compressed data does was cut off, and is said to be (httpx passed on what it had, to be called "not
    valid JSON"); one that holds no bytes at all is an empty answer."""
    inflater = zlib.decompressobj(_WBITS[coding])
    members, fed, carry = 1, False, b""
    async for data in _opening(raw) if coding == "deflate" else raw:
        if not data:
            continue
        data, carry = carry + data, b""
        first, fed = not fed, True
        while True:
            if inflater.eof:  # a member ended: another one, or the end of what is read
                if coding == "deflate" or (data and not GZIP_MAGIC.startswith(data[: len(GZIP_MAGIC)])):
                    return
                if len(data) < len(GZIP_MAGIC):
                    carry = data  # the next member's magic may be split between two reads
                    break
                members += 1
                if members > MAX_GZIP_MEMBERS:
                    raise CodingError(f"{words.whose} gzip data holds more than {MAX_GZIP_MEMBERS} members")
                inflater = zlib.decompressobj(_GZIP)
            try:
                out = inflater.decompress(data, PIECE)
            except zlib.error as exc:
                if first and coding == "deflate":  # servers that send raw deflate without the zlib header
                    inflater, first = zlib.decompressobj(-zlib.MAX_WBITS), False
                    continue
                raise CodingError(f"{words.whose} {coding} data is corrupt ({exc})") from None
            first = False
            data = inflater.unused_data if inflater.eof else inflater.unconsumed_tail
            if out:
                yield out
            if not data and len(out) < PIECE:  # all read, nothing held back: a full piece may have more
                break
    if fed and not inflater.eof:
        raise CodingError(
            f"{words.sender} sent {words.thing} cut off midway: the stream ended before {words.whose} {coding} data did"
        )


async def _opening(raw: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
    """`raw`'s pieces, the first non-empty one holding at least `ZLIB_HEADER` bytes (or all there are): deflate
    is told from raw deflate by its 2-byte zlib header, which a first piece of 1 byte (or 0) does not hold
    whole, so that answer was called corrupt (httpx has the same flaw)."""
    held = b""
    opened = False
    async for data in raw:
        if not opened:
            held += data
            if len(held) < ZLIB_HEADER:
                continue
            data, held, opened = held, b"", True
        yield data
    if held:
        yield held
