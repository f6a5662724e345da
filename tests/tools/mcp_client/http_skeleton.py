"""What the streamable-HTTP MCP test servers share (compressing_http_server.py, endless_http_server.py): the
official SDK's app behind a middleware that reads each request whole, answers `GET /stats` and the calls it
takes over itself, and hands the rest to the SDK with the body replayed; the process prints its port and serves
it with uvicorn. `started` runs such a server for a test."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

ROOT = Path(__file__).resolve().parents[3]


@asynccontextmanager
async def started(module: str) -> AsyncIterator[str]:
    """`python -m module` (a server of this folder) running; yields its base URL."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", module, stdout=asyncio.subprocess.PIPE, cwd=ROOT
    )
    try:
        assert process.stdout is not None
        port = int(await asyncio.wait_for(process.stdout.readline(), 30))
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 10)


class Middleware:
    """Answers `GET /stats` with `stats`, reads each other request's body whole and passes it to `answer`,
    whose default hands it to the SDK's app."""

    def __init__(self, app: ASGIApp, stats: dict[str, Any]) -> None:
        self.app = app
        self.stats = stats

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["path"] == "/stats":
            return await JSONResponse(self.stats)(scope, receive, send)
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        request = json.loads(body) if body else {}
        await self.answer(scope, receive, send, body, request)

    async def answer(self, scope: Scope, receive: Receive, send: Send, body: bytes, request: Any) -> None:
        await self.app(scope, replaying(body, receive), send)

    async def until_hung_up(
        self,
        send: Send,
        receive: Receive,
        headers: list[tuple[bytes, bytes]],
        write: Callable[[], Coroutine[Any, Any, None]],
    ) -> None:
        """A 200 with `headers`, its body written by `write` until the client hangs up (then `write` is
        cancelled and the hang-up counted in stats["gone"]). `write` must let cancellation in between sends."""
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        async with anyio.create_task_group() as tg:
            tg.start_soon(write)
            while (await receive())["type"] != "http.disconnect":
                pass
            self.stats["gone"] += 1
            tg.cancel_scope.cancel()


def replaying(body: bytes, receive: Receive) -> Receive:
    """`receive` that first gives the body already read."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def serve(app: ASGIApp) -> None:
    """Prints the port, then serves `app` until terminated."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections wait in the backlog until uvicorn accepts them
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])
