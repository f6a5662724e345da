"""A streamable-HTTP MCP server (the official SDK's, run by uvicorn) whose calls to `flood_json` and
`flood_events` answer without end: a JSON body, or a stream of small server-sent events, a megabyte at a
time up to `FLOOD_BYTES`, then nothing more while the connection stays open; `ok` answers "fine".

Run as `python endless_http_server.py`: it prints its port. `GET /stats` says how many bytes the last flood
handed to the connection, and how many floods the client hung up on (the test's measure of what klaw read).
"""

from __future__ import annotations

import json
import socket
from typing import Any

import anyio
import anyio.lowlevel
import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

FLOOD_BYTES = 96 * 1024 * 1024  # more than klaw's cap (16 MB), little enough for an old klaw to hold whole
BLOCK = 1024 * 1024
stats: dict[str, Any] = {"sent": 0, "floods": 0, "gone": 0}


def build() -> MCPServer:
    server = MCPServer("endless")

    @server.tool()
    def ok() -> str:
        """Answer at once."""
        return "fine"

    @server.tool()
    def flood_json() -> str:
        """Answered by the middleware with a JSON body that never ends."""
        return "unreachable"

    @server.tool()
    def flood_events() -> str:
        """Answered by the middleware with server-sent events that never end."""
        return "unreachable"

    return server


async def _flood(send: Send, receive: Receive, media_type: str, head: bytes, block: bytes) -> None:
    """Sends `head`, then `block` until `FLOOD_BYTES`, then waits; stops where the client hangs up, noting how
    much it had sent by then (writes after a hang-up are dropped by uvicorn, so they are not counted)."""
    stats["floods"] += 1
    stats["sent"] = 0
    headers = [(b"content-type", media_type.encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    async with anyio.create_task_group() as tg:

        async def write() -> None:
            await send({"type": "http.response.body", "body": head, "more_body": True})
            while stats["sent"] < FLOOD_BYTES:
                await send({"type": "http.response.body", "body": block, "more_body": True})
                await anyio.lowlevel.checkpoint()  # lets the hang-up be seen: a send after it returns at once
                if tg.cancel_scope.cancel_called:
                    return
                stats["sent"] += len(block)
            await anyio.sleep_forever()  # never finishes

        tg.start_soon(write)
        while (await receive())["type"] != "http.disconnect":
            pass
        stats["gone"] += 1
        tg.cancel_scope.cancel()


def _event_block() -> bytes:
    note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "A" * 1000}}
    event = f"event: message\ndata: {json.dumps(note)}\n\n".encode()
    return event * (BLOCK // len(event))


class Floods:
    """Answers a `tools/call` of a flood tool itself; everything else goes to the SDK's app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["path"] == "/stats":
            return await JSONResponse(stats)(scope, receive, send)
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        request = json.loads(body) if body else {}
        name = request.get("params", {}).get("name") if request.get("method") == "tools/call" else None
        if name == "flood_json":
            head = b'{"jsonrpc": "2.0", "id": ' + json.dumps(request["id"]).encode() + b', "result": {"x": "'
            return await _flood(send, receive, "application/json", head, b"A" * BLOCK)
        if name == "flood_events":
            return await _flood(send, receive, "text/event-stream", b"", _event_block())
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # connections wait in the backlog until uvicorn accepts them
    print(sock.getsockname()[1], flush=True)
    app = Floods(build().streamable_http_app(json_response=True))
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
