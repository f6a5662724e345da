"""The gateway's connection to the engine: connect, say hello, send the buffer in order, reconnect.

One frame is in flight at a time (send, wait for its ack, drop it from the buffer, send the next):
the engine handles a connection's frames one after the other anyway (each is fsync'd before its
ack), so pipelining would buy little, and stop-and-wait keeps the order exact even when a frame is
refused and retried. A connection that fails, closes, or leaves an ack unanswered for
`ACK_TIMEOUT_SECONDS` is dropped; reconnecting waits an exponential backoff on the injected clock
(0.2 s doubling to 10 s, reset once a hello went through). A hello is through when the engine answers
the `ping` sent right after it (the engine handles a connection's frames in order and says nothing to a
hello itself), and that pong says the engine's protocol version (`engine_protocol`, frames.py). An engine
that refuses the connection (too many open, socket_limits.py) sends an `error` frame and closes instead,
and that is an outage in the engine's words, retried with the growing backoff, never "the engine is back".

A frame the engine refuses with `internal` (a transient fault: shutting down, a full disk) is
retried after a backoff, `MAX_ATTEMPTS` times, then given up with an error message to its chat; a
frame refused with any other code (invalid, or `refused`: final) is given up at once and the chat is
told the engine's reason, so one bad message never holds up the others. `query` frames are not
buffered: they are asked on the live connection and fail fast with `EngineUnavailable` while the engine is down.

A person watching `klaw gateway` runs it under a WARNING root logger, so each outage is said there in
two lines, once each (`EngineOutage`): when the engine is lost (or not there at start), and when it is
back with how long it was away. Each retry stays at INFO (`--verbose`), and no line quotes a message.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from klaw.engine.clock import Clock
from klaw.engine.frames import (
    DISK_FULL,
    RETRYABLE_CODES,
    AckFrame,
    DeliveredFrame,
    DeltaFrame,
    EngineFrame,
    ErrorFrame,
    FrameError,
    FrameReader,
    GatewayFrame,
    HelloFrame,
    OutboundFrame,
    PingFrame,
    PongFrame,
    QueryFrame,
    ResultFrame,
    ShutdownFrame,
    decode_frame,
    encode_frame,
)
from klaw.errors import KlawError
from klaw.gateway.buffer import BufferedFrame, InboundBuffer
from klaw.gateway.outage import EngineOutage

log = logging.getLogger(__name__)

ACK_TIMEOUT_SECONDS = 60.0
QUERY_TIMEOUT_SECONDS = 15.0
MAX_ATTEMPTS = 8
HELLO_PING = "hello"
"""The id of the `ping` that follows each hello: its `pong` says the engine took the connection."""

Deliver = Callable[[OutboundFrame | DeltaFrame], Awaitable[None]]
Settled = Callable[[BufferedFrame, ErrorFrame | None], bool]


class EngineUnavailable(KlawError, RuntimeError):
    """The engine is not connected (or went away while answering); try again later."""


class EngineRefusedConnection(EngineUnavailable):
    """The engine refused this connection in an `error` frame (e.g. too many open); the message is its words."""


class QueryFailed(KlawError, RuntimeError):
    """The engine answered a query with an error; the message is for the person."""


@dataclass
class Backoff:
    """Exponential delays: `initial`, doubling, at most `maximum`; `reset()` after a success."""

    initial: float = 0.2
    factor: float = 2.0
    maximum: float = 10.0
    _next: float = 0.0

    def next(self) -> float:
        delay = self._next or self.initial
        self._next = min(delay * self.factor, self.maximum)
        return delay

    def reset(self) -> None:
        self._next = 0.0


class _Refused(Exception):
    def __init__(self, error: ErrorFrame) -> None:
        super().__init__(error.code)
        self.error = error


class EngineLink:
    def __init__(
        self,
        socket_path: Path,
        buffer: InboundBuffer,
        deliver: Deliver,
        clock: Clock,
        *,
        channels: Sequence[str],
        streaming: Sequence[str] = (),
        watching: Sequence[str] = (),
        backoff: Backoff | None = None,
        settled: Settled | None = None,
    ) -> None:
        """`settled` hears of each buffered frame the engine took (None) or refused for good (its error);
        True from it means someone waits for that verdict and tells the person (decision 503)."""
        self._path = socket_path
        self._settled = settled
        self._buffer = buffer
        self._deliver = deliver
        self._clock = clock
        self._hello = HelloFrame(channels=list(channels), streaming=list(streaming), watching=list(watching))
        self._backoff = backoff or Backoff()
        self._retry = Backoff(self._backoff.initial, self._backoff.factor, self._backoff.maximum)
        self._kick = asyncio.Event()
        self._writer: asyncio.StreamWriter | None = None
        self._write_lock = asyncio.Lock()
        self._awaiting: tuple[str, asyncio.Future[None]] | None = None  # the frame in flight
        self._queries: dict[str, asyncio.Future[ResultFrame]] = {}
        self._query_ids = itertools.count(1)
        self._attempts: dict[str, int] = {}
        self.connected = asyncio.Event()
        self.connections = 0  # how many times a hello went through (tests, status)
        self.engine_protocol = 0  # the protocol version the engine said in its pong to the hello (0: not yet)
        self.outage = EngineOutage(clock, socket_path)

    def kick(self) -> None:
        """A frame was buffered: send it as soon as the link is free."""
        self._kick.set()

    async def run(self) -> None:
        """Connect and serve until cancelled."""
        while True:
            try:
                reader, writer = await asyncio.open_unix_connection(str(self._path), limit=4 << 20)
            except OSError as exc:
                self.outage.unreachable(exc, ever_connected=self.connections > 0)
                delay = self._backoff.next()
                log.info("engine not reachable (%s); retrying in %.1f s", type(exc).__name__, delay)
                await self._clock.sleep(delay)
                continue
            try:
                await self._session(reader, writer)
            except EngineRefusedConnection as exc:
                log.info("engine refused the connection (%s)", exc)
                self.outage.refused(str(exc))
            except (OSError, TimeoutError, EngineUnavailable) as exc:
                log.info("engine connection lost (%s)", type(exc).__name__)
                self.outage.lost(exc)
            finally:
                await self._disconnected(writer)
            await self._clock.sleep(self._backoff.next())

    async def confirm(self, reply_id: str) -> None:
        """Tell the engine a reply was shown (`delivered`), best effort: one not told (the engine is
        down) is sent again at its next start and the gateway shows it once (`Gateway`)."""
        with contextlib.suppress(OSError, EngineUnavailable):
            await self._send(DeliveredFrame(id=reply_id))

    async def query(self, name: str, params: dict[str, Any], wait_seconds: float = QUERY_TIMEOUT_SECONDS) -> Any:
        """Ask the engine a read-only question; its `data`, or `QueryFailed` / `EngineUnavailable`."""
        if self._writer is None:
            raise EngineUnavailable("the engine is not running")
        query_id = f"q{next(self._query_ids)}"
        future: asyncio.Future[ResultFrame] = asyncio.get_running_loop().create_future()
        self._queries[query_id] = future
        try:
            await self._send(QueryFrame(id=query_id, query=name, params=params))
            async with asyncio.timeout(wait_seconds):
                result = await future
        except TimeoutError:
            raise EngineUnavailable(f"the engine did not answer within {wait_seconds:g} s") from None
        except OSError as exc:
            why = (exc.strerror or "it closed the connection").lower()
            raise EngineUnavailable(f"the connection to the engine broke ({why})") from None
        finally:
            self._queries.pop(query_id, None)
        if result.error is not None:
            raise QueryFailed(result.error)
        return result.data

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        lines = FrameReader(reader)
        await self._send(self._hello)
        await self._send(PingFrame(id=HELLO_PING))
        async with asyncio.timeout(ACK_TIMEOUT_SECONDS):
            await self._hello_answered(lines)
        self.connections += 1
        self._backoff.reset()
        self.connected.set()
        log.info("connected to the engine; %d message(s) buffered", len(self._buffer))
        self.outage.reached(len(self._buffer), first=self.connections == 1)
        receiving = asyncio.create_task(self._receive(lines))
        sending = asyncio.create_task(self._send_buffered())
        try:
            done, _ = await asyncio.wait({receiving, sending}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # re-raise why the session ended
        finally:
            for task in (receiving, sending):
                task.cancel()
            await asyncio.gather(receiving, sending, return_exceptions=True)

    async def _disconnected(self, writer: asyncio.StreamWriter) -> None:
        self._writer = None
        self.connected.clear()
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        for future in self._queries.values():
            if not future.done():
                future.set_exception(EngineUnavailable("the engine went away"))
        if self._awaiting is not None and not self._awaiting[1].done():
            self._awaiting[1].set_exception(EngineUnavailable("the engine went away"))
        self._awaiting = None

    async def _send(self, frame: GatewayFrame) -> None:
        writer = self._writer
        if writer is None:
            raise EngineUnavailable("the engine is not running")
        async with self._write_lock:
            writer.write(encode_frame(frame))
            await writer.drain()

    async def _send_buffered(self) -> None:
        """Stop-and-wait over the buffer, oldest first, for as long as the connection lives."""
        while True:
            self._kick.clear()
            frame = self._buffer.first()
            if frame is None:
                await self._kick.wait()
                continue
            try:
                await self._send_one(frame)
            except _Refused as refused:
                await self._refused(frame, refused.error)
                continue
            self._attempts.pop(frame.id, None)
            self._retry.reset()
            await self._buffer.ack(frame.id)
            if self._settled is not None:
                self._settled(frame, None)

    async def _send_one(self, frame: BufferedFrame) -> None:
        acked: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._awaiting = (frame.id, acked)
        try:
            await self._send(frame)
            async with asyncio.timeout(ACK_TIMEOUT_SECONDS):
                await acked
        finally:
            self._awaiting = None

    async def _refused(self, frame: BufferedFrame, error: ErrorFrame) -> None:
        attempts = self._attempts[frame.id] = self._attempts.get(frame.id, 0) + 1
        retryable = error.code in RETRYABLE_CODES
        if error.code == DISK_FULL:  # kept and sent again while it lasts: freeing space is the fix (488)
            await self._disk_full(frame, error, attempts)
            return
        if retryable and attempts < MAX_ATTEMPTS:
            delay = self._retry.next()
            log.warning("engine could not take message %s (attempt %d); retrying in %.1f s", frame.id, attempts, delay)
            await self._clock.sleep(delay)
            return
        log.error("engine refused message %s (%s) after %d attempt(s); giving up on it", frame.id, error.code, attempts)
        self._attempts.pop(frame.id, None)
        await self._buffer.ack(frame.id)
        if self._settled is not None and self._settled(frame, error) and error.code == "other_text":
            return  # its sender is told (the web page's 409); the chat's own message under the id is not touched
        if retryable:
            # The engine may have logged it before failing (decision 400): say only what is known.
            text = f"Sorry, {error.message}: look at the chat before sending it again."
        else:  # final: the same message would be refused again; say why (error messages never quote content)
            text = f"Sorry, the engine did not accept this message: {error.message}."
        with contextlib.suppress(Exception):
            await self._deliver(
                OutboundFrame(channel=frame.channel, chat_id=frame.chat_id, text=text, reply_to=frame.id, kind="error")
            )

    async def _disk_full(self, frame: BufferedFrame, error: ErrorFrame, attempts: int) -> None:
        """The disk holding klaw's home is full: the frame stays first in the buffer and is sent again after the
        backoff (at most its maximum) until the engine takes it; its chat is told once, at the first refusal."""
        delay = self._retry.next()
        if attempts == 1:
            log.warning("engine's disk is full: message %s waits; sent again every %.0f s at most", frame.id, delay)
            text = f"Your message is kept, not answered yet: {error.message}"  # the engine's words name the mount
            with contextlib.suppress(Exception):
                await self._deliver(
                    OutboundFrame(
                        channel=frame.channel, chat_id=frame.chat_id, text=text, reply_to=frame.id, kind="notice"
                    )
                )
        else:
            log.info("engine's disk still full: message %s (attempt %d); again in %.1f s", frame.id, attempts, delay)
        await self._clock.sleep(delay)

    async def _hello_answered(self, lines: FrameReader) -> None:
        """Until the `pong` to the ping after hello; an `error` about the connection is a refusal."""
        while (line := await lines.next()) is not None:
            if isinstance(line, int) or not line.strip():
                continue
            try:
                frame = decode_frame(line)
            except FrameError:
                continue
            if isinstance(frame, PongFrame) and frame.id == HELLO_PING:
                self.engine_protocol = frame.protocol or 1  # None: an engine before it was said (decision 535)
                return
            if isinstance(frame, ErrorFrame) and frame.ref is None:  # its words never quote content
                raise EngineRefusedConnection(frame.message)
            await self._on_frame(frame)
        raise EngineUnavailable("the engine closed the connection")

    async def _receive(self, lines: FrameReader) -> None:
        while (line := await lines.next()) is not None:
            if isinstance(line, int):
                log.warning("engine sent a frame of over %d bytes; skipped", line)
                continue
            if not line.strip():
                continue
            try:
                frame = decode_frame(line)
            except FrameError as exc:
                log.warning("engine sent a bad frame (%d bytes): %s", len(line), exc)
                continue
            await self._on_frame(frame)
        raise EngineUnavailable("the engine closed the connection")

    async def _on_frame(self, frame: GatewayFrame | EngineFrame) -> None:
        awaiting = self._awaiting
        if isinstance(frame, AckFrame):
            if awaiting is not None and awaiting[0] == frame.id and not awaiting[1].done():
                awaiting[1].set_result(None)
        elif isinstance(frame, ErrorFrame):
            if awaiting is not None and frame.ref == awaiting[0] and not awaiting[1].done():
                awaiting[1].set_exception(_Refused(frame))
            elif frame.ref in self._queries and not self._queries[frame.ref].done():
                self._queries[frame.ref].set_exception(QueryFailed(frame.message))
            elif frame.ref is None:  # about the connection, e.g. too many open: its words (they never quote content)
                log.warning("engine: %s (%s)", frame.message, frame.code)
            else:
                log.warning("engine reported %s about frame %s", frame.code, frame.ref)
        elif isinstance(frame, ResultFrame):
            future = self._queries.get(frame.id)
            if future is not None and not future.done():
                future.set_result(frame)
        elif isinstance(frame, OutboundFrame | DeltaFrame):
            try:
                await self._deliver(frame)
            except Exception as exc:  # a channel's failure must not cut the link
                log.error("channel %s failed to deliver a %s: %s", frame.channel, frame.type, type(exc).__name__)
        elif isinstance(frame, PongFrame):
            pass  # the answer to a ping after hello that came late
        elif isinstance(frame, ShutdownFrame):
            log.info("the engine is shutting down; messages are buffered until it is back")
