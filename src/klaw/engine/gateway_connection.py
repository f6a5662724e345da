"""One gateway's connection as the engine writes to it: whole frames, a bound on what waits unread, a lock for order.

Apart from the server so that the dispatcher and the outbound routes can write to a connection
without knowing how connections are accepted. What answers the connection's own frames (an ack, a
query's result, the replies flushed at its hello) waits at most `DRAIN_TIMEOUT_SECONDS` for it to read:
a connection that stops reading holds only itself up. What is sent to it from elsewhere (a reply of a
turn, a copy for a watcher, a delta) never waits for it (`write_now`): it goes into the connection's own
buffer, and a connection with more than `MAX_UNREAD_BYTES` waiting unread there has fallen behind and is
dropped, told why in a last `error` frame, so a slow reader never delays another client's replies
(decision 535; before, a pipe or watcher that stopped reading held every reply of its channel up to 10 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from contextvars import ContextVar

from klaw.engine.frames import EngineFrame, ErrorFrame, FrameError, encode_frame
from klaw.engine.socket_limits import MAX_UNREAD_BYTES, fell_behind

log = logging.getLogger(__name__)

DRAIN_TIMEOUT_SECONDS = 10.0
"""A gateway that does not read its own answers for this long is stuck; its connection is dropped."""

ASKING: ContextVar[GatewayConnection | None] = ContextVar("asking", default=None)
"""The connection whose query is being answered: a query that acts when it closes (`piped`) reads it."""


class GatewayConnection:
    """One gateway connection; the lock keeps flushed queues in order."""

    def __init__(self, name: str, writer: asyncio.StreamWriter, *, max_unread: int = MAX_UNREAD_BYTES) -> None:
        self.name = name
        self.lock = asyncio.Lock()
        self.streaming: frozenset[str] = frozenset()  # channels whose replies it wants as deltas too
        self.serves: frozenset[str] = frozenset()  # what its hello said, for where its messages came from (535)
        self.watches: frozenset[str] = frozenset()
        self._writer = writer
        self._max_unread = max_unread
        self.on_close: list[Callable[[], None]] = []  # told once it is gone (a piped chat's questions, 521)

    async def send(self, frame: EngineFrame) -> bool:
        """Encode and write one frame of the connection's own (an answer to its frame) under the lock, waiting
        for it to read; False if the connection is gone or stuck."""
        async with self.lock:
            return await self.write_locked(_encoded(frame))

    def send_now(self, frame: EngineFrame) -> bool:
        """Encode and write one frame without waiting (`write_now`): a delta, sent from a turn."""
        return self.write_now(_encoded(frame))

    async def write_locked(self, data: bytes) -> bool:
        """Write one encoded frame (caller holds `lock`) and wait for the peer to read it; False if the
        connection is gone or stuck. Only for what answers the connection itself."""
        if not self.write_now(data):
            return False
        try:
            async with asyncio.timeout(DRAIN_TIMEOUT_SECONDS):
                await self._writer.drain()
        except OSError as exc:  # ConnectionError, and TimeoutError from a gateway that stopped reading
            log.warning("%s: write failed (%s), dropping the connection", self.name, type(exc).__name__)
            self._writer.transport.abort()
            return False
        return True

    def write_now(self, data: bytes) -> bool:
        """Write one encoded frame into the connection's buffer without waiting for it to be read (whole: one
        call); False if the connection is gone or would fall behind with it (dropped here, told why). A frame
        past the bound is not written: the caller queues it, and the buffer let out before the close must
        not hold it too, or a reader coming back reads it twice (decision 544)."""
        if self._writer.is_closing():
            return False
        unread = self._writer.transport.get_write_buffer_size() + len(data)
        if unread > self._max_unread:
            log.warning(
                "%s dropped: it fell behind (%d bytes of frames would wait unread, at most %d wait for one"
                " connection); the other connections are not held up by it",
                self.name,
                unread,
                self._max_unread,
            )
            self.refuse(ErrorFrame(code="refused", message=fell_behind(unread, self._max_unread)))
            return False
        try:
            self._writer.write(data)
        except OSError as exc:
            log.warning("%s: write failed (%s), dropping the connection", self.name, type(exc).__name__)
            self._writer.transport.abort()
            return False
        # the peer had gone: the write failed at once (the transport closed itself)
        return not self._writer.is_closing()

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


def _encoded(frame: EngineFrame) -> bytes:
    try:
        return encode_frame(frame)
    except FrameError as exc:  # e.g. a pong echoing an id too long to fit: tell the peer instead
        return encode_frame(exc.to_frame())
