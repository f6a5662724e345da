"""A URL MCP server's answers to klaw's requests, read at most 16 MB each (decision 309).

The SDK reads an `application/json` answer whole (`response.aread()`) and an answer of server-sent events
until the server ends it: a server answering a body without end, or events without end, was read into
memory until the call's timeout, and an abandoned call's answer went on being read after it. Here an httpx
response hook (`answer_cap`) puts a counting stream under each answer to a POST or DELETE: past
`Overflow.limit` bytes it notes the overflow, tells the link (which ends the server's session and starts a
new one after the usual backoff) and fails the read. klaw asks for answers uncompressed (`IDENTITY`); one
compressed anyway (gzip, deflate) is unpacked a bounded piece at a time by the model client's code
(`klaw/unpacking.py`, decisions 333 and 342) and the count is of the unpacked bytes, so a decompression bomb
is cut at the same cap. A coding klaw does not undo (br, zstd), or corrupt data, ends the read the same way,
named.

The server's own stream (the GET the SDK keeps open for the whole session) is not counted in total: it is
meant to last, and the SDK bounds each of its events (`max_sse_event_size`, given the same cap).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import NoReturn

import httpx2

from klaw.errors import KlawError
from klaw.tools.mcp.overflow import Kind, Overflow
from klaw.unpacking import CodingError, codings, unpacked

IDENTITY = {"Accept-Encoding": "identity"}


class AnswerTooLong(KlawError, RuntimeError):
    """Fails the SDK's read of an answer past the cap (the link words the reason from `Overflow`)."""


class _CappedBody(httpx2.AsyncByteStream):
    """An answer's bytes as they come, unpacked if they came compressed, failing once more than
    `overflow.limit` have come unpacked (or at once if they came in a coding klaw does not undo)."""

    def __init__(
        self,
        inner: httpx2.AsyncByteStream,
        overflow: Overflow,
        on_overflow: Callable[[], None],
        *,
        applied: list[str],
        refused: str | None,
    ) -> None:
        self._inner = inner
        self._overflow = overflow
        self._on_overflow = on_overflow
        self._applied = applied
        self._refused = refused

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._refused is not None:
            self._stop("coding", self._refused)
        read = 0
        try:
            async for chunk in unpacked(self._inner, self._applied):  # the stream itself when uncompressed
                read += len(chunk)
                if read > self._overflow.limit:
                    self._stop("answer")
                yield chunk
        except CodingError as exc:  # corrupt compressed data
            self._stop("coding", str(exc))

    def _stop(self, kind: Kind, detail: str = "") -> NoReturn:
        self._overflow.kind = kind
        self._overflow.detail = detail
        self._on_overflow()
        raise AnswerTooLong(f"the MCP server {self._overflow.words()}")

    async def aclose(self) -> None:
        await self._inner.aclose()


def answer_cap(overflow: Overflow, on_overflow: Callable[[], None]) -> Callable[[httpx2.Response], Awaitable[None]]:
    """The response hook bounding each answer to a POST or DELETE (module docstring)."""

    async def hook(response: httpx2.Response) -> None:
        if response.request.method == "GET":
            return
        assert isinstance(response.stream, httpx2.AsyncByteStream)  # an AsyncClient's
        applied: list[str] = []
        refused: str | None = None
        try:
            applied = codings(response.headers)
        except CodingError as exc:
            refused = str(exc)
        # unpacked here, bounded: httpx2 must not unpack again, each read whole (it reads this header lazily)
        if "content-encoding" in response.headers:
            del response.headers["content-encoding"]
        response.stream = _CappedBody(response.stream, overflow, on_overflow, applied=applied, refused=refused)

    return hook
