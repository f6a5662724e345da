"""`FunctionModel`: a chat model whose answers come from a Python function, in the same process.

Unit tests of the tool loop and the turn logic need a model that answers instantly and can look at
what it was sent; `FakeOpenAiServer` gives the same over real HTTP and stays the double for the
client and end-to-end tests. The function is the model (pydantic-ai's `FunctionModel` idea):

    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse | str:
        if info.turn_round == 1:
            return tool_calls(call_tool("current_time"))
        return f"it is {messages[-1].content}"

    FunctionModel(model)                      # satisfies `klaw.llm.protocol.ChatModel`

The function may be sync or async, return text or a whole `ChatResponse`, and raise any
`klaw.llm.errors.LlmError` to play a failing server; anything else it returns is an
`LlmMalformedResponseError` naming the function and what it may return, as a server's garbage is.
`stream` cuts the same answer into deltas the way OpenAI streams it (text in small pieces, each tool
call's id and name first and then its arguments in pieces, the finish reason last), so a consumer goes
through `StreamAccumulator` as it would against a server; `stream_function` replaces that with the test's own deltas.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from klaw.llm.call_purpose import CallPurpose, current_purpose, current_round
from klaw.llm.errors import LlmMalformedResponseError
from klaw.llm.messages import ChatMessage, ChatResponse, StreamDelta, ToolCall, ToolCallFragment, ToolSpec

__all__ = ["AgentInfo", "FunctionModel", "ModelCall", "call_tool", "tool_calls"]


@dataclass(frozen=True, slots=True)
class AgentInfo:
    """What the function may know besides the messages: the tools offered and the request options.
    `turn_round` is which call of its turn (or subagent run) this is: 1 for the first, one more after
    each round of tool calls (a summary request: 1). `round` counts every call this `FunctionModel`
    has answered, from 1, across turns, chats and purposes (`len(model.calls)` once it is recorded).
    `purpose` says what this one is for: `turn` (a person's message), `summary` (the summarizer, in
    the background) or `subagent`."""

    tools: tuple[ToolSpec, ...]
    temperature: float | None
    max_tokens: int | None
    round: int
    streamed: bool
    purpose: CallPurpose = "turn"
    turn_round: int = 1

    @property
    def tool_names(self) -> tuple[str, ...]:
        return tuple(tool.name for tool in self.tools)


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One request as the model received it (a copy: the caller's list may grow afterwards)."""

    messages: tuple[ChatMessage, ...]
    info: AgentInfo


Answer = ChatResponse | str
ModelFunction = Callable[[Sequence[ChatMessage], AgentInfo], Answer | Awaitable[Answer]]
StreamFunction = Callable[[Sequence[ChatMessage], AgentInfo], AsyncIterator[StreamDelta | str]]


def call_tool(name: str, arguments: Mapping[str, Any] | str | None = None, *, id: str | None = None) -> ToolCall:
    """A tool call as a model would send it; `arguments` as an object (sent as JSON) or raw text,
    so a test can send the invalid JSON real models produce."""
    text = arguments if isinstance(arguments, str) else json.dumps(dict(arguments or {}))
    return ToolCall(id=id or f"call_{name}", name=name, arguments=text)


def tool_calls(*calls: ToolCall, content: str | None = None) -> ChatResponse:
    """An answer that asks for tools (with optional text beside them, as some models send). Ids repeated in
    the answer are made unique (`call_echo`, `call_echo_2`): `call_tool`'s default id is the tool's name, and
    two calls of one tool under one id left their results indistinguishable to the model (adversary14)."""
    used: set[str] = set()
    unique: list[ToolCall] = []
    for call in calls:
        ident, count = call.id, 1
        while ident in used:
            count += 1
            ident = f"{call.id}_{count}"
        used.add(ident)
        unique.append(call if ident == call.id else replace(call, id=ident))
    return ChatResponse(content=content, tool_calls=tuple(unique), finish_reason="tool_calls")


