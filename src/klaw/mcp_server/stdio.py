"""`klaw mcp serve` over stdio, answering every request it read before it ends.

The SDK's stdio server ends its session when stdin reaches end of file and cancels the requests
still running, answering each with the error "Connection closed". A client that writes its
requests and then closes its side of the pipe, as `printf '…initialize…\\n…tools/call…\\n' | klaw mcp
serve --chat …` does, or one that half-closes once it has sent everything, so got "Connection
closed" for a `tools/call` sent right after `initialize`: the call was still searching when the
pipe's end came. Here the end of stdin is held back from the server until every request read so
far has its answer written (or the client cancelled it), for at most `ANSWER_GRACE_SECONDS`.
"""

from __future__ import annotations

import contextvars
from types import TracebackType
from typing import Any, Self

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from mcp.types import (
    CallToolResult,
    InputRequiredResult,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
)
from pydantic import ValidationError

from klaw.tools.schema_text import describe_invalid

ANSWER_GRACE_SECONDS = 90.0  # longer than a memory call's own limit (memory_link.QUERY_TIMEOUT_SECONDS)

Inbound = SessionMessage | Exception


class Outstanding:
    """The ids of the requests read and not answered yet."""

    def __init__(self) -> None:
        self._ids: set[Any] = set()
        self._changed = anyio.Event()

    def asked(self, message: Inbound) -> None:
        if not isinstance(message, SessionMessage):
            return
        inner = message.message
        if isinstance(inner, JSONRPCRequest):
            self._ids.add(inner.id)
        elif isinstance(inner, JSONRPCNotification) and inner.method == "notifications/cancelled":
            self._settle((inner.params or {}).get("requestId"))  # the client stopped waiting for it

    def answered(self, message: SessionMessage) -> None:
        if isinstance(message.message, JSONRPCResponse | JSONRPCError):
            self._settle(message.message.id)

    async def all_answered(self) -> None:
        while self._ids:
            await self._changed.wait()

    def _settle(self, request_id: Any) -> None:
        if request_id in self._ids:
            self._ids.discard(request_id)
            self._changed.set()
            self._changed = anyio.Event()


class _ClosedOnExit:
    """`async with` closes the stream (`aclose`), as the SDK's own streams do."""

    async def aclose(self) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> bool | None:
        await self.aclose()
        return None


class AnswerBeforeEnd(_ClosedOnExit):
    """The stdin stream as the server reads it, its end held back until `Outstanding` is empty."""

    def __init__(self, inner: ReadStream[Inbound], outstanding: Outstanding, grace_seconds: float) -> None:
        self._inner = inner
        self._outstanding = outstanding
        self._grace = grace_seconds

    @property
    def last_context(self) -> contextvars.Context | None:
        """The sender's context of the last message (the SDK's context-aware streams carry it)."""
        context: contextvars.Context | None = getattr(self._inner, "last_context", None)
        return context

    async def receive(self) -> Inbound:
        try:
            message = await self._inner.receive()
        except anyio.EndOfStream:
            with anyio.move_on_after(self._grace):
                await self._outstanding.all_answered()
            raise
        self._outstanding.asked(message)
        return message

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Inbound:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class NoteAnswers(_ClosedOnExit):
    """The stdout stream as the server writes it, each answer noted once it is handed on."""

    def __init__(self, inner: WriteStream[SessionMessage], outstanding: Outstanding) -> None:
        self._inner = inner
        self._outstanding = outstanding

    async def send(self, item: SessionMessage, /) -> None:
        await self._inner.send(item)
        self._outstanding.answered(item)

    async def aclose(self) -> None:
        await self._inner.aclose()


class KlawMcpServer(MCPServer):
    """The SDK's `MCPServer`, its stdio transport answering what it read before it ends, and a call to a
    tool this server withholds (`withhold`) refused with the reason and the way to have it offered,
    where the SDK answers only "Unknown tool: …" as for a misspelt name; arguments that fail the tool's
    schema answered as the agent's own tools answer them (`invalid arguments:` and a line per field)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._withheld: dict[str, str] = {}

    def withhold(self, name: str, reason: str) -> None:
        """Not offered, and a call to `name` is refused with `reason` (which says how to have it offered)."""
        self._withheld[name] = reason

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        reason = self._withheld.get(name)
        if reason is not None:
            raise ToolError(reason)
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):  # the SDK's check of the arguments: pydantic's raw
                raise ToolError(describe_invalid(exc.__cause__)) from None  # text; the agent's tools' wording
            raise

    async def run_stdio_async(self) -> None:
        outstanding = Outstanding()
        async with stdio_server() as (read_stream, write_stream):
            await self._lowlevel_server.run(
                AnswerBeforeEnd(read_stream, outstanding, ANSWER_GRACE_SECONDS),
                NoteAnswers(write_stream, outstanding),
                self._lowlevel_server.create_initialization_options(),
            )
