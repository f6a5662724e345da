"""An MCP stdio server, raw JSON-RPC, whose tool `boom` answers with output that never ends a line (a
megabyte at a time, forever; adversary6 hostile_mcp.py), whose tool `chatty` prints 500 lines of a debug
log to stdout (one with a token in it, and JSON that is no JSON-RPC message) before it answers "fine"
(adversary12 badmcp.py spew), whose tool `many` answers 200,000 one-character content items and `deep` a
message nested 100,000 deep (adversary27 evil_mcp.py items, deep), and whose tool `ok` answers "fine"."""

import json
import sys

out = sys.stdout.buffer


def send(message: dict[str, object]) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


def tool(name: str) -> dict[str, object]:
    return {"name": name, "description": name, "inputSchema": {"type": "object", "properties": {}}}


for line in sys.stdin.buffer:
    message = json.loads(line)
    method, ident = message.get("method"), message.get("id")
    if method == "initialize":
        info = {"name": "flood", "version": "1"}
        version = message["params"]["protocolVersion"]
        send(
            {
                "jsonrpc": "2.0",
                "id": ident,
                "result": {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info},
            }
        )
    elif method == "tools/list":
        send(
            {
                "jsonrpc": "2.0",
                "id": ident,
                "result": {"tools": [tool(name) for name in ("boom", "chatty", "many", "deep", "ok")]},
            }
        )
    elif method == "tools/call" and message["params"]["name"] == "boom":
        block = b"A" * (1 << 20)
        while True:
            out.write(block)
            out.flush()
    elif method == "tools/call" and message["params"]["name"] == "chatty":
        for number in range(500):
            out.write(f"DEBUG step {number} secret_token=sk-live-1234567890\n".encode())
        out.write(b'[1, 2, 3]\n{"jsonrpc": "2.0"}\n\n')
        send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": "fine"}]}})
    elif method == "tools/call" and message["params"]["name"] == "many":
        send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": "a"}] * 200_000}})
    elif method == "tools/call" and message["params"]["name"] == "deep":
        nested = "[" * 100_000 + "]" * 100_000
        out.write(
            b'{"jsonrpc": "2.0", "id": %d, "result": {"content": [], "structuredContent": {"a": %s}}}\n'
            % (ident, nested.encode())
        )
        out.flush()
    elif method == "tools/call":
        send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": "fine"}]}})
    elif ident is not None:
        send({"jsonrpc": "2.0", "id": ident, "result": {}})
