"""The engine's Unix socket: gateways connect, send frames, and receive acks and outbound messages.

One task per connection reads lines with a bounded buffer and handles its frames in order, so an
`ack` always follows the handler having made the message durable, and a gateway can replay safely.
A bad frame (too large, not JSON, invalid, unknown type) gets an `error` frame and the connection
goes on: a gateway bug must not cut a chat off. Outbound frames go to the connection that most
recently said `hello` for their channel; with no gateway connected they wait in a bounded queue per
channel and are flushed in order on the next `hello`, so replies made while the gateway restarts
are not lost. Logs carry frame types, ids, sizes and peer counts, never message text.
`query` frames get a `result` from the optional `QueryHandler`; `delta` frames (a reply as it is
written) go only to a connection whose `hello` asked for them, and are dropped, never queued.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import stat
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from klaw.engine.frames import (
    MAX_FRAME_BYTES,
    AckFrame,
    CommandFrame,
    DeltaFrame,
    EngineFrame,
    ErrorFrame,
    FrameError,
    FrameReader,
    HelloFrame,
    InboundFrame,
    OutboundFrame,
    PingFrame,
    PongFrame,
    QueryFrame,
    ResultFrame,
    ShutdownFrame,
    decode_frame,
    encode_frame,
)

log = logging.getLogger(__name__)

DRAIN_TIMEOUT_SECONDS = 10.0
"""A gateway that does not read for this long is stuck; its connection is dropped so the engine never blocks on it."""
_MAX_UNIX_PATH_BYTES = 107  # sockaddr_un.sun_path is 108 bytes on Linux, including the NUL


class FrameHandler(Protocol):
    """What the engine does with a message: make it durable and return quickly; the server then acks."""

    async def on_inbound(self, frame: InboundFrame) -> None: ...

    async def on_command(self, frame: CommandFrame) -> None: ...


class QueryError(ValueError):
    """A query that cannot be answered (unknown name, bad parameter); the message goes back to the gateway."""


QueryHandler = Callable[[QueryFrame], Awaitable[Any]]  # JSON-able data, or QueryError with a sentence


class EngineSocketError(RuntimeError):
    """The socket could not be set up; the message says why, for the person starting the engine."""


class EngineAlreadyRunningError(EngineSocketError):
    """Another engine answers on the socket path; starting a second one would steal its gateways."""


class _Connection:
    """One gateway connection; the lock keeps each frame whole and flushed queues in order."""

    def __init__(self, name: str, writer: asyncio.StreamWriter) -> None:
        self.name = name
        self.lock = asyncio.Lock()
        self.streaming: frozenset[str] = frozenset()  # channels whose replies it wants as deltas too
        self._writer = writer

    async def send(self, frame: EngineFrame) -> bool:
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

    def close(self) -> None:
        self._writer.close()

    async def wait_closed(self) -> None:
        with contextlib.suppress(OSError):
            await self._writer.wait_closed()


class EngineSocketServer:
    """The listening socket, its connections, and outbound routing by channel."""

    def __init__(
        self,
        path: Path,
        handler: FrameHandler,
        *,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        outbound_queue_limit: int = 1000,
        queries: QueryHandler | None = None,
    ) -> None:
        self.path = path
        self._handler = handler
        self._queries = queries
        self._max = max_frame_bytes
        self._queue_limit = outbound_queue_limit
        self._server: asyncio.Server | None = None
        self._identity: tuple[int, int] | None = None  # (st_dev, st_ino) of our socket file
        self._connections: dict[_Connection, asyncio.Task[None]] = {}
        self._routes: dict[str, list[_Connection]] = {}  # channel → connections by hello time, latest last
        self._pending: dict[str, deque[bytes]] = {}  # channel → encoded outbound frames waiting for a gateway
        self._idle = asyncio.Event()
        self._idle.set()
        self._count = 0

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    def pending_outbound(self, channel: str) -> int:
        """How many outbound frames wait for a gateway serving `channel`."""
        return len(self._pending.get(channel, ()))

    async def start(self) -> None:
        """Listen on `path` (mode 0600); raises `EngineSocketError` or `EngineAlreadyRunningError`."""
        if self._server is not None:
            raise EngineSocketError("the engine socket server is already started")
        await self._remove_stale_socket()
        sock = self._bind()
        try:
            self._server = await asyncio.start_unix_server(self._serve, sock=sock)
        except BaseException:
            sock.close()
            self._remove_socket_file()
            raise
        log.info("engine socket listening on %s", self.path)

    async def stop_accepting(self) -> None:
        """Close the listening socket; connected gateways stay connected (to receive the last replies)."""
        if self._server is not None:
            self._server.close()

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
        self._remove_socket_file()

    async def send_outbound(self, frame: OutboundFrame) -> bool:
        """Write to the gateway serving the channel; True if written now, False if queued for later.

        Raises `FrameError("frame_too_large")` for a frame no gateway could accept: split the text.
        """
        data = encode_frame(frame, max_bytes=self._max)
        for conn in reversed(list(self._routes.get(frame.channel, ()))):
            async with conn.lock:  # anything still queued for the channel goes first, to keep the order
                if await self._flush_locked(conn, frame.channel) and await conn.write_locked(data):
                    return True
        self._enqueue(frame.channel, data)
        return False

    def wants_delta(self, channel: str) -> bool:
        """Whether the gateway serving `channel` asked for its replies as deltas too."""
        routes = self._routes.get(channel)
        return routes is not None and channel in routes[-1].streaming

    async def send_delta(self, frame: DeltaFrame) -> bool:
        """Best effort: write to the gateway serving the channel if it wants deltas; never queued."""
        routes = self._routes.get(frame.channel) if self.wants_delta(frame.channel) else None
        return routes is not None and await routes[-1].send(frame)

    async def broadcast_shutdown(self, reason: str | None = None) -> int:
        """Tell every gateway the engine is going down; returns how many were told."""
        frame = ShutdownFrame(reason=reason)
        sent = await asyncio.gather(*(conn.send(frame) for conn in list(self._connections)))
        log.info("shutdown sent to %d of %d gateways", sum(sent), len(sent))
        return sum(sent)

    async def _remove_stale_socket(self) -> None:
        try:
            mode = os.lstat(self.path).st_mode
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(mode):
            raise EngineSocketError(f"{self.path} exists and is not a socket; move it away and start again")
        try:
            async with asyncio.timeout(5):
                _, writer = await asyncio.open_unix_connection(str(self.path))
        except (ConnectionRefusedError, FileNotFoundError):
            log.info("removing stale engine socket %s (no engine answers on it)", self.path)
            self.path.unlink(missing_ok=True)
            return
        except TimeoutError:
            pass  # someone is listening but busy: treat as live
        except OSError as exc:  # e.g. a socket of another user
            raise EngineSocketError(f"cannot check {self.path}: {exc.strerror or exc}") from exc
        else:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()
        raise EngineAlreadyRunningError(f"another klaw engine is already running on {self.path}; stop it first")

    def _bind(self) -> socket.socket:
        if len(os.fsencode(self.path)) > _MAX_UNIX_PATH_BYTES:
            raise EngineSocketError(f"socket path {self.path} is longer than {_MAX_UNIX_PATH_BYTES} bytes")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # On Linux the socket file takes the socket inode's mode at bind: 0600 from birth, with no
            # process-wide umask change racing other threads. The chmod covers systems that ignore it.
            with contextlib.suppress(OSError):
                os.fchmod(sock.fileno(), 0o600)
            sock.bind(str(self.path))
            os.chmod(self.path, 0o600)
            info = os.stat(self.path)
        except OSError as exc:
            sock.close()
            raise EngineSocketError(f"cannot listen on {self.path}: {exc.strerror or exc}") from exc
        self._identity = (info.st_dev, info.st_ino)
        return sock

    def _remove_socket_file(self) -> None:
        """Unlink the socket file if it is still ours (not one a newer engine bound since)."""
        if self._identity is None:
            return
        with contextlib.suppress(FileNotFoundError):
            info = os.lstat(self.path)
            if (info.st_dev, info.st_ino) == self._identity:
                self.path.unlink()
        self._identity = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._count += 1
        conn = _Connection(f"gateway#{self._count}", writer)
        task = asyncio.current_task()
        assert task is not None  # start_unix_server runs each connection in its own task
        self._connections[conn] = task
        self._idle.clear()
        log.info("%s connected (%d connected)", conn.name, len(self._connections))
        lines = FrameReader(reader, self._max)
        try:
            while (line := await lines.next()) is not None:
                if isinstance(line, int):
                    log.warning("%s sent a frame over %d bytes (%d seen), skipping it", conn.name, self._max, line)
                    await conn.send(ErrorFrame(code="frame_too_large", message=f"frame exceeds {self._max} bytes"))
                elif line.strip():  # blank lines are tolerated, e.g. from a person typing into socat
                    await self._dispatch(conn, line)
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

    def _forget(self, conn: _Connection) -> None:
        self._connections.pop(conn, None)
        for channel, routes in list(self._routes.items()):
            if conn in routes:
                routes.remove(conn)
                if not routes:
                    del self._routes[channel]
        if not self._connections:
            self._idle.set()
        log.info("%s disconnected (%d connected)", conn.name, len(self._connections))

    async def _dispatch(self, conn: _Connection, line: bytes) -> None:
        try:
            frame = decode_frame(line, max_bytes=self._max)
        except FrameError as exc:
            log.warning("%s sent a bad frame (%d bytes): %s", conn.name, len(line), exc)
            await conn.send(exc.to_frame())
            return
        if isinstance(frame, InboundFrame | CommandFrame):
            await self._accept(conn, frame)
        elif isinstance(frame, PingFrame):
            await conn.send(PongFrame(id=frame.id))
        elif isinstance(frame, QueryFrame):
            await self._query(conn, frame)
        elif isinstance(frame, HelloFrame):
            conn.streaming = frozenset(frame.streaming)
            await self._hello(conn, frame.channels)
        elif isinstance(frame, ErrorFrame):  # never answered, so two peers cannot bounce errors forever
            log.warning("%s reported %s about frame %s", conn.name, frame.code, frame.ref)
        else:
            message = f"{frame.type} frames are sent by the engine, not to it"
            await conn.send(ErrorFrame(code="invalid_frame", message=message))

    async def _accept(self, conn: _Connection, frame: InboundFrame | CommandFrame) -> None:
        try:
            if isinstance(frame, InboundFrame):
                await self._handler.on_inbound(frame)
            else:
                await self._handler.on_command(frame)
        except Exception as exc:
            # The traceback only at debug level: exception messages (e.g. pydantic's) can quote the text.
            log.error("handler failed on %s %s from %s: %s", frame.type, frame.id, conn.name, type(exc).__name__)
            log.debug("handler traceback", exc_info=True)
            message = f"the engine could not accept this {frame.type}; it was not stored, send it again later"
            await conn.send(ErrorFrame(code="internal", message=message, ref=frame.id))
            return
        await conn.send(AckFrame(id=frame.id))

    async def _query(self, conn: _Connection, frame: QueryFrame) -> None:
        """Answer with a `result`; the query's parameters (search text) are never logged."""
        try:
            if self._queries is None:
                raise QueryError("this engine answers no queries")
            result = ResultFrame(id=frame.id, data=await self._queries(frame))
        except QueryError as exc:
            result = ResultFrame(id=frame.id, error=str(exc))
        except Exception as exc:
            log.error("query %s from %s failed: %s", frame.query[:32], conn.name, type(exc).__name__)
            log.debug("query traceback", exc_info=True)  # debug only: messages may quote the search text
            result = ResultFrame(id=frame.id, error="the engine could not answer this query (see its log)")
        if len(result.model_dump_json().encode()) >= self._max:  # the newline makes it one byte more
            result = ResultFrame(id=frame.id, error="the answer is too large for one frame; ask for less")
        await conn.send(result)

    async def _hello(self, conn: _Connection, channels: list[str]) -> None:
        # Under the connection lock, so an outbound sent meanwhile waits behind the queued ones.
        async with conn.lock:
            for channel in channels:
                routes = self._routes.setdefault(channel, [])
                if conn in routes:
                    routes.remove(conn)
                routes.append(conn)
            log.info("%s serves %d channel(s): %s", conn.name, len(channels), ", ".join(channels))
            for channel in dict.fromkeys(channels):
                if not await self._flush_locked(conn, channel):
                    return

    async def _flush_locked(self, conn: _Connection, channel: str) -> bool:
        """Send the frames queued for `channel` in order (caller holds the lock); False if the connection failed."""
        queue = self._pending.get(channel)
        if not queue:
            return True
        count = len(queue)
        while queue:
            data = queue.popleft()
            if not await conn.write_locked(data):
                queue.appendleft(data)
                return False
        del self._pending[channel]
        log.info("%s: flushed %d queued outbound frame(s) for %s", conn.name, count, channel)
        return True

    def _enqueue(self, channel: str, data: bytes) -> None:
        queue = self._pending.setdefault(channel, deque())
        queue.append(data)
        if len(queue) > self._queue_limit:
            queue.popleft()
            log.warning("outbound queue for %s is full (%d): dropped the oldest frame", channel, self._queue_limit)
        log.debug("no gateway serves %s: outbound frame (%d bytes) queued, %d waiting", channel, len(data), len(queue))
