"""An MCP stdio server, raw JSON-RPC, that serves one tool call and exits (status 0) at once after writing its
answer, as a one-shot script does. The answer is long (4 MB of text, below klaw's 16 MB cap): klaw is still
reading and parsing it when the process ends, so the end reaches klaw while the call is being finished, the
moment decision 521 is about, rather than by chance before or after it."""

import json
import os
import sys

out = sys.stdout.buffer


def send(message: dict[str, object]) -> None:
    out.write(json.dumps(message).encode() + b"\n")
    out.flush()


for line in sys.stdin.buffer:
    message = json.loads(line)
    method, ident = message.get("method"), message.get("id")
    if method == "initialize":
        info = {"name": "once", "version": "1"}
        version = message["params"]["protocolVersion"]
        send(
            {
                "jsonrpc": "2.0",
                "id": ident,
                "result": {"protocolVersion": version, "capabilities": {"tools": {}}, "serverInfo": info},
            }
        )
    elif method == "tools/list":
        last = {"name": "last", "description": "answer, then exit", "inputSchema": {"type": "object"}}
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": [last]}})
    elif method == "tools/call":
        text = "my last answer" + " ..." * 1_000_000
        send({"jsonrpc": "2.0", "id": ident, "result": {"content": [{"type": "text", "text": text}]}})
        os._exit(0)
    elif ident is not None:
        send({"jsonrpc": "2.0", "id": ident, "result": {}})
