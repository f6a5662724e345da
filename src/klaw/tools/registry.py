"""The tool registry: plain `async def` functions offered to the model, and calls run safely.

A tool is an ordinary coroutine function with type hints and a docstring. Its JSON schema is derived
by pydantic from the signature (one model per tool, `extra="forbid"`), so the schema the model sees
and the validation its arguments go through cannot drift apart. Parameter descriptions come from
`Annotated[..., Field(description=...)]` or, failing that, the docstring's `Args:` section; the tool's
description is the docstring up to its first section header.

`execute` never raises for anything the tool or the model got wrong: models send unknown names,
broken JSON and wrong types often enough that each of those must become a readable error the model
can correct on its next round, not a failed turn. The error texts name fields and rules but never
echo the model's values back, and logs carry tool names and exception types, never argument
contents (they are the user's conversation).
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import logging
import re
import traceback
import typing
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo
from pydantic_core import PydanticSerializationError, to_json

from klaw.errors import KlawError
from klaw.llm.messages import ToolCall, ToolSpec
from klaw.store.records import ChatRef

log = logging.getLogger(__name__)

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
ToolFunction = Callable[..., Awaitable[Any]]
SchemaToolFunction = Callable[[dict[str, Any], "ToolContext"], Awaitable[Any]]
"""A tool described by a JSON schema of its own (an MCP server's): called with the model's argument object."""
F = TypeVar("F", bound=ToolFunction)

_SECTION = re.compile(r"^(Args|Arguments|Parameters|Returns|Raises|Yields|Examples?|Notes?):\s*$")
_ARG_LINE = re.compile(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_MAX_ERRORS_SHOWN = 10
_MAX_LOC_PART = 60


@dataclass(slots=True)
class ToolContext:
    """What a tool may know about the turn that called it; injected, never chosen by the model.

    A tool asks for it by declaring a parameter annotated `ToolContext`; that parameter is left out of
    the schema. `extras` carries engine services by well-known key so that adding a service does not
    change this type. Keys in use:

    * `"clock"`: an object with `now() -> datetime` (timezone-aware, UTC); tools that tell the time
      read it so tests control time. Absent means the system clock.
    """

    chat: ChatRef
    workspace: Path
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The outcome of one call, ready to become a tool-role message (`content` is what the model reads)."""

    call_id: str
    name: str
    content: str
    is_error: bool = False


class ToolRefusal(KlawError, RuntimeError):
    """An expected refusal (a server unavailable, a limit reached): its message is the whole result the
    model reads, and the log gets no traceback."""


@dataclass(frozen=True, slots=True)
class _Tool:
    spec: ToolSpec
    fn: ToolFunction
    arguments: type[BaseModel] | None  # None: a schema tool, given the argument object as it came
    parameters: Mapping[str, str]  # pydantic field name -> the function's parameter name
    context_parameter: str | None


class ToolRegistry:
    """The tools offered to the model, in registration order, and the one place calls are executed."""

    def __init__(
        self, *, timeout_seconds: float = 60.0, max_result_chars: int = 16_000, offered: Collection[str] | None = None
    ) -> None:
        """`offered`: the names of the tools to offer (config `tools.enabled`), None for all. Registering
        any other tool is checked as usual, then skipped, so code that registers a group of tools need
        not know the configuration."""
        if timeout_seconds <= 0:
            raise ValueError("timeout_seconds must be positive")
        if max_result_chars < 1:
            raise ValueError("max_result_chars must be at least 1")
        self._timeout = timeout_seconds
        self._max_chars = max_result_chars
        self._tools: dict[str, _Tool] = {}
        self._offered = None if offered is None else frozenset(offered)
        self._unavailable: dict[str, str] = {}

    def register(self, fn: F, *, name: str | None = None, description: str | None = None, offer: bool = False) -> F:
        """Offer `fn` to the model under `name` (default: the function's name); returns `fn` unchanged.
        A name outside the registry's `offered` tools is checked, then not offered, unless `offer` (the
        engine's caller's own tools and plugins' tools, which were asked for by name).

        Raises ValueError for a bad or duplicate name, a function that is not `async def`, a missing
        description, or parameters that cannot be described (no type hint, `*args`, `**kwargs`).
        """
        tool_name = name if name is not None else fn.__name__
        if not TOOL_NAME.match(tool_name):
            raise ValueError(f"tool name {tool_name!r} is invalid: use 1-64 letters, digits, '_' or '-'")
        if tool_name in self._tools:
            raise ValueError(f"a tool named {tool_name!r} is already registered")
        if not _is_coroutine_function(fn):
            raise ValueError(f"tool {tool_name!r} must be an async def function")
        summary, arg_docs = _parse_docstring(inspect.getdoc(fn) or "")
        text = description if description is not None else summary
        if not text.strip():
            raise ValueError(f"tool {tool_name!r} needs a description: give it a docstring or description=")
        arguments, parameters, context_parameter = _arguments_model(fn, tool_name, arg_docs)
        spec = ToolSpec(tool_name, text.strip(), _clean_schema(arguments.model_json_schema()))
        if offer or self._offered is None or tool_name in self._offered:
            self._tools[tool_name] = _Tool(spec, fn, arguments, parameters, context_parameter)
        return fn

    def register_schema(
        self, name: str, description: str, parameters: dict[str, Any], fn: SchemaToolFunction, *, replace: bool = False
    ) -> None:
        """Offer a tool whose JSON schema comes from elsewhere (an MCP server lists its own); `fn` gets the
        model's argument object (checked to be a JSON object; the schema is the tool's to enforce) and
        the context. `replace`: a tool of that name is replaced, not refused (a server restarted)."""
        if not TOOL_NAME.match(name):
            raise ValueError(f"tool name {name!r} is invalid: use 1-64 letters, digits, '_' or '-'")
        if name in self._tools and not replace:
            raise ValueError(f"a tool named {name!r} is already registered")
        spec = ToolSpec(name, description.strip() or name, _clean_schema(copy.deepcopy(parameters)))
        self._tools[name] = _Tool(spec, fn, None, {}, None)

    def remove(self, name: str) -> None:
        """Stop offering `name` (a server's tool it no longer lists); unknown names are ignored."""
        self._tools.pop(name, None)

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

    def note_unavailable(self, name: str, reason: str) -> None:
        """Record why a tool the configuration asks for is not offered (no sandbox, no allow-list):
        `/status` tells the person. Nothing is recorded for a tool the configuration left out."""
        if self.wants(name):
            self._unavailable[name] = reason

    @property
    def unavailable(self) -> Mapping[str, str]:
        """Tool name → why it is not offered, for the tools the configuration asked for."""
        return dict(self._unavailable)

    def specs(self) -> list[ToolSpec]:
        """The tools as the model is offered them, in registration order (stable, so prompts cache)."""
        return [tool.spec for tool in self._tools.values()]

    async def execute_all(self, calls: Iterable[ToolCall], context: ToolContext) -> list[ToolResult]:
        """Run the calls of one model response concurrently; results come back in the calls' order."""
        return list(await asyncio.gather(*(self.execute(call, context) for call in calls)))

    def refuse(self, call: ToolCall) -> ToolResult | None:
        """The error result `execute` would give for an unknown tool or unusable arguments, else None;
        so a call nobody could run is not put to the person for approval first."""
        if call.name not in self._tools:
            return self._error(call, self._unknown(call))
        try:
            self._arguments(self._tools[call.name], call.arguments)
        except _BadArguments as exc:
            return self._error(call, str(exc))
        return None

    async def execute(self, call: ToolCall, context: ToolContext) -> ToolResult:
        """Run one call. Every problem on the tool's or the model's side becomes an error result."""
        tool = self._tools.get(call.name)
        if tool is None:
            return self._error(call, self._unknown(call))
        try:
            kwargs = self._arguments(tool, call.arguments)
        except _BadArguments as exc:
            return self._error(call, str(exc))
        if tool.context_parameter is not None:
            kwargs[tool.context_parameter] = context
        try:
            async with asyncio.timeout(self._timeout) as deadline:
                value = await (tool.fn(kwargs["arguments"], context) if tool.arguments is None else tool.fn(**kwargs))
        except TimeoutError as exc:
            if not deadline.expired():  # the tool's own timeout (an HTTP call, say), not ours
                return self._failed(call, exc)
            log.warning("tool %r timed out after %ss (call %s)", call.name, self._timeout, call.id)
            return self._error(call, f"the tool did not finish within {self._timeout:g} seconds and was cancelled")
        except ToolRefusal as exc:
            return self._error(call, str(exc))
        except Exception as exc:
            return self._failed(call, exc)
        return self._result(call, value)

    def _unknown(self, call: ToolCall) -> str:
        return unknown_tool(call, self._tools)

    def not_offered(self, call: ToolCall, offered: Sequence[str]) -> ToolResult | None:
        """The unknown-tool error for a call to a tool this model was not offered (another model's
        groups, `models.<id>.tools`), naming the ones it was; None when it was offered."""
        if call.name in offered:
            return None
        return self._error(call, unknown_tool(call, offered))

    def _arguments(self, tool: _Tool, raw: str) -> dict[str, Any]:
        # Some servers send "" for a call without arguments; that means {} rather than broken JSON.
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as exc:
            raise _BadArguments(f"the arguments are not valid JSON ({exc.msg} at position {exc.pos})") from None
        except RecursionError:  # nesting deeper than the parser's stack: not arguments any tool takes
            raise _BadArguments("the arguments are nested too deeply; send a flat JSON object") from None
        if not isinstance(parsed, dict):
            raise _BadArguments(f"the arguments must be a JSON object, not {_json_kind(parsed)}")
        if tool.arguments is None:
            return {"arguments": parsed}
        try:
            validated = tool.arguments.model_validate(parsed)
        except ValidationError as exc:
            raise _BadArguments(_describe(exc)) from None
        except RecursionError:
            raise _BadArguments("the arguments are nested too deeply; send a flat JSON object") from None
        return {param: getattr(validated, field_name) for field_name, param in tool.parameters.items()}

    def _result(self, call: ToolCall, value: Any) -> ToolResult:
        """A str is the model's text as is; anything else (dict, list, pydantic model, None) goes as JSON."""
        if isinstance(value, str):
            return ToolResult(call.id, call.name, self._truncate(value))
        try:
            text = to_json(value).decode()
        except PydanticSerializationError:
            log.warning("tool %r returned a %s, which is not JSON-serialisable", call.name, type(value).__name__)
            return self._error(call, f"the tool returned a {type(value).__name__}, which cannot be shown as text")
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
        return self._error(call, f"{type(exc).__name__}: {message}" if message else type(exc).__name__)

    def _error(self, call: ToolCall, message: str) -> ToolResult:
        return ToolResult(call.id, call.name, self._truncate(message), is_error=True)

    def _truncate(self, text: str) -> str:
        if len(text) <= self._max_chars:
            return text
        cut = len(text) - self._max_chars
        return f"{text[: self._max_chars]}\n[… truncated: {cut} of {len(text)} characters cut]"


class _BadArguments(Exception):
    """The model's arguments for a known tool were unusable; the message is for the model."""


def _arguments_model(
    fn: ToolFunction, tool_name: str, arg_docs: Mapping[str, str]
) -> tuple[type[BaseModel], dict[str, str], str | None]:
    """A pydantic model of `fn`'s parameters (minus the injected context) and the field→parameter map.

    Fields get neutral names (`p0`, `p1`, …) and the parameter name as alias, so parameters called
    `json`, `copy` or `model_id` cannot collide with BaseModel's own attributes; schema, validation
    and error locations all use the alias.
    """
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise ValueError(f"tool {tool_name!r}: cannot resolve its type hints ({exc})") from exc
    fields: dict[str, Any] = {}
    parameters: dict[str, str] = {}
    context_parameter: str | None = None
    for index, param in enumerate(inspect.signature(fn).parameters.values()):
        if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            raise ValueError(f"tool {tool_name!r}: parameter {param.name!r} must be a named parameter")
        if param.name not in hints:
            raise ValueError(f"tool {tool_name!r}: parameter {param.name!r} needs a type hint")
        hint = hints[param.name]
        if isinstance(hint, type) and issubclass(hint, ToolContext):  # exactly `ToolContext`, not Optional
            if context_parameter is not None:
                raise ValueError(f"tool {tool_name!r} asks for the ToolContext twice")
            context_parameter = param.name
            continue
        info: dict[str, Any] = {"alias": param.name}
        if param.default is not param.empty:
            info["default"] = param.default
        if param.name in arg_docs and not _has_description(hint):
            info["description"] = arg_docs[param.name]
        fields[f"p{index}"] = (hint, Field(**info))
        parameters[f"p{index}"] = param.name
    model = create_model(f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
    return model, parameters, context_parameter


def unknown_tool(call: ToolCall, available: Iterable[str]) -> str:
    listed = ", ".join(available) or "(none)"
    return f"unknown tool {_clip(call.name)!r}; available tools: {listed}"


def _is_coroutine_function(fn: ToolFunction) -> bool:
    # A plain bool, not inspect's TypeGuard, so `register` can hand back `fn` with its own type.
    return inspect.iscoroutinefunction(fn)


def _has_description(hint: Any) -> bool:
    if typing.get_origin(hint) is not Annotated:
        return False
    return any(isinstance(meta, FieldInfo) and meta.description for meta in hint.__metadata__)


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Google-style docstring → (text before the first section, {parameter: description} from Args:).

    Deliberately small: an entry is `name: text` or `name (type): text` at the section's first
    indentation; deeper-indented lines continue it; an unindented line ends the section.
    """
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    entry_indent: int | None = None
    current: str | None = None
    for line in doc.splitlines():
        header = _SECTION.match(line)
        if header:
            section, entry_indent, current = header.group(1), None, None
        elif section is None:
            summary.append(line)
        elif section in ("Args", "Arguments", "Parameters") and line.strip():
            indent = len(line) - len(line.lstrip())
            if indent == 0:
                section = "other"
                continue
            if entry_indent is None:
                entry_indent = indent
            entry = _ARG_LINE.match(line.strip()) if indent == entry_indent else None
            if entry:
                current = entry.group(1)
                args[current] = entry.group(2).strip()
            elif current is not None:
                args[current] = f"{args[current]} {line.strip()}".strip()
    # Wrapped lines are re-joined: the model reads one paragraph, not the source's line breaks.
    paragraphs = "\n".join(summary).strip().split("\n\n")
    text = "\n\n".join(" ".join(line.strip() for line in p.splitlines()) for p in paragraphs)
    return text, {name: described for name, described in args.items() if described}


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop what pydantic's schema carries for nothing; it is sent, and paid for in tokens, every turn.

    Gone: `title`s (they repeat the property names), `additionalProperties: true` (the default), and on
    a parameter that defaults to None its `null` branch and `default: null`: leaving the parameter out
    says the same, and an explicit null still validates. `additionalProperties: false` stays: grammar-
    constrained servers (llama.cpp) turn it into "no other keys" while the model writes the call.
    """

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("title"), str):
                del node["title"]
            if node.get("additionalProperties") is True:
                del node["additionalProperties"]
            for key, value in node.items():
                if key == "properties" and isinstance(value, dict):
                    for name, sub in value.items():
                        value[name] = _without_null_default(sub)
                        walk(value[name])
                elif key == "$defs" and isinstance(value, dict):
                    for sub in value.values():
                        walk(sub)
                elif key not in ("default", "enum", "const", "examples"):
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(schema)
    return schema


def _without_null_default(prop: Any) -> Any:
    """`{"anyOf": [X, {"type": "null"}], "default": null, ...}` → `{...X, ...}`: optional says it already."""
    if not isinstance(prop, dict) or "default" not in prop or prop["default"] is not None:
        return prop
    rest = {key: value for key, value in prop.items() if key != "default"}
    options = rest.get("anyOf")
    if not isinstance(options, list):
        return rest
    kept = [option for option in options if option != {"type": "null"}]
    if not kept:  # `x: None = None`: nothing else to offer
        return prop
    if len(kept) == 1 and isinstance(kept[0], dict):
        del rest["anyOf"]
        return {**kept[0], **rest}
    rest["anyOf"] = kept
    return rest


def _describe(exc: ValidationError) -> str:
    """Pydantic's errors as '- field: rule' lines, without the offending values (they can be huge)."""
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    lines = [
        f"- {'.'.join(_clip(str(part), _MAX_LOC_PART) for part in e['loc']) or '(arguments)'}: {e['msg']}"
        for e in errors[:_MAX_ERRORS_SHOWN]
    ]
    if len(errors) > _MAX_ERRORS_SHOWN:
        lines.append(f"- … and {len(errors) - _MAX_ERRORS_SHOWN} more")
    return "invalid arguments:\n" + "\n".join(lines)


def _clip(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _json_kind(value: Any) -> str:
    kinds: dict[type, str] = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")
