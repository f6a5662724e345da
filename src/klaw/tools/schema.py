"""What a tool is as the model sees it: a typed function turned into a JSON schema, and the model's
arguments checked against that same schema.

A tool is an ordinary function with type hints and a docstring: a coroutine function, or a plain `def`
(run in a daemon thread of its own, `in_own_thread`, as pydantic-ai runs one in a thread; decision
293). Its JSON schema is derived by pydantic from the signature (one model per tool, `extra="forbid"`),
so the schema the model sees and the validation its arguments go through cannot drift apart. Parameter
descriptions come from `Annotated[..., Field(description=...)]` or, failing that, the docstring's
`Args:` section; the tool's description is the docstring up to its first section header.

Argument errors are texts for the model (`BadArguments`): they name fields and rules but never echo
the model's values back. Running a call is klaw/tools/calls.py's; the set of tools, klaw/tools/registry.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import inspect
import json
import re
import threading
import types
import typing
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.fields import FieldInfo

from klaw import strict_json
from klaw.errors import KlawError
from klaw.llm.messages import ToolCall, ToolSpec
from klaw.store.records import ChatRef
from klaw.tools.schema_text import describe_invalid, parse_docstring, trimmed_schema

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
ToolFunction = Callable[..., Any]  # an `async def`, or a plain `def` run in a worker thread
SchemaToolFunction = Callable[[dict[str, Any], "ToolContext"], Awaitable[Any]]
"""A tool described by a JSON schema of its own (an MCP server's): called with the model's argument object."""


class ToolDefinitionError(KlawError, ValueError):
    """A function that cannot be offered as a tool (a generator, no description, a parameter the
    model cannot be told about, a name taken): raised when the engine starts, naming the tool and the fix.
    `tool` and `module`: the tool's name and the module defining its function, when known; `fix`: what its
    author writes instead, alone, so a plugin's failed row can put it first (decision 501)."""

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        super().__init__(message)
        self.fix = fix
        self.tool: str | None = None
        self.module: str | None = None


@dataclass(slots=True)
class ToolContext:
    """What a tool may know about the turn that called it; injected, never chosen by the model.

    A tool asks for it by declaring a parameter annotated `ToolContext`; that parameter is left out of
    the schema. `extras` carries engine services by well-known key so that adding a service does not
    change this type. Keys in use:

    * `"clock"`: an object with `now() -> datetime` (timezone-aware, UTC); tools that tell the time
      read it so tests control time. Absent means the system clock.
    * `"message_sends"`: how many messages `message_send` sent in this turn; one context, so one dict,
      serves a whole turn (every round), which is what its per-turn cap counts (messaging/limits.py).
      A run the turn spawns (`subagent_spawn`) starts from a copy of this dict, sharing its objects.
    """

    chat: ChatRef
    workspace: Path
    extras: dict[str, Any] = field(default_factory=dict)


class BadArguments(KlawError, ValueError):
    """The model's arguments for a known tool were unusable; the message is for the model (the tool
    call's error result), naming fields and rules, never the values."""


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """One tool: its spec as offered, its function, and how the model's arguments reach the function."""

    spec: ToolSpec
    fn: ToolFunction
    arguments: type[BaseModel] | None  # None: a schema tool, given the argument object as it came
    parameters: Mapping[str, str]  # pydantic field name -> the function's parameter name
    context_parameter: str | None
    in_thread: bool = False  # a plain `def`: called in a worker thread

    def kwargs(self, raw: str, context: ToolContext) -> dict[str, Any]:
        """The function's keyword arguments for the model's raw JSON `raw`; raises BadArguments."""
        values = self.validate(raw)
        if self.context_parameter is not None:
            values[self.context_parameter] = context
        return values

    def validate(self, raw: str) -> dict[str, Any]:
        """The model's arguments, parsed and checked against the schema (without the context)."""
        parsed = _json_object(raw)
        if self.arguments is None:
            return {"arguments": parsed}
        try:
            validated = self.arguments.model_validate(parsed)
        except ValidationError as exc:
            raise BadArguments(describe_invalid(exc, self.spec.parameters)) from None
        except RecursionError:
            raise BadArguments(_TOO_DEEP) from None
        return {param: getattr(validated, field_name) for field_name, param in self.parameters.items()}

    def call(self, kwargs: dict[str, Any], context: ToolContext) -> Awaitable[Any]:
        """The coroutine running the tool on arguments from `kwargs` (a plain `def` in a worker thread: a
        timeout stops the waiting for it, not the thread)."""
        if self.arguments is None:
            return self.fn(kwargs["arguments"], context)  # type: ignore[no-any-return]
        if self.in_thread:
            return in_own_thread(self.fn, kwargs)
        return self.fn(**kwargs)  # type: ignore[no-any-return]


async def in_own_thread(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """`fn(**kwargs)` in a daemon thread of its own, awaited; not asyncio's shared pool, which every turn
    reads its prompt files through and Python joins at exit (decision 293's addendum)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(ok: bool, value: Any) -> None:
        if not done.done():  # the call may have timed out meanwhile
            done.set_result(value) if ok else done.set_exception(value)

    def run() -> None:
        try:
            outcome: tuple[bool, Any] = (True, context.run(fn, **kwargs))
        except BaseException as exc:  # handed to the awaiting call, as to_thread would
            outcome = (False, exc)
        with contextlib.suppress(RuntimeError):  # the loop closed while the tool ran: nobody waits
            loop.call_soon_threadsafe(settle, *outcome)

    threading.Thread(target=run, name=f"klaw-tool-{getattr(fn, '__name__', 'tool')}", daemon=True).start()
    return await done


def check_name(name: str) -> None:
    """Raises ToolDefinitionError for a name the model's API would refuse."""
    if not TOOL_NAME.match(name):
        raise ToolDefinitionError(f"tool name {name!r} is invalid: use 1-64 letters, digits, '_' or '-'")


def function_tool(fn: ToolFunction, name: str, description: str | None) -> ToolDefinition:
    """The definition of `fn` offered as `name`. Raises ToolDefinitionError for a generator, a missing
    description, or parameters that cannot be described (no type hint, `*args`, `**kwargs`)."""
    try:
        return _function_tool(fn, name, description)
    except ToolDefinitionError as exc:  # who wrote it: a plugin's row names the tool's module, not a provider
        exc.tool, module = name, getattr(fn, "__module__", None)
        exc.module = module if isinstance(module, str) else None
        raise


def _function_tool(fn: ToolFunction, name: str, description: str | None) -> ToolDefinition:
    check_name(name)
    if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
        raise ToolDefinitionError(
            f"tool {name!r} yields its results: a tool returns one result; write `return` instead of `yield`",
            fix="write `return` instead of `yield`",
        )
    in_thread = not inspect.iscoroutinefunction(fn)
    doc = inspect.getdoc(fn) or ""
    source = _source(fn, name, description, doc)
    known = _derived.get(fn.__code__) if source is not None else None
    if known is not None and known.globals is fn.__globals__ and _equal(known.source, source):
        spec = ToolSpec(name, known.spec.description, copy.deepcopy(dict(known.spec.parameters)))
        return ToolDefinition(spec, fn, known.arguments, known.parameters, known.context_parameter, in_thread)
    summary, arg_docs = parse_docstring(doc)
    text = description if description is not None else summary
    if not text.strip():
        raise ToolDefinitionError(
            f"tool {name!r} needs a description: give it a docstring saying what it does (the model reads it)",
            fix="give it a docstring saying what it does (the model reads it)",
        )
    arguments, parameters, context_parameter = _arguments_model(fn, name, arg_docs)
    spec = ToolSpec(name, text.strip(), trimmed_schema(arguments.model_json_schema()))
    if source is not None:
        _derived[fn.__code__] = _Derived(source, fn.__globals__, spec, arguments, parameters, context_parameter)
        spec = ToolSpec(name, spec.description, copy.deepcopy(dict(spec.parameters)))
    return ToolDefinition(spec, fn, arguments, parameters, context_parameter, in_thread)


@dataclass(frozen=True, slots=True)
class _Derived:
    """What `function_tool` derived from a plain function, beside what it derived it from. Every engine
    start registers its tools anew, as closures made for it from the same `def`s; building each one's
    pydantic model and JSON schema again was about half the cost of starting an engine (decision 239),
    so a `def` registered again with the same `source` and globals reuses them."""

    source: tuple[Any, ...]
    globals: dict[str, Any]
    spec: ToolSpec
    arguments: type[BaseModel]
    parameters: Mapping[str, str]
    context_parameter: str | None


# The last derivation made from each `def` (its code object): one entry per tool function in the code.
_derived: dict[types.CodeType, _Derived] = {}


def _source(fn: ToolFunction, name: str, description: str | None, doc: str) -> tuple[Any, ...] | None:
    """All that `function_tool` reads from `fn` besides its code and globals, each default with its type
    (True == 1); None for what it cannot be sure of (a wrapper, a partial, an object with a signature of
    its own), derived anew each time."""
    if type(fn) is not types.FunctionType or hasattr(fn, "__wrapped__") or hasattr(fn, "__signature__"):
        return None
    defaults = tuple((type(value), value) for value in fn.__defaults__ or ())
    keyword_defaults = tuple((key, type(value), value) for key, value in (fn.__kwdefaults__ or {}).items())
    return (name, description, doc, defaults, keyword_defaults, tuple(fn.__annotations__.items()))


def _equal(known: tuple[Any, ...], now: tuple[Any, ...] | None) -> bool:
    """`==`, and False where a value cannot say (an array's `==` raises)."""
    try:
        return bool(known == now)
    except Exception:
        return False


def schema_tool(name: str, description: str, parameters: dict[str, Any], fn: SchemaToolFunction) -> ToolDefinition:
    """The definition of a tool whose JSON schema comes from elsewhere (an MCP server's); `fn` gets the
    model's argument object (checked to be a JSON object; the schema is the tool's to enforce)."""
    check_name(name)
    spec = ToolSpec(name, description.strip() or name, trimmed_schema(copy.deepcopy(parameters)))
    return ToolDefinition(spec, fn, None, {}, None)


def unknown_tool(call: ToolCall, available: Iterable[str]) -> str:
    """The model's error for a call to a tool it was not offered, naming the ones it was."""
    listed = ", ".join(available) or "(none)"
    return f"unknown tool {_clip(call.name)!r}; available tools: {listed}"


_TOO_LONG_NUMBER = "the arguments hold a number with more digits than can be read (4,300 at most)"
_TOO_DEEP = "the arguments are nested too deeply; send a flat JSON object"


def _json_object(raw: str) -> dict[str, Any]:
    # Some servers send "" for a call without arguments; that means {} rather than broken JSON.
    try:
        parsed = strict_json.repaired(json.loads(raw)) if raw.strip() else {}
    except json.JSONDecodeError as exc:
        raise BadArguments(f"the arguments are not valid JSON ({exc.msg} at position {exc.pos})") from None
    except RecursionError:  # nesting deeper than the parser's stack: not arguments any tool takes
        raise BadArguments(_TOO_DEEP) from None
    except ValueError:  # an integer past Python's 4,300-digit conversion limit (adversary22: it failed the turn)
        raise BadArguments(_TOO_LONG_NUMBER) from None
    if not isinstance(parsed, dict):
        raise BadArguments(f"the arguments must be a JSON object, not {_json_kind(parsed)}")
    return parsed


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
        raise ToolDefinitionError(f"tool {tool_name!r}: cannot resolve its type hints ({exc})") from exc
    fields: dict[str, Any] = {}
    parameters: dict[str, str] = {}
    context_parameter: str | None = None
    for index, param in enumerate(inspect.signature(fn).parameters.values()):
        if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {param.name!r} must be a named parameter"
                " (the model cannot be told about *args, **kwargs or positional-only ones): name each argument",
                fix=f"make {param.name} a named parameter (no *args, **kwargs or positional-only ones)",
            )
        if param.name not in hints:
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {param.name!r} needs a type hint (e.g. `{param.name}: str`),"
                " from which the model is told what to send",
                fix=f"give parameter {param.name} a type hint (e.g. `{param.name}: str`)",
            )
        hint = hints[param.name]
        if isinstance(hint, type) and issubclass(hint, ToolContext):  # exactly `ToolContext`, not Optional
            if context_parameter is not None:
                raise ToolDefinitionError(f"tool {tool_name!r} asks for the ToolContext twice: keep one such parameter")
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


def _has_description(hint: Any) -> bool:
    if typing.get_origin(hint) is not Annotated:
        return False
    return any(isinstance(meta, FieldInfo) and meta.description for meta in hint.__metadata__)


def _clip(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def _json_kind(value: Any) -> str:
    kinds: dict[type, str] = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return kinds.get(type(value), "a number")
