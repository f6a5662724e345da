"""A real MCP server written with the official SDK whose tools end it mid-call, as newcomer22's did.

Tools: `fail` calls `sys.exit(3)` (the SDK's server then stops its event loop, but its process lingers with
stdout open: nothing on the wire says it went), `wait` writes its process id to the file it is given and
never answers (the test kills it with signal 9), `ok` answers, and `picture` returns a small PNG image.
"""

from __future__ import annotations

import base64
import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.types import ImageContent

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

server = MCPServer("gallery")


@server.tool()
async def fail() -> str:
    """Exit in the middle of the call."""
    sys.exit(3)


@server.tool()
async def wait(marker: str) -> str:
    """Write this process's id to `marker`, then never answer."""
    Path(marker).write_text(str(os.getpid()))
    await anyio.sleep_forever()
    return "unreachable"


@server.tool()
async def ok() -> str:
    """Answer."""
    return "gallery ok"


@server.tool()
async def picture() -> ImageContent:
    """A 1x1 PNG."""
    return ImageContent(type="image", data=base64.b64encode(PNG).decode(), mime_type="image/png")


if __name__ == "__main__":
    server.run()
