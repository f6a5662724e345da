"""A streamable-HTTP MCP server (the official SDK's, run by uvicorn) that compresses every answer though klaw
asks for none: under `/gzip/mcp` with gzip, under `/deflate/mcp` with deflate, under `/br/mcp` labelled br
(bytes klaw cannot undo). Its tool `ok` answers "fine"; `bomb` (under /gzip) answers a JSON body of one
string without end, gzip-packed a thousand to one: 1 MB on the wire unpacks to 1 GB.

Run as `python -m tests.tools.mcp_client.compressing_http_server`: it prints its port. `GET /stats` says how
many bomb answers the client hung up on. The skeleton it shares with endless_http_server.py is http_skeleton.py.
"""

from __future__ import annotations

import gzip
import json
import zlib
from typing import Any

import anyio
import anyio.lowlevel
from mcp.server.mcpserver import MCPServer
from starlette.types import Message, Receive, Scope, Send

from tests.tools.mcp_client.http_skeleton import Middleware, serve

BOMB_UNPACKED = 1024 * 1024 * 1024
BLOCK = 1024 * 1024


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


class Packing(Middleware):
    """Compresses the SDK app's answers in the coding the path names; answers `bomb` itself."""

    async def answer(self, scope: Scope, receive: Receive, send: Send, body: bytes, request: Any) -> None:
        coding, _, rest = scope["path"].lstrip("/").partition("/")
        scope = dict(scope, path="/" + rest, raw_path=("/" + rest).encode())
        if request.get("method") == "tools/call" and request["params"]["name"] == "bomb":
            return await self._bomb(send, receive, request["id"])
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

        await super().answer(scope, receive, packing_send, body, request)

    async def _bomb(self, send: Send, receive: Receive, request_id: Any) -> None:
        """A JSON answer whose string never ends, gzip-packed; stops where the client hangs up."""
        packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
        head = b'{"jsonrpc": "2.0", "id": ' + json.dumps(request_id).encode() + b', "result": {"x": "'

        async def write() -> None:
            await send({"type": "http.response.body", "body": packer.compress(head), "more_body": True})
            for _ in range(BOMB_UNPACKED // BLOCK):
                piece = packer.compress(b"A" * BLOCK) + packer.flush(zlib.Z_SYNC_FLUSH)
                await send({"type": "http.response.body", "body": piece, "more_body": True})
                await anyio.lowlevel.checkpoint()
            await anyio.sleep_forever()

        headers = [(b"content-type", b"application/json"), (b"content-encoding", b"gzip")]
        await self.until_hung_up(send, receive, headers, write)


if __name__ == "__main__":
    serve(Packing(build().streamable_http_app(json_response=True), {"gone": 0}))
