"""The chat data types the engine speaks, and their conversion to and from the OpenAI wire format.

Every provider klaw talks to (OpenAI, Ollama, vLLM, llama.cpp server, OpenRouter) speaks the OpenAI
chat-completions JSON, so that wire format is the only one; keeping the conversion next to the types
means a field added here cannot be forgotten in the client. The types are frozen so a message that
went into one turn's context cannot be mutated behind the store's back.

Tool-call arguments stay the raw JSON string the model produced: models emit invalid JSON often
enough that parsing and validating them is the tool registry's job, where the error can be fed back
to the model, not a transport failure here.

Every string of an answer is made valid text as it is parsed (`strict_json.as_text`): a lone
surrogate, an emoji a server cut in half, becomes U+FFFD instead of failing the turn when the log or
SQLite first encodes it. A streamed answer's pieces are made text with the stream's `SplitPairs`, so an
emoji whose two halves came in two chunks is joined back, not two U+FFFD.

Parsing raises `WireFormatError` (a `ValueError`) for shapes that do not match; the client turns it
into `LlmMalformedResponseError` with the model and endpoint attached.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, cast

from klaw.errors import KlawError
from klaw.strict_json import SplitPairs, as_text

Role = Literal["system", "user", "assistant", "tool"]
# A tool call's id or name: OpenAI's ids are ~30 characters and its names at most 64.
MAX_LABEL_CHARS = 1_000
_Label = TypeVar("_Label", str, str | None)
_ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})


class WireFormatError(KlawError, ValueError):
    """A JSON body did not have the shape of the OpenAI wire format; the message names the field."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One function call the model asked for. `arguments` is the model's raw JSON text."""

    id: str
    name: str
    arguments: str

    def to_wire(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool offered to the model: its name, what it does, and a JSON schema of its parameters."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def to_wire(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of a conversation as the model sees it.

    `tool_calls` is set on assistant messages that called tools; `tool_call_id` (and optionally
    `name`) on the tool-role message carrying a call's result, so the model can match them up.
    """

    role: Role
    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None

    @classmethod
    def system(cls, content: str) -> ChatMessage:
        return cls("system", content)

    @classmethod
    def user(cls, content: str, *, name: str | None = None) -> ChatMessage:
        return cls("user", content, name=name)

    @classmethod
    def assistant(cls, content: str | None, tool_calls: Sequence[ToolCall] = ()) -> ChatMessage:
        return cls("assistant", content, tool_calls=tuple(tool_calls))

    @classmethod
    def tool(cls, tool_call_id: str, content: str, *, name: str | None = None) -> ChatMessage:
        return cls("tool", content, tool_call_id=tool_call_id, name=name)

    def to_wire(self) -> dict[str, Any]:
        """OpenAI's message object. `content` is null only on an assistant message that calls tools
        (as OpenAI sends it); elsewhere a missing text becomes "", which every server accepts.
        `name` is sent only when set: Gemini's endpoint wants it on tool messages, a few strict
        proxies reject it."""
        content = self.content if self.content is not None or self.tool_calls else ""
        wire: dict[str, Any] = {"role": self.role, "content": content}
        if self.tool_calls:
            wire["tool_calls"] = [call.to_wire() for call in self.tool_calls]
        if self.tool_call_id is not None:
            wire["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            wire["name"] = self.name
        return wire

    @classmethod
    def from_wire(cls, wire: Any) -> ChatMessage:
        obj = _object(wire, "message")
        role = obj.get("role", "assistant")
        if role not in _ROLES:
            raise WireFormatError(f"message.role is {role!r}, not one of {sorted(_ROLES)}")
        return cls(
            role=cast(Role, role),
            content=_optional_text(obj.get("content"), "message.content"),
            tool_calls=tuple(tool_call_from_wire(call) for call in _list(obj.get("tool_calls"), "tool_calls")),
            tool_call_id=_optional_text(obj.get("tool_call_id"), "message.tool_call_id"),
            name=_optional_text(obj.get("name"), "message.name"),
        )


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts the provider reported for one call (absent when the server does not say)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int

    @classmethod
    def from_wire(cls, wire: Any) -> Usage | None:
        if not isinstance(wire, Mapping):
            return None
        prompt = _int(wire.get("prompt_tokens"))
        completion = _int(wire.get("completion_tokens"))
        total = _int(wire.get("total_tokens"))
        return cls(prompt, completion, total or prompt + completion)


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """The model's answer to one request: text, tool calls, or both."""

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    usage: Usage | None = None
    model: str = ""

    @property
    def message(self) -> ChatMessage:
        """The answer as an assistant message, ready to append to the conversation."""
        return ChatMessage.assistant(self.content, self.tool_calls)

    @classmethod
    def from_wire(cls, wire: Any) -> ChatResponse:
        body = _object(wire, "response")
        choices = _list(body.get("choices"), "choices")
        if not choices:
            raise WireFormatError("the response has no choices")
        choice = _object(choices[0], "choices[0]")
        message = ChatMessage.from_wire(choice.get("message"))
        return cls(
            content=message.content,
            tool_calls=message.tool_calls,
            finish_reason=_optional_text(choice.get("finish_reason"), "finish_reason"),
            usage=Usage.from_wire(body.get("usage")),
            model=as_text(str(body.get("model") or "")),
        )


@dataclass(frozen=True, slots=True)
class ToolCallFragment:
    """A piece of a streamed tool call.

    OpenAI streams each call's id and name once, then its arguments in pieces, all tagged with the
    call's position `index`; pieces with the same index are concatenated. Some servers omit the
    index (it is then None) and send each call whole.
    """

    index: int | None
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True, slots=True)
class StreamDelta:
    """One streamed chunk: a piece of text, tool-call fragments, and on the last chunks the finish
    reason and usage."""

    content: str | None = None
    tool_calls: tuple[ToolCallFragment, ...] = ()
    finish_reason: str | None = None
    usage: Usage | None = None
    model: str = ""

    @classmethod
    def from_wire(cls, wire: Any, pairs: SplitPairs | None = None) -> StreamDelta:
        """One chunk; with `pairs` (the stream's), a character split between two chunks is joined back."""
        chunk = _object(wire, "chunk")
        choices = _list(chunk.get("choices"), "choices")
        content: str | None = None
        fragments: tuple[ToolCallFragment, ...] = ()
        finish_reason: str | None = None
        if choices:  # the usage-only chunk at the end of a stream has no choices
            choice = _object(choices[0], "choices[0]")
            delta = _object(choice.get("delta") or {}, "delta")
            content = _optional_text(delta.get("content"), "delta.content", pairs)
            parts = _list(delta.get("tool_calls"), "tool_calls")
            fragments = tuple(_fragment_from_wire(part, pairs) for part in parts)
            finish_reason = _optional_text(choice.get("finish_reason"), "finish_reason")
        return cls(
            content,
            fragments,
            finish_reason,
            Usage.from_wire(chunk.get("usage")),
            as_text(str(chunk.get("model") or "")),
        )


