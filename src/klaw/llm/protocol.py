"""The contract every chat model fulfils, and the assembly of a streamed answer.

The engine codes against `ChatModel` only, so tests and benchmarks can swap in scripted models and
the OpenAI-compatible client stays one implementation among possible others.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterable, Sequence
from typing import Protocol, runtime_checkable

from klaw.llm.messages import ChatMessage, ChatResponse, StreamDelta, ToolCall, ToolSpec, Usage


@runtime_checkable
class ChatModel(Protocol):
    """A chat model reachable by id.

    `complete` returns the whole answer. `stream` is an async generator of `StreamDelta`s for
    showing text as it arrives (close it with `contextlib.aclosing` when stopping early); feed the
    deltas to a `StreamAccumulator` (or use `collect`) to get the same `ChatResponse` `complete`
    would have returned. Both raise `klaw.llm.errors.LlmError` subclasses. `aclose` releases
    connections; the model must not be used afterwards.
    """

    @property
    def model_id(self) -> str: ...

    async def complete(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] | None = None,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> ChatResponse: ...

    def stream(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolSpec] | None = None,
        *,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> AsyncGenerator[StreamDelta, None]: ...

    async def aclose(self) -> None: ...


class _PartialCall:
    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []


class StreamAccumulator:
    """Assembles streamed deltas into one `ChatResponse`.

    Tool calls arrive as fragments tagged with the call's position (`index`): the first fragment
    usually carries the id and name, later ones pieces of the arguments JSON. Servers that omit the
    index send each call whole; such a fragment starts a new call when it brings a new id (or a name
    while the last call already has one), else it continues the last call.
    """

    def __init__(self) -> None:
        self._content: list[str] = []
        self._calls: dict[int, _PartialCall] = {}
        self._finish_reason: str | None = None
        self._usage: Usage | None = None
        self._model = ""

    def add(self, delta: StreamDelta) -> None:
        if delta.content:
            self._content.append(delta.content)
        for fragment in delta.tool_calls:
            index = fragment.index if fragment.index is not None else self._unindexed_slot(fragment.id, fragment.name)
            call = self._calls.setdefault(index, _PartialCall())
            if fragment.id:
                call.id = fragment.id
            if fragment.name and not call.name:  # some servers repeat the name on every fragment
                call.name = fragment.name
            if fragment.arguments:
                call.arguments.append(fragment.arguments)
        self._finish_reason = delta.finish_reason or self._finish_reason
        self._usage = delta.usage or self._usage
        self._model = delta.model or self._model

    @property
    def finished(self) -> bool:
        """Whether a finish reason arrived (a stream cut before it is incomplete)."""
        return self._finish_reason is not None

    def result(self) -> ChatResponse:
        calls = tuple(
            ToolCall(id=call.id or f"call_{index}", name=call.name, arguments="".join(call.arguments))
            for index, call in sorted(self._calls.items())
        )
        return ChatResponse(
            content="".join(self._content) if self._content else None,
            tool_calls=calls,
            finish_reason=self._finish_reason,
            usage=self._usage,
            model=self._model,
        )

    def _unindexed_slot(self, call_id: str | None, name: str | None) -> int:
        if not self._calls:
            return 0
        last_index = max(self._calls)
        last = self._calls[last_index]
        if (call_id and last.id and call_id != last.id) or (name and last.name and not call_id):
            return last_index + 1
        return last_index


async def collect(deltas: AsyncIterable[StreamDelta]) -> ChatResponse:
    """Drain a stream and return the assembled answer."""
    accumulator = StreamAccumulator()
    async for delta in deltas:
        accumulator.add(delta)
    return accumulator.result()
