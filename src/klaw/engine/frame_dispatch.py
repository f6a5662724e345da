"""What the engine does with each line a gateway sends: decode it, act on it, answer on the same connection.

A bad frame (too large, not JSON, invalid, unknown type) gets an `error` frame and the connection
goes on: a gateway bug must not cut a chat off. `inbound` and `command` frames are acked only once
the handler has made them durable, so a gateway can replay safely; a handler that fails gets an
error naming the frame instead: `disk_full` (in words naming the mount; the gateway retries for as long
as it lasts, decision 488) when the disk holding the home is full, `internal` (retry later) for another
transient fault (a command the full disk stopped too: given up after a few tries, decision 486),
`refused` (final) for anything else (a folder of the home klaw may not open named with how to give it
back, decision 473), so one poison message never stalls a gateway's queue. `query`
frames get a `result` from the optional `QueryHandler`; `delivered` frames (a reply shown) are
passed to the handler and never answered; a `ping` gets a `pong` saying the protocol version (decision
535). Apart from the server so that the protocol's rules live in one place, away from the sockets. Logs
carry frame types, ids and sizes, never message text or query parameters.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from klaw.disk_trouble import denied_words, full_words, mount_point
from klaw.engine.failures import is_disk_full, is_transient, permission_denied
from klaw.engine.frames import (
    DISK_FULL,
    MAX_FRAME_BYTES,
    PROTOCOL,
    AckFrame,
    CommandFrame,
    DeliveredFrame,
    ErrorFrame,
    FrameError,
    HelloFrame,
    InboundFrame,
    PingFrame,
    PongFrame,
    QueryFrame,
    ResultFrame,
    decode_frame,
)
from klaw.engine.gateway_connection import ASKING, GatewayConnection
from klaw.engine.message_origins import MessageOrigins, origin_of
from klaw.engine.outbound_routes import OutboundRoutes
from klaw.errors import KlawError
from klaw.message_text import IdUsedForAnotherText, MessageRefused

log = logging.getLogger(__name__)

# How a full disk's refusal ends: the gateway keeps the frame and sends it again while the disk is full.
WAITS = "then it is taken: the gateway keeps it and sends it again until there is room"


class FrameHandler(Protocol):
    """What the engine does with a message: make it durable and return quickly; the server then acks."""

    async def on_inbound(self, frame: InboundFrame) -> None: ...

    async def on_command(self, frame: CommandFrame) -> None: ...

    async def on_delivered(self, frame: DeliveredFrame) -> None: ...


class QueryError(KlawError, ValueError):
    """A query that cannot be answered (unknown name, bad parameter); the message goes back to the gateway."""


QueryHandler = Callable[[QueryFrame], Awaitable[Any]]  # JSON-able data, or QueryError with a sentence


class FrameDispatcher:
    """Turns one received line into the handler call, the routing change or the answer it asks for."""

    def __init__(
        self,
        handler: FrameHandler,
        routes: OutboundRoutes,
        *,
        queries: QueryHandler | None = None,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        home: Path | None = None,
        origins: MessageOrigins | None = None,
    ) -> None:
        """`home`: the folder whose disk a full-disk refusal names (the socket's, which is the home's);
        `origins`: where each message taken came from, noted for its reply's label (decision 535)."""
        self._origins = origins
        self._home = home
        self._handler = handler
        self._routes = routes
        self._queries = queries
        self._max = max_frame_bytes

    async def dispatch(self, conn: GatewayConnection, line: bytes) -> None:
        """Handle one non-blank line from `conn`, answering on `conn` (errors included)."""
        try:
            frame = decode_frame(line, max_bytes=self._max)
        except FrameError as exc:
            log.warning("%s sent a bad frame (%d bytes): %s", conn.name, len(line), exc)
            await conn.send(exc.to_frame())
            return
        if isinstance(frame, InboundFrame | CommandFrame):
            await self._accept(conn, frame)
        elif isinstance(frame, PingFrame):
            await conn.send(PongFrame(id=frame.id, protocol=PROTOCOL))
        elif isinstance(frame, QueryFrame):
            await self._query(conn, frame)
        elif isinstance(frame, HelloFrame):
            await self._routes.hello(conn, frame)
        elif isinstance(frame, DeliveredFrame):
            await self._delivered(conn, frame)
        elif isinstance(frame, ErrorFrame):  # never answered, so two peers cannot bounce errors forever
            log.warning("%s reported %s about frame %s", conn.name, frame.code, frame.ref)
        else:
            message = f"{frame.type} frames are sent by the engine, not to it"
            await conn.send(ErrorFrame(code="invalid_frame", message=message))

    async def _accept(self, conn: GatewayConnection, frame: InboundFrame | CommandFrame) -> None:
        try:
            if isinstance(frame, InboundFrame):
                await self._handler.on_inbound(frame)
            else:
                await self._handler.on_command(frame)
        except Exception as exc:
            if self._home is not None and is_disk_full(exc):  # weather, in words (adversary28: "… FullError")
                message = isinstance(frame, InboundFrame)  # kept in the gateway while it lasts (488); a command not
                said = full_words(self._home, WAITS if message else "then send the command again")
                log.warning("could not take %s %s from %s: %s", frame.type, frame.id, conn.name, said)
                if message:
                    await conn.send(ErrorFrame(code=DISK_FULL, message=said, ref=frame.id))
                    return
            elif isinstance(exc, MessageRefused):  # bad input, refused for good in words: not the engine's fault
                log.warning("refused %s %s from %s: %s", frame.type, frame.id, conn.name, type(exc).__name__)
            else:  # the traceback only at debug level: exception messages (e.g. pydantic's) can quote the text
                log.error("handler failed on %s %s from %s: %s", frame.type, frame.id, conn.name, type(exc).__name__)
                log.debug("handler traceback", exc_info=True)
            await conn.send(_refusal(frame, exc, self._home))
            return
        if self._origins is not None and isinstance(frame, InboundFrame):
            where = origin_of(frame.channel, whole=frame.whole, serves=conn.serves, watches=conn.watches)
            self._origins.note((frame.id,), where)
        await conn.send(AckFrame(id=frame.id))

    async def _delivered(self, conn: GatewayConnection, frame: DeliveredFrame) -> None:
        """Never answered: a confirmation lost (an engine stopping) only means the reply is sent again
        at the next start, and the gateway shows it once."""
        try:
            await self._handler.on_delivered(frame)
        except Exception as exc:
            log.error("delivery confirmation %s from %s not recorded: %s", frame.id, conn.name, type(exc).__name__)

    async def _query(self, conn: GatewayConnection, frame: QueryFrame) -> None:
        """Answer with a `result`; the query's parameters (search text) are never logged."""
        try:
            if self._queries is None:
                raise QueryError("this engine answers no queries")
            asking = ASKING.set(conn)
            try:
                result = ResultFrame(id=frame.id, data=await self._queries(frame))
            finally:
                ASKING.reset(asking)
        except QueryError as exc:
            result = ResultFrame(id=frame.id, error=str(exc))
        except Exception as exc:
            log.error("query %s from %s failed: %s", frame.query[:32], conn.name, type(exc).__name__)
            log.debug("query traceback", exc_info=True)  # debug only: messages may quote the search text
            result = ResultFrame(id=frame.id, error="the engine could not answer this query (see its log)")
        if len(result.model_dump_json().encode()) >= self._max:  # the newline makes it one byte more
            result = ResultFrame(id=frame.id, error="the answer is too large for one frame; ask for less")
        await conn.send(result)


