"""The tool registry: the tools offered to the model, in registration order, and the one door calls go through.

Which tools are offered is decided here (`offered`, config `tools.enabled`); how a function becomes a
schema and its arguments are checked is klaw/tools/schema.py's; how a call runs (time limit, failures,
result length) is klaw/tools/calls.py's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, TypeVar, overload

from klaw.llm.messages import ToolCall, ToolSpec
from klaw.store.records import ChatRef
from klaw.tools.calls import CallRunner, ToolResult
from klaw.tools.running_call import RunningCall
from klaw.tools.schema import (
    BadArguments,
    SchemaToolFunction,
    ToolContext,
    ToolDefinition,
    ToolDefinitionError,
    ToolFunction,
    function_tool,
    schema_tool,
    unknown_tool,
)

F = TypeVar("F", bound=ToolFunction)


class DuplicateToolName(ToolDefinitionError):
    """A tool under a name another tool has; `name` lets a group's loader say which group has it."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"a tool named {name!r} is already offered (by a built-in or plugin group, or another tool):"
            " rename one of them (klaw tools lists each tool's group)"
        )
        self.name = name


class ToolRegistry:
    """The tools offered to the model, in registration order, and the one place calls are executed."""

    def __init__(
        self, *, timeout_seconds: float = 60.0, max_result_chars: int = 16_000, offered: Collection[str] | None = None
    ) -> None:
        """`offered`: the names of the tools to offer (config `tools.enabled`), None for all. Registering
        any other tool is checked as usual, then skipped, so code that registers a group of tools need
        not know the configuration."""
        self._runner = CallRunner(timeout_seconds=timeout_seconds, max_result_chars=max_result_chars)
        self._tools: dict[str, ToolDefinition] = {}
        self._offered = None if offered is None else frozenset(offered)
        self._unavailable: dict[str, str] = {}
        self._fixes: dict[str, str] = {}
        self._why_missing: Callable[[str], str | None] = lambda _name: None
        self._declared: set[str] = set()  # tools whose author declared they need the person's approval

    def explain_missing(self, why: Callable[[str], str | None]) -> None:
        """Say, instead of "unknown tool", why a called tool that is not here is missing for now: `why`
        gets its name and returns the model's answer, or None (the MCP servers: "the MCP server 'notes'
        is still starting; try again shortly", decision 291)."""
        self._why_missing = why

    def register(
        self,
        fn: F,
        *,
        name: str | None = None,
        description: str | None = None,
        offer: bool = False,
        requires_approval: bool = False,
    ) -> F:
        """Offer `fn` to the model under `name` (default: the function's name); returns `fn` unchanged.
        A name outside the registry's `offered` tools is checked, then not offered, unless `offer` (the
        engine's caller's own tools and plugins' tools, which were asked for by name). `requires_approval`
        (or `fn` marked by `klaw.requires_approval`): its author says a call must wait for the person's
        /approve; the engine holds it unless `tools.approvalWaived` names it (decision 540).

        Raises ToolDefinitionError for what is no function, a bad or duplicate name, a generator
        function, a missing description, or parameters that cannot be described (no type hint,
        `*args`, `**kwargs`).
        """
        tool = function_tool(fn, _name(fn) if name is None else name, description)
        self._refuse_duplicate(tool.spec.name)
        if offer or self.wants(tool.spec.name):
            self._tools[tool.spec.name] = tool
            if requires_approval or approval_declared(fn):
                self._declared.add(tool.spec.name)
        return fn

    def register_schema(
        self, name: str, description: str, parameters: dict[str, Any], fn: SchemaToolFunction, *, replace: bool = False
    ) -> None:
        """Offer a tool whose JSON schema comes from elsewhere (an MCP server lists its own); `fn` gets the
        model's argument object (checked to be a JSON object; the schema is the tool's to enforce) and
        the context. `replace`: a tool of that name is replaced, not refused (a server restarted)."""
        tool = schema_tool(name, description, parameters, fn)
        if not replace:
            self._refuse_duplicate(name)
        self._tools[name] = tool

    def _refuse_duplicate(self, name: str) -> None:
        if name in self._tools:
            raise DuplicateToolName(name)

    def remove(self, name: str) -> None:
        """Stop offering `name` (a server's tool it no longer lists); unknown names are ignored."""
        self._tools.pop(name, None)
        self._declared.discard(name)

    def held(self, approval: Collection[str], waived: Collection[str] = ()) -> frozenset[str]:
        """The tools a call of which waits for the person: `approval` (tools.approval) and those whose author
        declared they need it (`requires_approval`), less those `waived` (tools.approvalWaived)."""
        return frozenset(approval) | frozenset(name for name in self._declared if name not in waived)

    @overload
    def tool(self, fn: F, /) -> F: ...

    @overload
    def tool(
        self, fn: None = None, /, *, name: str | None = None, description: str | None = None
    ) -> Callable[[F], F]: ...

    def tool(
        self, fn: ToolFunction | None = None, /, *, name: str | None = None, description: str | None = None
    ) -> Any:
        """Decorator form of `register`: `@registry.tool` or `@registry.tool(name=...)`."""
        if fn is not None:
            return self.register(fn, name=name, description=description)
        return lambda f: self.register(f, name=name, description=description)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def wants(self, name: str) -> bool:
        """Would a tool of this name be offered? (Spares building one the configuration left out.)"""
        return self._offered is None or name in self._offered

    def note_unavailable(self, name: str, reason: str, *, fix: str = "") -> None:
        """Record why a tool the configuration asks for is not offered (no sandbox, no allow-list) and
        what the person can do about it (`fix`: "set web.search in engine.yaml"): `/status`, `/tools` and
        `klaw tools` tell the person both. Nothing is recorded for a tool the configuration left out."""
        if self.wants(name):
            self._unavailable[name] = reason
            self._fixes[name] = fix

    @property
    def unavailable(self) -> Mapping[str, str]:
        """Tool name → why it is not offered, for the tools the configuration asked for."""
        return dict(self._unavailable)

    def unavailable_fix(self, name: str) -> str:
        """What the person can do so the unavailable tool `name` is offered ("" when its group said nothing)."""
        return self._fixes.get(name, "")

    def specs(self) -> list[ToolSpec]:
        """The tools as the model is offered them, in registration order (stable, so prompts cache)."""
        return [tool.spec for tool in self._tools.values()]

    async def execute_all(self, calls: Iterable[ToolCall], context: ToolContext) -> list[ToolResult]:
        """Run the calls of one model response concurrently; results come back in the calls' order."""
        return list(await asyncio.gather(*(self.execute(call, context) for call in calls)))

    def refuse(self, call: ToolCall) -> ToolResult | None:
        """The error result `execute` would give for an unknown tool or unusable arguments, else None;
        so a call nobody could run is not put to the person for approval first."""
        tool = self._tools.get(call.name)
        if tool is None:
            return self._missing(call, self._tools)
        try:
            tool.validate(call.arguments)
        except BadArguments as exc:
            return self._runner.error(call, str(exc))
        return None

    async def execute(self, call: ToolCall, context: ToolContext) -> ToolResult:
        """Run one call. Every problem on the tool's or the model's side becomes an error result."""
        tool = self._tools.get(call.name)
        if tool is None:
            return self._missing(call, self._tools)
        return await self._runner.run(tool, call, context)

    def running_in(self, chat: ChatRef) -> RunningCall | None:
        """The oldest tool call under way in `chat`'s turn (a waiting console names it, decision 527)."""
        return self._runner.running_in(chat)

    def not_offered(self, call: ToolCall, offered: Sequence[str]) -> ToolResult | None:
        """The unknown-tool error for a call to a tool outside `offered` (the tools this run's context
        offered: another model's groups, `models.<id>.tools`, or those a task's run is not offered),
        naming the offered ones (decisions 249, 258); None when it was offered."""
        if call.name in offered:
            return None
        return self._missing(call, offered)

    def _missing(self, call: ToolCall, offered: Iterable[str]) -> ToolResult:
        """The error for a call to a tool not offered: why it is missing for now, else "unknown tool"."""
        return self._runner.error(call, self._why_missing(call.name) or unknown_tool(call, offered))


APPROVAL_MARK = "requires_approval"  # the attribute `klaw.requires_approval` sets on a tool function


def requires_approval(fn: F) -> F:
    """Mark the tool `fn` as one whose every call waits for the person's /approve, wherever it is offered
    (a plugin's list, `Klaw(tools=[...])`): held unless the person's `tools.approvalWaived` names it. Same as
    setting `fn.requires_approval = True` (which a package not importing klaw can do). Returns `fn`."""
    setattr(fn, APPROVAL_MARK, True)
    return fn


def approval_declared(fn: object) -> bool:
    """Whether the tool function `fn` declares it needs approval (its `requires_approval` attribute is True)."""
    return getattr(fn, APPROVAL_MARK, False) is True


def _name(fn: object) -> str:
    """The name a tool is offered under: its function's; ToolDefinitionError for what is no function."""
    name = getattr(fn, "__name__", None)
    if not callable(fn) or not isinstance(name, str):
        raise ToolDefinitionError(
            "a tool must be a function (async def or def) with a docstring and typed parameters, not"
            f" {type(fn).__name__} (pass the function itself, e.g. tools=[weather], not its name or a call of it)"
        )
    return name
