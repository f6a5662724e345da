"""The engine's Unix socket: the listener and each gateway connection's life, from accept to close.

One task per connection reads lines with a bounded buffer and hands them, in order, to the
`FrameDispatcher` (frame_dispatch.py), so an `ack` always follows the handler having made the message
durable, and a gateway can replay safely. An oversized line gets an `error` frame and is skipped; the
connection goes on. How many connections may be open and how many bytes their unfinished frames
may hold is bounded (socket_limits.py): one past either bound is told why in an `error` frame and
closed; so is one that leaves more than `MAX_UNREAD_BYTES` of what it is sent unread (decision 535). The
engine reaches gateways through this class, which delegates routing by `hello` and queueing to
`OutboundRoutes` (outbound_routes.py); the socket file (0600, stale or live)
is `SocketFile` (socket_file.py). Kept to the lifecycle so that shutdown (stop accepting, tell every
gateway, close with a grace period) reads in one place. Logs carry frame types, ids, sizes and peer
counts, never message text.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from pathlib import Path

from klaw.engine.delivery import Outbound
from klaw.engine.frame_dispatch import FrameDispatcher, FrameHandler, QueryHandler
from klaw.engine.frame_parts import outbound_parts
from klaw.engine.frames import MAX_FRAME_BYTES, DeltaFrame, ErrorFrame, FrameReader, OutboundFrame, ShutdownFrame
from klaw.engine.gateway_connection import GatewayConnection
from klaw.engine.message_origins import MessageOrigins
from klaw.engine.outbound_routes import OutboundRoutes
from klaw.engine.socket_file import EngineSocketError, SocketFile
from klaw.engine.socket_limits import (
    MAX_CONNECTIONS,
    MAX_LINGERING,
    MAX_UNREAD_BYTES,
    REFUSED_LINGER_SECONDS,
    UNFINISHED_BYTES_BUDGET,
    UnfinishedFrames,
    stalled_frame,
    too_many_connections,
)

log = logging.getLogger(__name__)


class EngineSocketServer:
    """The listening socket and its connections; the engine's way to reach gateways."""

    def __init__(
        self,
        path: Path,
        handler: FrameHandler | None = None,
        *,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        outbound_queue_limit: int = 1000,
        queries: QueryHandler | None = None,
        max_connections: int = MAX_CONNECTIONS,
        unfinished_bytes_budget: int = UNFINISHED_BYTES_BUDGET,
        max_unread_bytes: int = MAX_UNREAD_BYTES,
    ) -> None:
        self.path = path
        self._file = SocketFile(path)
        self._max = max_frame_bytes
        self._routes = OutboundRoutes(max_frame_bytes=max_frame_bytes, queue_limit=outbound_queue_limit)
        self._queries = queries
        self.origins = MessageOrigins()  # where each message came from, for its reply's label (decision 535)
        self._dispatcher: FrameDispatcher | None = None
        if handler is not None:
            self._dispatcher = FrameDispatcher(
                handler,
                self._routes,
                queries=queries,
                max_frame_bytes=max_frame_bytes,
                home=path.parent,
                origins=self.origins,
            )
        self._server: asyncio.Server | None = None
        self._bound: socket.socket | None = None  # claimed by `bind`, not yet listening
        self._connections: dict[GatewayConnection, asyncio.Task[None]] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self._closed_to_new = asyncio.Event()
        self._count = 0
        self._max_connections = max_connections
        self._max_unread = max_unread_bytes  # what one connection may leave unread before it is dropped (535)
        self._unfinished = UnfinishedFrames[GatewayConnection](unfinished_bytes_budget)
        self._full = False  # refusing connections; logged once per spell
        self._lingering = 0  # refused connections being read from until they close

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def pending_outbound(self, channel: str) -> int:
        """How many outbound frames wait for a gateway serving `channel`."""
        return self._routes.pending(channel)

    async def bind(self) -> None:
        """Claim `path` (mode 0600) without listening yet; raises `EngineSocketError` or
        `EngineAlreadyRunningError`. The engine claims it before start-up recovery, so a second engine
        fails before touching anything, and listens only after recovery (`start`)."""
        if self._server is not None or self._bound is not None:
            raise EngineSocketError("the engine socket server is already started")
        await self._file.remove_stale()
        self._bound = self._file.bind()

    async def start(self, handler: FrameHandler | None = None, queries: QueryHandler | None = None) -> None:
        """Listen on `path` (bound first if `bind` was not called), frames going to `handler` (or the
        one given at construction). The engine builds its server before the parts that answer frames
        (they deliver through it), so it gives the handler here."""
        if handler is not None:
            queries = queries or self._queries
            self._dispatcher = FrameDispatcher(
                handler,
                self._routes,
                queries=queries,
                max_frame_bytes=self._max,
                home=self.path.parent,
                origins=self.origins,
            )
        if self._dispatcher is None:
            raise EngineSocketError("the engine socket server has no frame handler")
        if self._bound is None:
            await self.bind()
        sock, self._bound = self._bound, None
        assert sock is not None
        try:
            self._server = await asyncio.start_unix_server(self._serve, sock=sock)
        except BaseException:
            sock.close()
            self._file.remove()
            raise
        log.info("engine socket listening on %s", self.path)

    async def stop_accepting(self) -> None:
        """Close the listening socket; connected gateways stay connected (to receive the last replies)."""
        if self._server is not None:
            self._server.close()
        self._closed_to_new.set()

    async def wait_stopped_accepting(self) -> None:
        """Return once the listener is closed and a new gateway would be refused. For tests that must
        see a shutdown begin: it closes the listener first, then drains, with no other outside sign."""
        await self._closed_to_new.wait()

    async def wait_disconnected(self) -> None:
        """Return once no gateway is connected (e.g. after `broadcast_shutdown`, under a timeout)."""
        await self._idle.wait()

    async def aclose(self, grace_seconds: float = 5.0) -> None:
        """Close every connection and remove the socket file; handlers get `grace_seconds` to finish."""
        await self.stop_accepting()
        me = asyncio.current_task()
        tasks = [task for task in self._connections.values() if task is not me]
        for conn in list(self._connections):
            conn.close()
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=grace_seconds)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None
        if self._bound is not None:
            self._bound.close()
            self._bound = None
        self._file.remove()

    async def send_outbound(self, frame: OutboundFrame) -> bool:
        """Write to the gateway serving the channel; True if written now, False if queued for later.

        A text too large for one frame goes as several frames in order (frame_parts.py).
        """
        written = True
        for part in outbound_parts(frame, self._max):
            written = await self._routes.send_outbound(part) and written
        return written

    async def send_reply(self, outbound: Outbound) -> None:
        """`Delivery`'s way to a gateway: the reply as `outbound` frames (queued while none serves it)."""
        chat = outbound.chat
        frame = OutboundFrame(
            channel=chat.channel,
            chat_id=chat.chat_id,
            text=outbound.text,
            reply_to=outbound.reply_to,
            kind=outbound.kind,
            task=outbound.task,
            spawned=outbound.spawned,
            sent_from=outbound.sent_from,
            approval=outbound.approval,
            id=outbound.id,
            answers=outbound.answers,
            tools=outbound.tools,
            forgotten=outbound.forgotten,
            origin=self.origins.of(outbound.reply_to) if outbound.kind != "notice" else None,
        )
        await self.send_outbound(frame)

    async def send_reply_delta(self, delta: Outbound) -> None:
        chat = delta.chat
        await self.send_delta(
            DeltaFrame(channel=chat.channel, chat_id=chat.chat_id, text=delta.text, reply_to=delta.reply_to)
        )

    def serves(self, channel: str) -> bool:
        """Whether a connected gateway serves `channel` now."""
        return self._routes.serves(channel)

    def wants_delta(self, channel: str) -> bool:
        """Whether the gateway serving `channel` asked for its replies as deltas too."""
        return self._routes.wants_delta(channel)

    async def send_delta(self, frame: DeltaFrame) -> bool:
        """Best effort: write to the gateway serving the channel if it wants deltas; never queued."""
        return await self._routes.send_delta(frame)

    async def broadcast_shutdown(self, reason: str | None = None) -> int:
        """Tell every gateway the engine is going down; returns how many were told."""
        frame = ShutdownFrame(reason=reason)
        sent = await asyncio.gather(*(conn.send(frame) for conn in list(self._connections)))
        log.info("shutdown sent to %d of %d gateways", sum(sent), len(sent))
        return sum(sent)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._count += 1
        conn = GatewayConnection(f"gateway#{self._count}", writer, max_unread=self._max_unread)
        if len(self._connections) >= self._max_connections:
            if not self._full:
                log.warning("refusing connections: %d are open, the limit", len(self._connections))
            self._full = True
            await self._refuse(conn, reader)
            return
        self._full = False
        task = asyncio.current_task()
        assert task is not None  # start_unix_server runs each connection in its own task
        self._connections[conn] = task
        self._idle.clear()
        log.info("%s connected (%d connected)", conn.name, len(self._connections))
        lines = FrameReader(reader, self._max, held=lambda size: self._held(conn, size))
        try:
            while (line := await lines.next()) is not None:
                if isinstance(line, int):
                    log.warning("%s sent a frame over %d bytes (%d seen), skipping it", conn.name, self._max, line)
                    await conn.send(ErrorFrame(code="frame_too_large", message=f"frame exceeds {self._max} bytes"))
                elif line.strip():  # blank lines are tolerated, e.g. from a person typing into socat
                    assert self._dispatcher is not None  # set before listening
                    await self._dispatcher.dispatch(conn, line)
            if lines.mid_frame:
                log.info("%s disconnected in the middle of a frame", conn.name)
        except OSError as exc:
            log.info("%s connection lost (%s)", conn.name, type(exc).__name__)
        except Exception:
            log.exception("unexpected error serving %s", conn.name)
        finally:
            self._forget(conn)
            conn.close()
            await conn.wait_closed()

    async def _refuse(self, conn: GatewayConnection, reader: asyncio.StreamReader) -> None:
        """Tell a connection past the cap why; read and drop what it sends until it closes (a while at most),
        so its first frame does not reset the connection before it read the sentence (socket_limits.py)."""
        frame = ErrorFrame(code="refused", message=too_many_connections(self._max_connections))
        if self._lingering >= MAX_LINGERING:
            conn.refuse(frame)
            await conn.wait_closed()
            return
        self._lingering += 1
        try:
            conn.tell_and_stop_writing(frame)
            with contextlib.suppress(OSError, TimeoutError):
                async with asyncio.timeout(REFUSED_LINGER_SECONDS):
                    while await reader.read(1 << 16):
                        pass
        finally:
            self._lingering -= 1
            conn.close()
            await conn.wait_closed()

    def _held(self, conn: GatewayConnection, size: int) -> None:
        """`conn` waits for the rest of a frame, holding `size` bytes: drop the oldest past the budget."""
        for peer, held in self._unfinished.hold(conn, 0 if conn.closing else size):
            log.warning("%s dropped: its unfinished frame (%d bytes) was the oldest past the budget", peer.name, held)
            peer.refuse(ErrorFrame(code="refused", message=stalled_frame(held)))

    def _forget(self, conn: GatewayConnection) -> None:
        for gone in conn.on_close:
            try:
                gone()
            except Exception:
                log.exception("%s: what waited for its close failed", conn.name)
        self._unfinished.hold(conn, 0)
        self._connections.pop(conn, None)
        self._routes.forget(conn)
        if not self._connections:
            self._idle.set()
        log.info("%s disconnected (%d connected)", conn.name, len(self._connections))
