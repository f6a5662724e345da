"""`klaw mcp serve`: one chat's memory as MCP tools for another MCP client (a desktop assistant, an IDE).

Tools: `memory_search`, `fetch_conversation_details`, `memory_core_get`, and `memory_save` only with
`--allow-write` (read-only otherwise: not listed, and a call to it
is refused saying the server is read-only and that `--allow-write` offers it). Each is the model's
own tool run for the chosen chat (engine/memory_access.py), so another client finds exactly what the
agent would, and what it saves the agent finds later. Served over stdio (the client starts the
command) or streamable HTTP on 127.0.0.1 behind the web page's token as a bearer key, checked before
the request's body is read (`BearerGuard`).
"""

from __future__ import annotations

import asyncio
import hmac
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from klaw.distribution import klaw_version
from klaw.mcp_server.memory_link import MemoryLink, MemoryUnavailable
from klaw.mcp_server.stdio import KlawMcpServer
from klaw.store.records import ChatRef
from klaw.tools.schema_text import parse_docstring

if TYPE_CHECKING:  # the HTTP transport's: `serve_http` imports what it runs (uvicorn), stdio needs none of it
    from starlette.types import ASGIApp, Receive, Scope, Send

HTTP_HOST = "127.0.0.1"
HTTP_PATH = "/mcp"
ToolFn = Callable[..., Awaitable[str]]


def build_server(link: MemoryLink, chat: ChatRef, *, allow_write: bool) -> MCPServer:
    server = KlawMcpServer(
        "klaw",
        version=klaw_version(),  # a client shows it and can tell which klaw answers
        instructions=f"The long-term memory of the klaw chat {chat}: its earlier conversations, saved memories"
        " and core facts about the person."
        + ("" if allow_write else " Read-only: this server was started without --allow-write."),
    )

    def tool(fn: ToolFn) -> ToolFn:
        """Registered with the description the agent's own tools get from a docstring (schema_text.py):
        the SDK's would keep the docstring's indentation ("best\n        first")."""
        server.tool(description=parse_docstring(inspect.getdoc(fn) or "")[0])(fn)
        return fn

    async def run(name: str, arguments: dict[str, Any]) -> str:
        try:
            text, is_error = await link.call(name, arguments)
        except MemoryUnavailable as exc:
            raise ToolError(str(exc)) from None
        if is_error:
            raise ToolError(text)
        return text

    @tool
    async def memory_search(
        query: str, limit: Annotated[int, Field(ge=1, le=20, description="Most results.")] = 5
    ) -> str:
        """Search the person's saved memories and earlier messages of this chat by meaning and words, best
        first. Results name their segment_id and exchange_id for fetch_conversation_details."""
        return await run("memory_search", {"query": query, "limit": limit})

    @tool
    async def fetch_conversation_details(
        segment_id: int | None = None,
        exchange_id: int | None = None,
        include_full_transcript: Annotated[bool, Field(description="Also every message and tool call.")] = False,
    ) -> str:
        """Read one past conversation (segment_id) or exchange (exchange_id) of this chat; the ids come
        from memory_search."""
        arguments: dict[str, Any] = {"include_full_transcript": include_full_transcript}
        if segment_id is not None:
            arguments["segment_id"] = segment_id
        if exchange_id is not None:
            arguments["exchange_id"] = exchange_id
        return await run("fetch_conversation_details", arguments)

    @tool
    async def memory_core_get() -> str:
        """Show core memory: the lasting facts about the person the agent keeps in every conversation."""
        return await run("memory_core_get", {})

    if allow_write:

        @tool
        async def memory_save(text: Annotated[str, Field(description="Self-contained text to remember.")]) -> str:
            """Save a fact, decision or note into the person's memory, for memory_search (here and in
            klaw's own conversations) to find later."""
            return await run("memory_save", {"text": text})

    else:
        server.withhold(
            "memory_save",
            "memory_save is not offered: this server is read-only (started without --allow-write). Start it"
            f" with `klaw mcp serve --chat {chat} --allow-write` to let this client save memories.",
        )
    return server


class BearerGuard:
    """ASGI middleware: `Authorization: Bearer <token>` or 401, decided on the headers alone, before any
    byte of the body is read (a stranger cannot make the server parse a large request)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = next((value for key, value in scope.get("headers", []) if key == b"authorization"), b"")
            if not hmac.compare_digest(given, self._expected):
                body = b'{"error": "a bearer token is required: the web token in KLAW_HOME/web_token"}'
                headers = [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]
                await send({"type": "http.response.start", "status": 401, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await self._app(scope, receive, send)


async def serve_http(
    server: MCPServer, token: str, port: int, stop: asyncio.Event, on_ready: Callable[[int], None]
) -> None:
    """Serve on 127.0.0.1:`port` (0: any free port, given to `on_ready`) until `stop` is set."""
    from klaw.embedded_http import EmbeddedHttpServer

    app = server.streamable_http_app(streamable_http_path=HTTP_PATH, host=HTTP_HOST)
    async with server.session_manager.run():  # an anyio task group: entered and left in this task
        http = EmbeddedHttpServer(BearerGuard(app, token), HTTP_HOST, port, grace_seconds=2, name="mcp-server")
        await http.start()
        try:
            on_ready(http.port)
            await stop.wait()
        finally:
            await http.stop()
