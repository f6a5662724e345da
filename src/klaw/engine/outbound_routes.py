"""Which gateway connection serves each channel, and the replies waiting while none does.

Outbound frames go to the connection that most recently said `hello` for their channel (earlier
ones are the fallback); with no gateway connected they wait in a bounded queue per channel and are
flushed in order on the next `hello`, so replies made while the gateway restarts are not lost.
`delta` frames (a reply as it is written) go only to a connection whose `hello` asked for them, and
are dropped, never queued. A connection whose `hello` names a channel under `watching` gets a copy of
its outbound frames, best effort and never queued, without serving it (a piped `klaw chat` beside an
attached terminal, decision 527). What a turn sends (a reply, its copies, its deltas) is written into each
connection's own bounded buffer and never waits for a connection to read it (decision 535). Apart from the
server because this is the engine's side of delivery, and it knows nothing of how connections are accepted
or what frames they send.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque

from klaw.engine.frames import DeltaFrame, FrameError, HelloFrame, OutboundFrame, encode_frame
from klaw.engine.gateway_connection import GatewayConnection

log = logging.getLogger(__name__)


class OutboundRoutes:
    """Channel → connections by hello time, and channel → encoded outbound frames waiting for a gateway."""

    def __init__(self, *, max_frame_bytes: int, queue_limit: int) -> None:
        self._max = max_frame_bytes
        self._queue_limit = queue_limit
        self._routes: dict[str, list[GatewayConnection]] = {}  # channel → connections by hello time, latest last
        self._pending: dict[str, deque[bytes]] = {}  # channel → encoded outbound frames waiting for a gateway
        self._watchers: dict[str, list[GatewayConnection]] = {}  # channel → connections copied its frames (527)

    def serves(self, channel: str) -> bool:
        """Whether a connected gateway serves `channel` now."""
        return bool(self._routes.get(channel))

    def pending(self, channel: str) -> int:
        """How many outbound frames wait for a gateway serving `channel`."""
        return len(self._pending.get(channel, ()))

    async def hello(self, conn: GatewayConnection, frame: HelloFrame) -> None:
        """Make `conn` the latest server of the frame's channels and flush what waited for them."""
        conn.streaming = frozenset(frame.streaming)
        conn.serves, conn.watches = frozenset(frame.channels), frozenset(frame.watching)
        channels = frame.channels
        for channel in frame.watching:
            watchers = self._watchers.setdefault(channel, [])
            if conn not in watchers:
                watchers.append(conn)
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

    def forget(self, conn: GatewayConnection) -> None:
        """A connection has gone: it serves no channel any more."""
        for table in (self._routes, self._watchers):
            for channel, routes in list(table.items()):
                if conn in routes:
                    routes.remove(conn)
                    if not routes:
                        del table[channel]

    async def send_outbound(self, frame: OutboundFrame) -> bool:
        """Write to the gateway serving the channel; True if written now, False if queued for later.

        Raises `FrameError("frame_too_large")` for a frame no gateway could accept: split the text.
        """
        data = encode_frame(frame, max_bytes=self._max)
        for watcher in list(self._watchers.get(frame.channel, ())):
            watcher.write_now(data)  # a copy, best effort, never waited for: a watcher not reading holds up no one
        for conn in reversed(list(self._routes.get(frame.channel, ()))):
            async with conn.lock:  # anything still queued for the channel goes first, to keep the order
                if await self._flush_locked(conn, frame.channel, wait=False) and conn.write_now(data):
                    return True
        # Marked as having waited: a terminal says a reply came while none was attached only of these (trial48).
        with contextlib.suppress(FrameError):  # a frame at the size limit goes unmarked
            data = encode_frame(frame.model_copy(update={"waited": True}), max_bytes=self._max)
        self._enqueue(frame.channel, data)
        return False

    def wants_delta(self, channel: str) -> bool:
        """Whether the gateway serving `channel` asked for its replies as deltas too."""
        routes = self._routes.get(channel)
        return routes is not None and channel in routes[-1].streaming

    async def send_delta(self, frame: DeltaFrame) -> bool:
        """Best effort: write to the gateway serving the channel if it wants deltas; never queued."""
        routes = self._routes.get(frame.channel) if self.wants_delta(frame.channel) else None
        return routes is not None and routes[-1].send_now(frame)

    async def _flush_locked(self, conn: GatewayConnection, channel: str, *, wait: bool = True) -> bool:
        """Send the frames queued for `channel` in order (caller holds the lock); False if the connection failed.
        `wait`: for the connection to read each (its own hello's flush), else never (a turn's reply, decision 535).

        Two connections can flush one queue at once (both said `hello` for the channel while it held
        frames): each takes the next frame, so the queue may be emptied and dropped by the other one
        while this one waits on a write. Hence the queue is dropped only if it is still the channel's,
        and a frame that failed goes back to the front of whatever queue the channel has now.
        """
        queue = self._pending.get(channel)
        if not queue:
            return True
        sent = 0
        while queue:
            data = queue.popleft()
            if not (await conn.write_locked(data) if wait else conn.write_now(data)):
                self._pending.setdefault(channel, queue).appendleft(data)
                return False
            sent += 1
        if self._pending.get(channel) is queue:
            del self._pending[channel]
        log.info("%s: flushed %d queued outbound frame(s) for %s", conn.name, sent, channel)
        return True

    def _enqueue(self, channel: str, data: bytes) -> None:
        queue = self._pending.setdefault(channel, deque())
        queue.append(data)
        if len(queue) > self._queue_limit:
            queue.popleft()
            log.warning("outbound queue for %s is full (%d): dropped the oldest frame", channel, self._queue_limit)
        log.debug("no gateway serves %s: outbound frame (%d bytes) queued, %d waiting", channel, len(data), len(queue))
