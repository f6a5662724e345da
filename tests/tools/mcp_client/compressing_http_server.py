"""A streamable-HTTP MCP server (the official SDK's, run by uvicorn) that compresses every answer though klaw
asks for none: under `/gzip/mcp` with gzip, under `/deflate/mcp` with deflate, under `/br/mcp` labelled br
(bytes klaw cannot undo). Its tool `ok` answers "fine"; `bomb` (under /gzip) answers a JSON body of one
string without end, gzip-packed a thousand to one: 1 MB on the wire unpacks to 1 GB.

Run as `python compressing_http_server.py`: it prints its port. `GET /stats` says how many bomb answers the
client hung up on.
"""

from __future__ import annotations

import gzip
import json
import socket
import zlib
from typing import Any

import anyio
import anyio.lowlevel
import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

BOMB_UNPACKED = 1024 * 1024 * 1024
BLOCK = 1024 * 1024
stats: dict[str, Any] = {"gone": 0}


def build() -> MCPServer:
    server = MCPServer("packed")

    @server.tool()
    def ok() -> str:
        """Answer at once."""
        return "fine"

    @server.tool()
    def bomb() -> str:
        """Answered by the middleware with a gzip bomb."""
        return "unreachable"

    return server


def packed(body: bytes, coding: str) -> bytes:
    if coding == "gzip":
        return gzip.compress(body)
    if coding == "deflate":
        return zlib.compress(body)
    return b"\x8b\x02\x80not really brotli\x03"


async def _bomb(send: Send, receive: Receive, request_id: Any) -> None:
    """A JSON answer whose string never ends, gzip-packed; stops where the client hangs up."""
    headers = [(b"content-type", b"application/json"), (b"content-encoding", b"gzip")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    head = b'{"jsonrpc": "2.0", "id": ' + json.dumps(request_id).encode() + b', "result": {"x": "'
    async with anyio.create_task_group() as tg:

        async def write() -> None:
            await send({"type": "http.response.body", "body": packer.compress(head), "more_body": True})
            for _ in range(BOMB_UNPACKED // BLOCK):
                piece = packer.compress(b"A" * BLOCK) + packer.flush(zlib.Z_SYNC_FLUSH)
                await send({"type": "http.response.body", "body": piece, "more_body": True})
                await anyio.lowlevel.checkpoint()
                if tg.cancel_scope.cancel_called:
                    return
            await anyio.sleep_forever()

        tg.start_soon(write)
        while (await receive())["type"] != "http.disconnect":
            pass
        stats["gone"] += 1
        tg.cancel_scope.cancel()


class Packing:
    """Compresses the SDK app's answers in the coding the path names; answers `bomb` itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["path"] == "/stats":
            return await JSONResponse(stats)(scope, receive, send)
        coding, _, rest = scope["path"].lstrip("/").partition("/")
        scope = dict(scope, path="/" + rest, raw_path=("/" + rest).encode())
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        request = json.loads(body) if body else {}
        if request.get("method") == "tools/call" and request["params"]["name"] == "bomb":
            return await _bomb(send, receive, request["id"])
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        start: dict[str, Any] = {}
        parts: list[bytes] = []

        async def packing_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                return
            parts.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            whole = b"".join(parts)
            headers = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
            if whole:
                whole = packed(whole, coding)
                headers.append((b"content-encoding", coding.encode()))
            headers.append((b"content-length", str(len(whole)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": whole, "more_body": False})

        await self.app(scope, replay, packing_send)


def main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    print(sock.getsockname()[1], flush=True)
    app = Packing(build().streamable_http_app(json_response=True))
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
