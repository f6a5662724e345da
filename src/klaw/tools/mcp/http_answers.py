"""A URL MCP server's answers to klaw's requests, read at most 16 MB each (decision 309).

The SDK reads an `application/json` answer whole (`response.aread()`) and an answer of server-sent events
until the server ends it: a server answering a body without end, or events without end, was read into
memory until the call's timeout, and an abandoned call's answer went on being read after it. Here an httpx
response hook (`answer_cap`) puts a counting stream under each answer to a POST or DELETE: past
`Overflow.limit` bytes it notes the overflow, tells the link (which ends the server's session and starts a
new one after the usual backoff) and fails the read. klaw asks for answers uncompressed (`IDENTITY`): a
compressed one is refused at its first bytes, since its unpacked size cannot be bounded from the bytes read.

The server's own stream (the GET the SDK keeps open for the whole session) is not counted in total: it is
meant to last, and the SDK bounds each of its events (`max_sse_event_size`, given the same cap).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import NoReturn

import httpx2

from klaw.errors import KlawError
from klaw.tools.mcp.overflow import Kind, Overflow

IDENTITY = {"Accept-Encoding": "identity"}


class AnswerTooLong(KlawError, RuntimeError):
    """Fails the SDK's read of an answer past the cap (the link words the reason from `Overflow`)."""


class _CappedBody(httpx2.AsyncByteStream):
    """An answer's bytes as they come, failing once more than `overflow.limit` have come."""

    def __init__(
        self, inner: httpx2.AsyncByteStream, overflow: Overflow, on_overflow: Callable[[], None], *, packed: bool
    ) -> None:
        self._inner = inner
        self._overflow = overflow
        self._on_overflow = on_overflow
        self._packed = packed

    async def __aiter__(self) -> AsyncIterator[bytes]:
        read = 0
        async for chunk in self._inner:
            if self._packed and chunk:
                self._stop("compressed")
            read += len(chunk)
            if read > self._overflow.limit:
                self._stop("answer")
            yield chunk

    def _stop(self, kind: Kind) -> NoReturn:
        self._overflow.kind = kind
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
        encoding = response.headers.get("content-encoding", "").strip().lower()
        packed = encoding not in ("", "identity")
        response.stream = _CappedBody(response.stream, overflow, on_overflow, packed=packed)

    return hook