@dataclass(eq=False)
class FunctionModel:
    """A chat model whose answers come from your function, in this process: `Klaw(home,
    model=FunctionModel(answer))` in a program's tests, or a model of your own.

    `function(messages, info)` is called once per request to the model, and may be sync or async:

    * `messages`: a `Sequence[ChatMessage]` (a tuple: copy it to change it), the whole request, as a
      server would get it: the system prompt, the chat's history, the new message, and the tool calls
      and results of this turn so far (`messages[-1]` is the newest).
    * `info`: an `AgentInfo`: the tools offered (`info.tool_names`), `turn_round` (1, then one more
      after each round of tool calls), `round` (every call so far), `purpose` (`turn`, `summary`,
      `subagent`), `streamed`, `temperature`, `max_tokens`.

    It returns the reply's text (`str`), or a `ChatResponse`: `tool_calls(call_tool("name", {...}))`
    asks for tools, and the function is called again with their results. It may raise a
    `klaw.llm.errors.LlmError` (`LlmServerError`, `LlmTimeoutError`…) to play a failing server; any other
    return value fails the turn with `LlmMalformedResponseError`, naming the function and what it may
    return.

    `stream_function(messages, info)`, optional: an async generator of the reply's pieces (`str`, or
    `StreamDelta` for tool calls and the finish reason), used when the engine streams a turn (`Klaw.stream`,
    the web page); without it the function's answer is cut into pieces of `chunk_chars` characters.
    `function` still answers the requests that are not streamed (`ask`, summaries).

    `name` is the model id shown (`/status`, errors; default `function:<the function's name>`); `calls`
    records every request in order (`ModelCall`: its messages and info)."""

    function: ModelFunction
    stream_function: StreamFunction | None = None
    name: str = ""  # default: `function:<the function's name>`, as pydantic-ai names it
    chunk_chars: int = 4
    calls: list[ModelCall] = field(default_factory=list, init=False)
    closed: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        if not self.name:
            self.name = f"function:{getattr(self.function, '__name__', type(self.function).__name__)}"

    @property
    def model_id(self) -> str:
        return self.name

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] | None = None,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> ChatResponse:
        info = self._record(messages, tools, temperature, max_tokens, streamed=False)
        return await self._answer(messages, info)

    async def stream(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] | None = None,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> AsyncGenerator[StreamDelta, None]:
        info = self._record(messages, tools, temperature, max_tokens, streamed=True)
        if self.stream_function is not None:
            async for piece in self.stream_function(tuple(messages), info):
                if not isinstance(piece, str | StreamDelta):
                    raise self._wrong_answer(self.stream_function, piece, "pieces that are a str or a StreamDelta")
                yield StreamDelta(content=piece, model=self.name) if isinstance(piece, str) else piece
            return
        for delta in self._deltas(await self._answer(messages, info)):
            yield delta

    async def aclose(self) -> None:
        self.closed = True

    def _record(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] | None,
        temperature: float | None,
        max_tokens: int | None,
        *,
        streamed: bool,
    ) -> AgentInfo:
        if self.closed:
            raise RuntimeError(f"model {self.name!r} was used after aclose()")
        info = AgentInfo(
            tuple(tools or ()),
            temperature,
            max_tokens,
            len(self.calls) + 1,
            streamed,
            current_purpose(),
            current_round(),
        )
        self.calls.append(ModelCall(tuple(messages), info))
        return info

    async def _answer(self, messages: Sequence[ChatMessage], info: AgentInfo) -> ChatResponse:
        answer = self.function(tuple(messages), info)
        if inspect.isawaitable(answer):
            answer = await answer
        if isinstance(answer, str):
            return ChatResponse(content=answer, finish_reason="stop", model=self.name)
        if not isinstance(answer, ChatResponse):
            raise self._wrong_answer(
                self.function, answer, "a str (the reply's text) or a ChatResponse (tool_calls(...))"
            )
        return answer if answer.model else replace(answer, model=self.name)

    def _wrong_answer(self, function: object, answer: object, allowed: str) -> LlmMalformedResponseError:
        """The program's function answered what no model could: named, with what it may return, so the
        `TurnFailed` the program gets says it rather than an AttributeError deep in here."""
        name = getattr(function, "__name__", None) or type(function).__name__
        return LlmMalformedResponseError(
            f"the model function {name}() returned {type(answer).__name__}; it must return {allowed}",
            model_id=self.name,
            base_url=None,
        )

    def _deltas(self, response: ChatResponse) -> Iterator[StreamDelta]:
        text = response.content or ""
        for start in range(0, len(text), self.chunk_chars):
            yield StreamDelta(content=text[start : start + self.chunk_chars], model=self.name)
        for index, call in enumerate(response.tool_calls):
            yield StreamDelta(tool_calls=(ToolCallFragment(index, id=call.id, name=call.name),), model=self.name)
            for start in range(0, len(call.arguments), self.chunk_chars):
                piece = call.arguments[start : start + self.chunk_chars]
                yield StreamDelta(tool_calls=(ToolCallFragment(index, arguments=piece),), model=self.name)
        finish = response.finish_reason or ("tool_calls" if response.tool_calls else "stop")
        yield StreamDelta(finish_reason=finish, usage=response.usage, model=response.model)
