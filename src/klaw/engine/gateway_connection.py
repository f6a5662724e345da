"""One gateway's connection as the engine writes to it: whole frames, a bounded wait, a lock for order.

Apart from the server so that the dispatcher and the outbound routes can write to a connection
without knowing how connections are accepted. Every write waits at most `DRAIN_TIMEOUT_SECONDS` for
the gateway to read: a stuck gateway is dropped rather than left to block a turn's reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from contextvars import ContextVar

from klaw.engine.frames import EngineFrame, FrameError, encode_frame

log = logging.getLogger(__name__)

DRAIN_TIMEOUT_SECONDS = 10.0
"""A gateway that does not read for this long is stuck; its connection is dropped so the engine never blocks on it."""

ASKING: ContextVar[GatewayConnection | None] = ContextVar("asking", default=None)
"""The connection whose query is being answered: a query that acts when it closes (`piped`) reads it."""


class GatewayConnection:
    """One gateway connection; the lock keeps each frame whole and flushed queues in order."""

    def __init__(self, name: str, writer: asyncio.StreamWriter) -> None:
        self.name = name
        self.lock = asyncio.Lock()
        self.streaming: frozenset[str] = frozenset()  # channels whose replies it wants as deltas too
        self._writer = writer
        self.on_close: list[Callable[[], None]] = []  # told once it is gone (a piped chat's questions, 521)

    async def send(self, frame: EngineFrame) -> bool:
        """Encode and write one frame under the lock; False if the connection is gone or stuck."""
        try:
            data = encode_frame(frame)
        except FrameError as exc:  # e.g. a pong echoing an id too long to fit: tell the peer instead
            data = encode_frame(exc.to_frame())
        async with self.lock:
            return await self.write_locked(data)

    async def write_locked(self, data: bytes) -> bool:
        """Write one encoded frame (caller holds `lock`); False if the connection is gone or stuck."""
        if self._writer.is_closing():
            return False
        try:
            self._writer.write(data)
            async with asyncio.timeout(DRAIN_TIMEOUT_SECONDS):
                await self._writer.drain()
        except OSError as exc:  # ConnectionError, and TimeoutError from a gateway that stopped reading
            log.warning("%s: write failed (%s), dropping the connection", self.name, type(exc).__name__)
            self._writer.transport.abort()
            return False
        return True

    def refuse(self, frame: EngineFrame) -> None:
        """Tell the peer why in one last frame and close, without waiting: for a peer being dropped
        (socket_limits.py). Written whole in one call, so it cannot split another frame."""
        if not self._writer.is_closing():
            self._writer.write(encode_frame(frame))
            self._writer.close()  # lets the frame out first, but a peer not reading would keep it open:
            asyncio.get_running_loop().call_later(DRAIN_TIMEOUT_SECONDS, self._writer.transport.abort)

    def tell_and_stop_writing(self, frame: EngineFrame) -> None:
        """Write one last frame and end this side (the peer reads it, then EOF), keeping the connection
        open to read: for a refused peer, whose own first frame must not find it closed (socket_limits.py)."""
        self._writer.write(encode_frame(frame))
        if self._writer.can_write_eof():
            self._writer.write_eof()

    @property
    def closing(self) -> bool:
        return self._writer.is_closing()

    def close(self) -> None:
        self._writer.close()

    async def wait_closed(self) -> None:
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()
