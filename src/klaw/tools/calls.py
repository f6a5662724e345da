"""Running one tool call: its time limit, its failures and its value, all turned into a `ToolResult`.

Nothing the tool or the model got wrong raises from here: models send unknown names, broken JSON
and wrong types often enough that each must become a readable error the model can correct on its
next round, not a failed turn. Logs carry tool names and exception types, never argument contents
or messages (they are the user's conversation). Which tools exist is klaw/tools/registry.py's; what
their arguments must be, klaw/tools/schema.py's. Every result leaves as valid text (a lone surrogate
becomes U+FFFD), whoever produced it.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_core import PydanticSerializationError, to_json

from klaw.errors import KlawError
from klaw.llm.messages import ToolCall
from klaw.store.records import ChatRef
from klaw.strict_json import as_text
from klaw.tools.running_call import RunningCall, tool_call_of
from klaw.tools.schema import BadArguments, ToolContext, ToolDefinition

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The outcome of one call, ready to become a tool-role message (`content` is what the model reads)."""

    call_id: str
    name: str
    content: str
    is_error: bool = False


class ToolRefusal(KlawError, RuntimeError):
    """An expected refusal (a server unavailable, a limit reached, a path the tool may not touch): its
    message is the whole result the model reads, and the log gets no warning. So does any `KlawError`
    that is also a `ValueError` (klaw's worded refusals of bad input: a duplicate task, a bad schedule).
    A builtin error (ValueError, PermissionError …) is a failure nobody designed: its class name goes in
    front of its message and the log gets a warning naming where it was raised."""


def _refusal(exc: Exception) -> bool:
    return isinstance(exc, ToolRefusal) or (isinstance(exc, KlawError) and isinstance(exc, ValueError))


NOTHING_RETURNED = "(the tool finished and returned nothing)"
"""What the model reads for a tool that returned None: it ran to its end without an error."""


class CallRunner:
    """Runs calls under one time limit and cuts every result to one length."""

    def __init__(self, *, timeout_seconds: float, max_result_chars: int) -> None:
        if timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be positive")
        if max_result_chars < 1:
            raise ValueError("max_result_chars must be at least 1")
        self._timeout = timeout_seconds
        self._max_chars = max_result_chars
        self._running: dict[ChatRef, list[RunningCall]] = {}  # per chat, the calls under way, oldest first

    def running_in(self, chat: ChatRef) -> RunningCall | None:
        """The oldest tool call under way in `chat`'s turn, if any (a console's spinner names it)."""
        calls = self._running.get(chat)
        return calls[0] if calls else None

    async def run(self, tool: ToolDefinition, call: ToolCall, context: ToolContext) -> ToolResult:
        """Run one call of `tool`. Every problem on the tool's or the model's side becomes an error result."""
        try:
            kwargs = tool.kwargs(call.arguments, context)
        except BadArguments as exc:
            return self.error(call, str(exc))
        try:
            async with asyncio.timeout(self._timeout) as deadline:
                # The library refuses an ask of this chat from inside it; a console names the call while it runs.
                with tool_call_of(context.chat, call.name, self._timeout) as running:
                    calls = self._running.setdefault(context.chat, [])
                    calls.append(running)
                    try:
                        value = await tool.call(kwargs, context)
                    finally:
                        calls.remove(running)
                        if not calls and self._running.get(context.chat) is calls:
                            del self._running[context.chat]
        except TimeoutError as exc:
            if not deadline.expired():  # the tool's own timeout (an HTTP call, say), not ours
                return self._failed(call, exc)
            log.warning("tool %r timed out after %ss (call %s)", call.name, self._timeout, call.id)
            if tool.in_thread:  # a thread cannot be stopped: only the wait for it was (decision 501)
                return self.error(
                    call,
                    f"the tool did not finish within {self._timeout:g} seconds: klaw stopped waiting for it, and it"
                    " may still be running (what it does may still happen)",
                )
            return self.error(call, f"the tool did not finish within {self._timeout:g} seconds and was cancelled")
        except Exception as exc:
            return self.error(call, str(exc)) if _refusal(exc) else self._failed(call, exc)
        return self._result(call, value)

    def error(self, call: ToolCall, message: str) -> ToolResult:
        """An error result the model reads as `message` (cut to length)."""
        return ToolResult(call.id, call.name, self._truncate(message), is_error=True)

    def _result(self, call: ToolCall, value: Any) -> ToolResult:
        """A str is the model's text as is; None (a tool that returns nothing) a sentence saying so, where
        JSON's `null` left a model unsure whether it worked (decision 501); anything else (dict, list, pydantic
        model) goes as JSON."""
        if isinstance(value, str):
            return ToolResult(call.id, call.name, self._truncate(value))
        if value is None:
            return ToolResult(call.id, call.name, NOTHING_RETURNED)
        try:
            text = to_json(value).decode()
        except PydanticSerializationError:
            log.warning("tool %r returned a %s, which is not JSON-serialisable", call.name, type(value).__name__)
            return self.error(call, f"the tool returned a {type(value).__name__}, which cannot be shown as text")
        return ToolResult(call.id, call.name, self._truncate(text))

    def _failed(self, call: ToolCall, exc: BaseException) -> ToolResult:
        # The message often quotes arguments (paths, text), so the log gets the type and where it was raised,
        # never the message. One line: `klaw chat` prints warnings into the person's terminal, and a missing
        # file the model asked for is no reason for ten lines of frames there; the frames go to DEBUG.
        frames = traceback.extract_tb(exc.__traceback__)
        where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
        log.warning("tool %r raised %s (call %s)%s", call.name, type(exc).__name__, call.id, where)
        log.debug("tool %r call %s frames:\n%s", call.name, call.id, "".join(frames.format()).rstrip())
        message = str(exc)
        return self.error(call, f"{type(exc).__name__}: {message}" if message else type(exc).__name__)

    def _truncate(self, text: str) -> str:
        """Every result's one way out, made valid text first: a tool's (an MCP server's, a fetched page's,
        a search API's) lone surrogate becomes U+FFFD here, not a failed turn where the log encodes it."""
        text = as_text(text)
        if len(text) <= self._max_chars:
            return text
        cut = len(text) - self._max_chars
        return f"{text[: self._max_chars]}\n[… truncated: {cut} of {len(text)} characters cut]"
