"""uvicorn embedded in the current event loop: the web page's server and the fake OpenAI server.

The host process (`klaw gateway`, `klaw serve`, a benchmark, a test) owns the loop and the signals,
so uvicorn gets neither: no signal handlers (its own would swallow SIGTERM), no access log (request
lines carry search text and paths that name chats), no lifespan, no websockets.

We bind the socket ourselves, so port 0 works and the chosen port is known before serving. Start-up
and exit are events, not uvicorn's 0.1 s polling tick: `start` returns as soon as uvicorn listens
(or raises why it could not), and `stop` closes the listener and idle connections, lets in-flight
replies finish for `grace_seconds`, then cancels what is left. A reply that never ends on its own
(a held or streaming one) must be released by its owner before `stop`, or it costs the whole grace.

Slow clients are bounded (`max_connections`, `head_timeout_seconds`): uvicorn has no timeout for a
request head that never completes and no cap on open connections (its `limit_concurrency` answers
503 only once a head is complete), so a local user opening thousands of connections that each send
half a header ("slowloris") used every file descriptor of the process, and the engine socket and
the scheduler failed with EMFILE. One that has not sent a whole request head within the timeout is
closed, for every request on the connection, not only its first. A connection past the cap closes
another in its place, one whose requests never proved to be the owner's (`mark_owner`: a valid
session or key): first one that sent a head without (a body it never sends), else the oldest still
sending its head. Refusing the newcomer instead let anyone reaching the port hold every slot and lock
the owner out (decision 367); only when every other connection is the owner's is it answered 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import time
from collections.abc import Generator
from dataclasses import KW_ONLY, dataclass, field
from email.utils import formatdate
from typing import Any, Literal, cast

import uvicorn
from uvicorn.server import ServerState

from klaw.lingering_close import LingeringTransport

__all__ = ["EmbeddedHttpServer", "bind_tcp", "mark_owner"]

OWNER_EXTENSION = "klaw.owner"
"""The scope extension through which the app tells the server a request proved to be the owner's."""


def mark_owner(scope: Any) -> None:
    """The request in `scope` carried the owner's session or key: its connection is never the one closed
    to make room when the connection cap is reached. Does nothing on a server without a cap."""
    mark = scope.get("extensions", {}).get(OWNER_EXTENSION)
    if mark is not None:
        mark()


def bind_tcp(host: str, port: int, *, reuse_address: bool = False) -> socket.socket:
    """A TCP socket bound to (host, port), the first address the host resolves to; port 0 picks a free one.
    `reuse_address` lets a fixed port be bound again while the last run's connections linger in TIME_WAIT."""
    family, kind, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)[0]
    # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on sockets that say they are TCP,
    # and with Nagle on every non-streamed reply waits 40 ms for a delayed ACK.
    sock = socket.socket(family, kind, socket.IPPROTO_TCP)
    try:
        if reuse_address:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError:
        sock.close()
        raise
    return sock