def tool_call_from_wire(wire: Any) -> ToolCall:
    obj = _object(wire, "tool_call")
    function = _object(obj.get("function"), "tool_call.function")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise WireFormatError("tool_call.function.name is missing")
    call_id = _label(as_text(str(obj.get("id") or "")), "tool_call.id")
    name = _cut_name(as_text(name))
    return ToolCall(id=call_id, name=name, arguments=_arguments_text(function.get("arguments")))


def _fragment_from_wire(wire: Any, pairs: SplitPairs | None = None) -> ToolCallFragment:
    obj = _object(wire, "tool_call delta")
    function = _object(obj.get("function") or {}, "tool_call delta.function")
    index = obj.get("index")
    index = index if isinstance(index, int) else None
    arguments = function.get("arguments")
    return ToolCallFragment(
        index=index,
        id=_label(_optional_text(obj.get("id"), "tool_call.id"), "tool_call.id"),
        name=_cut_name(_optional_text(function.get("name"), "tool_call.function.name")),
        # only a call's pieces tagged with its index are joined: one without is sent whole
        arguments=_arguments_text(arguments, None if index is None else pairs, index),
    )


def _arguments_text(value: Any, pairs: SplitPairs | None = None, index: int | None = None) -> str:
    """Arguments as JSON text; a few servers send an already-parsed object instead of a string."""
    if value is None:
        return ""
    if isinstance(value, str):
        return as_text(value) if pairs is None else pairs.piece(index, value)
    if isinstance(value, Mapping):
        return as_text(json.dumps(value, ensure_ascii=False))
    raise WireFormatError(f"tool_call.function.arguments is {_json_kind(value)}, not a string")


def _label(value: _Label, what: str) -> _Label:
    """A tool call's id, refused past `MAX_LABEL_CHARS`: it is stored and sent back with every later
    request, and is not part of the answer's counted length (decision 317)."""
    if value is not None and len(value) > MAX_LABEL_CHARS:
        raise WireFormatError(f"{what} is {len(value):,} characters long (a tool call id: at most {MAX_LABEL_CHARS:,})")
    return value


def _cut_name(value: _Label) -> _Label:
    """A tool call's name, cut at `MAX_LABEL_CHARS`: no tool has such a name, so the call is answered
    "not offered" and the turn goes on (tests/engine/test_reply_tool_names_bounded.py), while what is
    stored and sent back stays small (decision 317's addendum)."""
    return value if value is None or len(value) <= MAX_LABEL_CHARS else value[:MAX_LABEL_CHARS]


def _object(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise WireFormatError(f"{what} is {_json_kind(value)}, not a JSON object")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise WireFormatError(f"{what} is {_json_kind(value)}, not a JSON array")
    return value


def _optional_text(value: Any, what: str, pairs: SplitPairs | None = None) -> str | None:
    """A string field of the answer, lone surrogates (an emoji a server cut in half, a `\\ud800` escape)
    made U+FFFD here, where the server's text enters klaw, before the log, SQLite or a socket meets it;
    with `pairs`, a piece of the streamed answer, a character split between two pieces joined back."""
    if value is None:
        return None
    if isinstance(value, str):
        return as_text(value) if pairs is None else pairs.piece("content", value)
    raise WireFormatError(f"{what} is {_json_kind(value)}, not a string")


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _json_kind(value: Any) -> str:
    """What a JSON value is, in JSON's words ("an array"), not Python's class ("a list"): the server
    sent JSON, and the person reading the error knows its shapes, not klaw's."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "a JSON object" if isinstance(value, Mapping) else "not JSON"