def _refusal(frame: InboundFrame | CommandFrame, exc: Exception, home: Path | None = None) -> ErrorFrame:
    """`internal` (send it again later) only for a fault that can pass (engine/failures.py); otherwise
    a final `refused`: retrying the same frame would fail the same way and hold up every chat behind it."""
    if is_transient(exc):  # it may be in the log already (the store failed after): never "not stored"
        why = "a passing fault"
        if is_disk_full(exc):
            disk = f": no space left on {mount_point(home)}, which holds klaw's home" if home is not None else ""
            why = f"the disk is full{disk}; free some space"
        if isinstance(frame, CommandFrame):  # "may already be kept" read as if the chat were lost (decision 486)
            message = f"the engine could not carry out this command ({why}); nothing was lost, and it may not have"
            return ErrorFrame(code="internal", message=f"{message} taken effect", ref=frame.id)
        message = f"the engine could not finish taking this message ({why}); it may already be kept"
        return ErrorFrame(code="internal", message=message, ref=frame.id)
    if isinstance(exc, IdUsedForAnotherText):  # the web page's 409 (decision 503)
        return ErrorFrame(code="other_text", message=f"{exc}; it was not stored", ref=frame.id)
    if isinstance(exc, MessageRefused):  # its words name what is wrong and never quote the text
        return ErrorFrame(code="refused", message=f"{exc}; it was not stored", ref=frame.id)
    if (denied := permission_denied(exc)) is not None:  # a folder of the home made unreadable: named (473)
        said = denied_words(Path(denied.filename), "then send it again")
        what = "message" if isinstance(frame, InboundFrame) else "command"
        return ErrorFrame(code="refused", message=f"this {what} was not stored: {said}", ref=frame.id)
    message = f"the engine could not handle this {frame.type} ({type(exc).__name__}; see its log); it was not stored"
    return ErrorFrame(code="refused", message=message, ref=frame.id)
