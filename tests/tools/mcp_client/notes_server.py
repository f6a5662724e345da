"""A real MCP server written with the official SDK, for klaw's MCP client tests.

Run as a program it serves stdio (`python notes_server.py`); `--fail-at-start` exits before the
handshake, as a server with a bad installation does; `--chatter N` writes N lines to stderr first, as a
server with a debug log does. `build()` gives the same server for tests that
serve it over streamable HTTP in their own loop. Tools: `add`, `lookup` (reads the environment
variable `NOTES_SECRET`, so tests see which variables reach the process), `crash` (the process dies
mid-call, its last words on stderr), `hang` (never answers), `freeze`
(blocks the whole server, which then answers nothing) and `dotted.name` (a name OpenAI's rule refuses).
"""

from __future__ import annotations

import os
import sys
import time

import anyio
from mcp.server.mcpserver import MCPServer


def build() -> MCPServer:
    server = MCPServer("notes")

    @server.tool()
    async def add(a: int, b: int) -> int:
        """Add two whole numbers."""
        return a + b

    @server.tool()
    async def lookup(key: str) -> str:
        """Look a note up by key."""
        return f"{key}: secret is {os.environ.get('NOTES_SECRET', '(unset)')}, home is set: {'HOME' in os.environ}"

    @server.tool()
    async def crash() -> str:
        """Die in the middle of the call, saying so on stderr first (as a failing program does)."""
        print("notes server: about to crash", file=sys.stderr, flush=True)
        os._exit(3)

    @server.tool()
    async def hang() -> str:
        """Never answer."""
        await anyio.sleep_forever()
        return "unreachable"

    @server.tool()
    async def freeze() -> str:
        """Block the whole server: nothing it is asked is answered any more."""
        time.sleep(3600)  # noqa: ASYNC251 (on purpose: the event loop stops)
        return "unreachable"

    @server.tool(name="dotted.name")
    async def dotted() -> str:
        """A tool whose name has a dot."""
        return "dotted ok"

    return server


if __name__ == "__main__":
    if "--fail-at-start" in sys.argv:
        print("notes server: cannot start (test)", file=sys.stderr)
        sys.exit(2)
    if "--chatter" in sys.argv:
        lines = range(int(sys.argv[sys.argv.index("--chatter") + 1]))  # one write: at once, however loaded
        sys.stderr.write("".join(f"notes server: chatter line {n:07d} of a debug log that goes on\n" for n in lines))
        sys.stderr.flush()
    build().run()