@dataclass(eq=False)
class EmbeddedHttpServer:
    """`app` served by uvicorn in a task of the running loop; see the module docstring.
    `port` is the bound port once `start` has bound it (the real one when `requested_port` is 0)."""

    app: Any
    host: str
    requested_port: int
    _: KW_ONLY
    grace_seconds: float
    reuse_address: bool = False
    http: Literal["auto", "h11"] = "auto"
    name: str = "http-server"
    max_connections: int | None = None
    head_timeout_seconds: float | None = None
    port: int = field(default=0, init=False)
    _server: _Uvicorn | None = field(default=None, init=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False)

    async def start(self) -> None:
        """Bind and serve; returns once uvicorn listens. Raises OSError from binding (port taken, bad
        address), else whatever stopped uvicorn during start-up."""
        sock = bind_tcp(self.host, self.requested_port, reuse_address=self.reuse_address)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            http=self.http,
            ws="none",
            server_header=False,
        )
        config.load()
        if self.max_connections is not None or self.head_timeout_seconds is not None:
            config.http_protocol_class = _bounded(
                config.http_protocol_class, self.max_connections, self.head_timeout_seconds
            )
        self._server = server = _Uvicorn(config, self.grace_seconds)
        self._task = task = asyncio.create_task(server.serve(sockets=[sock]), name=self.name)
        ready = asyncio.create_task(server.ready.wait())
        try:
            await asyncio.wait({ready, task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
        if not server.ready.is_set():
            sock.close()
            self._server, self._task = None, None
            task.result()  # re-raise why it did not start
            raise RuntimeError(f"the {self.name} stopped during start-up")

    async def stop(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.exit.set()
        try:
            async with asyncio.timeout(self.grace_seconds + 3):  # a last resort: shutdown is bounded by itself
                await self._task
        except TimeoutError:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._server, self._task = None, None


class _Watched(set[Any]):
    """uvicorn's set of connections or of request tasks, telling `left` whenever one leaves it,
    so shutdown waits for them to drain on that event rather than by polling."""

    def __init__(self, left: asyncio.Event) -> None:
        super().__init__()
        self._left = left

    def discard(self, item: Any) -> None:
        super().discard(item)
        self._left.set()

    def remove(self, item: Any) -> None:
        super().remove(item)
        self._left.set()


class _State(ServerState):
    """uvicorn's shared server state with watched connections and tasks, and the Date header made when
    a reply asks for it: with no ticking main loop nothing would refresh it once a second."""

    def __init__(self, config: uvicorn.Config) -> None:
        self._config = config
        self._second = -1
        self._headers: list[tuple[bytes, bytes]] = []
        super().__init__()
        self.left = asyncio.Event()
        self.connections = _Watched(self.left)
        self.tasks = _Watched(self.left)

    @property
    def default_headers(self) -> list[tuple[bytes, bytes]]:
        now = int(time.time())
        if now != self._second:
            date = [(b"date", formatdate(now, usegmt=True).encode())] if self._config.date_header else []
            self._second, self._headers = now, date + self._config.encoded_headers
        return self._headers

    @default_headers.setter
    def default_headers(self, value: list[tuple[bytes, bytes]]) -> None:
        pass  # uvicorn's tick would set them; they are made on demand instead

    async def drained(self) -> None:
        while self.connections or self.tasks:
            self.left.clear()
            await self.left.wait()


class _Uvicorn(uvicorn.Server):
    """uvicorn without signal handlers and with an event-driven main loop: `ready` is set once it
    listens, setting `exit` stops it without waiting for a 0.1 s polling tick."""

    def __init__(self, config: uvicorn.Config, grace_seconds: float) -> None:
        super().__init__(config)
        self.server_state = self._state = _State(config)
        self.ready = asyncio.Event()
        self.exit = asyncio.Event()
        self.grace_seconds = grace_seconds

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()

    async def main_loop(self) -> None:
        await self.exit.wait()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's shutdown minus its fixed 0.1 s pause and 0.1 s polling: close the listener and
        idle connections, let in-flight replies finish within the grace, cancel stragglers."""
        for server in self.servers:
            server.close()
        for connection in list(self._state.connections):
            connection.shutdown()
        try:
            async with asyncio.timeout(self.grace_seconds):
                await self._state.drained()
        except TimeoutError:
            for task in list(self._state.tasks):
                task.cancel()
        for server in self.servers:  # bounded: from Python 3.12 this also waits for open connections
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.grace_seconds):  # not wait_for (decision 428)
                    await server.wait_closed()


_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 5\r\n"
    b"Connection: close\r\nContent-Length: 54\r\n\r\ntoo many open connections to this server; retry soon\r\n"
)


def _bounded(protocol: type[asyncio.Protocol], cap: int | None, head_timeout: float | None) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (h11 or httptools) refusing connections past `cap` with 503 and closing
    one whose next request head has not arrived within `head_timeout` seconds: the first one, and each
    one after a response on a kept-alive connection (uvicorn's keep-alive timer stops at the first byte
    of the next request, so half a second head held the connection for good)."""

    opened = itertools.count()

    class Bounded(protocol):  # type: ignore[valid-type,misc]
        _awaiting_head: object | None = None  # the current wait's token: an older wait's timer does nothing
        _owner = False  # a request on it carried the owner's session or key (`mark_owner`)
        _headed = False  # a whole request head came on it

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._opened = next(opened)
            app: Any = getattr(self, "app")  # noqa: B009 - set by uvicorn's protocol, untyped here

            async def marked(scope: Any, receive: Any, send: Any) -> None:
                self._headed = True
                scope.setdefault("extensions", {})[OWNER_EXTENSION] = self._mark_owner
                await app(scope, receive, send)

            self.app = marked

        def _mark_owner(self) -> None:
            self._owner = True

        def connection_made(self, transport: asyncio.Transport) -> None:
            self._lingering = LingeringTransport(transport, self._body_pending)
            super().connection_made(cast(asyncio.Transport, self._lingering))
            if cap is not None and len(self.connections) > cap and not self._make_room():
                transport.write(_BUSY)
                transport.close()
                return
            self._await_head()

        def _body_pending(self) -> bool:
            """A request's body is still coming: a close now is a lingering one (lingering_close.py)."""
            cycle = getattr(self, "cycle", None)
            return cycle is not None and bool(getattr(cycle, "more_body", False))

        def data_received(self, data: bytes) -> None:
            if self._lingering.lingering:  # the rest of a refused body: never parsed as a request
                self._lingering.drop(data)
                return
            super().data_received(data)

        def _make_room(self) -> bool:
            """Close one connection not proved to be the owner's: one that sent a head without (the oldest),
            else the oldest still sending its head; False when every other open one is the owner's."""
            others = [
                other
                for other in self.connections
                if other is not self
                and isinstance(other, Bounded)
                and not other._owner
                and not other.transport.is_closing()
            ]
            if not others:
                return False
            min(others, key=lambda other: (not other._headed, other._opened))._lingering.cut()
            return True

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._await_head()

        def _await_head(self) -> None:
            if head_timeout is not None:
                self._awaiting_head = token = object()
                self.loop.call_later(head_timeout, self._head_overdue, token, self.cycle)

        def _head_overdue(self, token: object, cycle: Any) -> None:
            """Close unless a whole head came since the wait began (a new cycle) or a response is under way
            (a pipelined request's, started before the wait began)."""
            waiting = cycle is None or cycle.response_complete
            if token is self._awaiting_head and self.cycle is cycle and waiting and not self.transport.is_closing():
                self._lingering.cut()  # half a request head (or none) after the timeout: a slow client

    return Bounded
