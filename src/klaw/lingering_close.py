"""A lingering close for a response sent before its request's body arrived (the web page's 408, 413,
401 to a body still coming): shut the sending side, read and drop what still comes for a while, then close.

Closing at once with the client still writing made the kernel answer its next bytes with a TCP reset,
and a reset can destroy the answer before the client reads it: a client that writes its whole body
before reading (most do) saw "connection reset", not the 408 that said what was wrong. Shutting the
write side sends the answer and a FIN; the client's bytes are read and dropped (never parsed: they are
the rest of a refused body) until it closes too, `LINGER_SECONDS` pass or `LINGER_BYTES` arrive.

uvicorn's protocols close through the transport they were given (`transport.close()` once a response
with `Connection: close` is sent), so the server hands them this wrapper; every other call goes to the
asyncio transport unchanged. A close with no body still coming (a finished request, an idle
keep-alive) closes at once, as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

LINGER_SECONDS = 2.0
"""How long a refused body may go on arriving before the connection is cut: its sender has the answer
by then, and a connection held longer would be one more slot a flood could keep (decision 367)."""
LINGER_BYTES = 1 << 20
"""What is read and dropped at most: the largest body the page takes (body_guard.MAX_BODY_BYTES)."""


class LingeringTransport:
    """`transport` as uvicorn's protocol uses it, whose `close` lingers while `body_pending()` is true."""

    def __init__(self, transport: asyncio.Transport, body_pending: Callable[[], bool]) -> None:
        self._transport = transport
        self._body_pending = body_pending
        self._dropped = 0
        self.lingering = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def is_closing(self) -> bool:
        return self.lingering or self._transport.is_closing()

    def close(self) -> None:
        if self.lingering or self._transport.is_closing():
            return
        if not (self._body_pending() and self._transport.can_write_eof()):
            self._transport.close()
            return
        self.lingering = True
        self._transport.write_eof()  # after what is buffered: the answer, then a FIN
        self._transport.resume_reading()  # the protocol may have paused it while the body piled up
        asyncio.get_running_loop().call_later(LINGER_SECONDS, self._transport.close)

    def drop(self, data: bytes) -> None:
        """Bytes that came while lingering: dropped, and the connection cut past `LINGER_BYTES`."""
        self._dropped += len(data)
        if self._dropped > LINGER_BYTES:
            self._transport.close()

    def cut(self) -> None:
        """Close at once, never lingering: a connection closed to make room, or a head overdue."""
        self._transport.close()
