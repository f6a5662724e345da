"""uvicorn inside the gateway's event loop: bound by us (so port 0 works), no signal handlers, no access log.

The host process (`klaw gateway`, `klaw serve`, a test) owns the signals; uvicorn's own handlers
would swallow SIGTERM. The access log is off because request lines carry search text and paths
that name chats. Stopping is bounded: connections get `grace_seconds`, then are cut.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Generator
from typing import Any

import uvicorn


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class EmbeddedServer:
    def __init__(self, app: Any, host: str, port: int, *, grace_seconds: float = 2.0) -> None:
        self._app = app
        self._host = host
        self._port = port
        self._grace = grace_seconds
        self._server: _Server | None = None
        self._task: asyncio.Task[None] | None = None
        self.port = 0

    async def start(self) -> None:
        """Bind and serve; raises OSError (port taken, bad address) before returning."""
        family, kind, proto, _, address = socket.getaddrinfo(self._host, self._port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
        except OSError:
            sock.close()
            raise
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self._app,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            ws="none",
            server_header=False,
            timeout_graceful_shutdown=max(1, round(self._grace)),
        )
        self._server = _Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]), name="web-server")
        while not self._server.started:
            if self._task.done():
                sock.close()
                self._task.result()
                raise OSError("the web server stopped during start-up")
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        if self._server is None or self._task is None:
            return
        self._server.should_exit = True
        try:
            async with asyncio.timeout(self._grace + 3):
                await self._task
        except TimeoutError:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._server, self._task = None, None
