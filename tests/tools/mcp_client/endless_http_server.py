"""A streamable-HTTP MCP server (the official SDK's, run by uvicorn) whose calls to `flood_json` and
`flood_events` answer without end: a JSON body, or a stream of small server-sent events, a megabyte at a
time up to `FLOOD_BYTES`, then nothing more while the connection stays open; `ok` answers "fine".

Run as `python -m tests.tools.mcp_client.endless_http_server`: it prints its port. `GET /stats` says how many
bytes the last flood handed to the connection, and how many floods the client hung up on (the test's measure of
what klaw read). The skeleton it shares with compressing_http_server.py is http_skeleton.py.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.lowlevel
from mcp.server.mcpserver import MCPServer
from starlette.types import Receive, Scope, Send

from tests.tools.mcp_client.http_skeleton import Middleware, serve

FLOOD_BYTES = 96 * 1024 * 1024  # more than klaw's cap (16 MB), little enough for an old klaw to hold whole
BLOCK = 1024 * 1024


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


# Each event well under the SDK's per-event cap (16 MB, like the total), so only the count of the whole answer
# ends the stream. 64 KB, not 1 KB: the SDK's cost is per event (~0.3 ms of CPU each: parsing, validating,
# dispatching), and 16 MB of 1 KB events took ~5 s of CPU, more than 30 s at a load of 14 (decision 451).
NOTE_BYTES = 64 * 1024


def _event_block() -> bytes:
    data = "A" * NOTE_BYTES
    note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": data}}
    event = f"event: message\ndata: {json.dumps(note)}\n\n".encode()
    return event * (BLOCK // len(event))


class Floods(Middleware):
    """Answers a `tools/call` of a flood tool itself; everything else goes to the SDK's app."""

    async def answer(self, scope: Scope, receive: Receive, send: Send, body: bytes, request: Any) -> None:
        name = request.get("params", {}).get("name") if request.get("method") == "tools/call" else None
        if name == "flood_json":
            head = b'{"jsonrpc": "2.0", "id": ' + json.dumps(request["id"]).encode() + b', "result": {"x": "'
            return await self._flood(send, receive, "application/json", head, b"A" * BLOCK)
        if name == "flood_events":
            return await self._flood(send, receive, "text/event-stream", b"", _event_block())
        await super().answer(scope, receive, send, body, request)

    async def _flood(self, send: Send, receive: Receive, media_type: str, head: bytes, block: bytes) -> None:
        """Sends `head`, then `block` until `FLOOD_BYTES`, then waits; stops where the client hangs up, noting
        how much it had sent by then (writes after a hang-up are dropped by uvicorn, so they are not counted)."""
        self.stats["floods"] += 1
        self.stats["sent"] = 0

        async def write() -> None:
            await send({"type": "http.response.body", "body": head, "more_body": True})
            while self.stats["sent"] < FLOOD_BYTES:
                await send({"type": "http.response.body", "body": block, "more_body": True})
                await anyio.lowlevel.checkpoint()  # lets the hang-up be seen: a send after it returns at once
                self.stats["sent"] += len(block)
            await anyio.sleep_forever()  # never finishes

        await self.until_hung_up(send, receive, [(b"content-type", media_type.encode())], write)


if __name__ == "__main__":
    serve(Floods(build().streamable_http_app(json_response=True), {"sent": 0, "floods": 0, "gone": 0}))
