"""The tool-call loop: ask the model, run the tools it asks for, repeat, within a round limit.

Every assistant tool-call message and every tool result is recorded through `record` (the log and
the database) as it happens, so a crash mid-turn loses nothing and the window of later turns shows
what the agent did. Tool calls of one round run concurrently. A tool's failure is a result the
model sees, never a crash. More than `max_rounds` model calls that still ask for tools end the turn
with a clear message to the person. With `on_text`, each answer is streamed and its text pieces are
passed on as they arrive (a channel showing the reply as it is written); the outcome is the same.
A call of a tool the person must approve (engine/approval.py) waits for `approve` first; one not
approved never reaches the registry, its result says why, and its record names the decision.

One answer runs at most `max_calls` of its calls (tools.maxCallsPerResponse, decision 284): an answer of
thousands (a model run wild, or steered by an injected instruction) once took over ten seconds to run
and filled the chat's history. The first `max_calls` run; each of the rest gets a result saying it was
not run and why, so every call keeps its result (providers reject a call without one) and the model
can go on. A round's results are recorded together, one log write for all of them.

One rule decides what a call may reach: only the tools this run was offered (`tools`, its context's:
the model's groups, less what a task's run is not offered). A call to any other tool, registered or
not, gets the "unknown tool" error listing the offered ones (decision 258), so no tool needs to refuse
a caller it was not offered to.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, aclosing, nullcontext
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from klaw.engine.approval import Decision, Verdict
from klaw.engine.text_batches import TextBatches
from klaw.engine.tools_used import DENIED, NOT_ASKED, NOT_OFFERED, OVER_LIMIT
from klaw.engine.transcript import tool_calls_metadata
from klaw.llm.answer_cap import MAX_ANSWER_CHARS, answer_chars, too_long
from klaw.llm.call_purpose import calling_in_round
from klaw.llm.messages import ChatMessage, ChatResponse, ToolCall, ToolSpec
from klaw.llm.protocol import ChatModel, StreamAccumulator
from klaw.store.records import ChatRef, ExchangeStatus, MessageRecord, MessageType, Role
from klaw.tools.calls import ToolResult
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolContext

Approver = Callable[[ToolCall], Awaitable[Verdict | None]]  # None: not held; else what became of it
# Records written together, in one log write: ingestion (chats), or a task's log (subagents).
Recorder = Callable[[Sequence[MessageRecord]], Awaitable[object]]
TextSink = Callable[[str], Awaitable[None]]
DEFAULT_MAX_CALLS = 32  # tools.maxCallsPerResponse's default


@dataclass(frozen=True)
class LoopOutcome:
    text: str
    status: ExchangeStatus
    rounds: int
    tool_calls: int
    tool_names: tuple[str, ...] = ()  # each call's tool, in the order made: a channel lists them with the reply
    # (index in tool_names, why that call was not run: tools_used.NOT_OFFERED or OVER_LIMIT), for the list's marks
    not_run: tuple[tuple[int, str], ...] = ()


def tool_limit_message(limit: int) -> str:
    return (
        f"I stopped after {limit} rounds of tool calls without reaching an answer "
        f"(the limit is processing.maxToolCallRounds = {limit} in engine.yaml). "
        "Ask me to continue, or break the request into smaller steps."
    )


def stopping_message(tools: Sequence[str]) -> str:
    """The reply of a turn whose held calls the engine's shutdown denied: the model is not asked again
    (each round it would ask for them again, up to maxToolCallRounds, while klaw waits to stop; decision 454)."""
    named = ", ".join(dict.fromkeys(tools))
    return (
        f"klaw is stopping, so {named} did not run: it needs your approval, and no question is answered while"
        " klaw stops. Send your message again once klaw is back to be asked again."
    )


def not_run_message(asked: int, limit: int) -> str:
    """The result of each call past the first `limit` of an answer that asked for `asked`."""
    return (
        f"Not run: this answer asked for {asked} tool calls and klaw runs at most {limit} from one answer"
        f" (tools.maxCallsPerResponse in engine.yaml). The first {limit} ran; ask again for what is still needed."
    )


async def run_tool_loop(
    *,
    model: ChatModel,
    messages: list[ChatMessage],
    tools: list[ToolSpec],
    registry: ToolRegistry,
    tool_context: ToolContext,
    max_rounds: int,
    chat: ChatRef,
    record: Recorder,
    now: Callable[[], datetime],
    on_text: TextSink | None = None,
    approve: Approver | None = None,
    max_calls: int = DEFAULT_MAX_CALLS,
    checkpoint: Callable[[], Awaitable[None]] | None = None,
    around_call: Callable[[], AbstractAsyncContextManager[None]] | None = None,
    stopping: Callable[[], bool] | None = None,
) -> LoopOutcome:
    """Run the loop on `messages` (extended in place); returns the final text and status. The model may
    call the tools `tools` offers it, and no other, at most `max_calls` of them from one answer.
    `checkpoint` is awaited before each model call, after each answer and after each round's tools,
    before anything of them is recorded or returned: it raises to stop the turn there. `around_call` is
    entered around each model call alone, never the tools (the turn's LLM slot, decision 297). `stopping`
    (the approval gate closed by a shutdown) ends the turn after a round whose held calls it denied."""
    names: list[str] = []
    not_run: list[tuple[int, str]] = []

    def outcome(text: str, status: ExchangeStatus, rounds: int) -> LoopOutcome:
        return LoopOutcome(text, status, rounds, len(names), tuple(names), tuple(not_run))

    for round_number in range(1, max_rounds + 1):
        if checkpoint is not None:
            await checkpoint()
        with calling_in_round(round_number):
            async with around_call() if around_call is not None else nullcontext():
                response = await _ask(model, messages, tools, on_text)
        if checkpoint is not None:
            await checkpoint()
        if not response.tool_calls:
            return outcome(response.content or "", ExchangeStatus.COMPLETED, round_number)
        calls = list(response.tool_calls)
        first = len(names)
        names += [call.name for call in calls]
        messages.append(ChatMessage.assistant(response.content, calls))
        metadata = tool_calls_metadata(calls)
        await record([_record(chat, Role.ASSISTANT, response.content or "", MessageType.TOOL_CALL, metadata, now)])
        offered = [spec.name for spec in tools]  # what this run's context offered, and all it may call
        within = calls[:max_calls]
        ran = await asyncio.gather(*(_run(call, registry, tool_context, approve, offered) for call in within))
        if checkpoint is not None:
            await checkpoint()
        over = [_over_limit(call, len(calls), max_calls) for call in calls[max_calls:]]
        results: list[MessageRecord] = []
        for index, (result, decision, why) in enumerate([*ran, *over], first):
            messages.append(ChatMessage.tool(result.call_id, result.content, name=result.name))
            metadata = {"tool_call_id": result.call_id, "name": result.name, "is_error": result.is_error}
            if decision is not None:
                metadata["approval"] = decision
            if why is not None:
                metadata["not_run"] = why
                not_run.append((index, why))
            results.append(_record(chat, Role.TOOL, result.content, MessageType.TOOL_RESULT, metadata, now))
        await record(results)
        unasked = [r.name for r, decision, _ in ran if decision == Decision.UNAVAILABLE.value]
        if unasked and stopping is not None and stopping():
            return outcome(stopping_message(unasked), ExchangeStatus.COMPLETED, round_number)
    return outcome(tool_limit_message(max_rounds), ExchangeStatus.TOOL_LIMIT, max_rounds)


def _record(
    chat: ChatRef, role: Role, text: str, kind: MessageType, metadata: dict[str, Any], now: Callable[[], datetime]
) -> MessageRecord:
    return MessageRecord(chat, role, text, type=kind, metadata=metadata, created_at=now())


_DENIALS = frozenset({Decision.DENIED, Decision.TIMED_OUT, Decision.NO_PERSON, Decision.NO_TERMINAL})
"""The decisions a reply's tool list marks "(denied)"; any other refusal of a held call is "(not run)"."""

Run = tuple[ToolResult, str | None, str | None]  # the result, the approval decision's name, why it was not run


def _over_limit(call: ToolCall, asked: int, limit: int) -> Run:
    return ToolResult(call.id, call.name, not_run_message(asked, limit), is_error=True), None, OVER_LIMIT


async def _run(
    call: ToolCall,
    registry: ToolRegistry,
    context: ToolContext,
    approve: Approver | None,
    offered: Sequence[str],
) -> Run:
    """One call, approved first if it is held; with the decision's name for its record (None: not held).
    A call to a tool this run was not `offered` (another model's, one a task's run is not offered, one no
    one has) gets the unknown-tool error naming the `offered` ones, marked NOT_OFFERED, and a call no tool
    could run (bad arguments) its error, both without asking anyone. A held call not approved is marked
    DENIED or NOT_ASKED, as the reply's tool list shows it."""
    if (unoffered := registry.not_offered(call, offered)) is not None:
        return unoffered, None, NOT_OFFERED
    if approve is not None and (refused := registry.refuse(call)) is not None:
        return refused, None, None
    verdict = await approve(call) if approve is not None else None
    if verdict is not None and not verdict.approved:
        why = DENIED if verdict.decision in _DENIALS else NOT_ASKED
        return ToolResult(call.id, call.name, verdict.message, is_error=True), verdict.decision.value, why
    result = await registry.execute(call, context)
    return result, None if verdict is None else verdict.decision.value, None


async def _ask(
    model: ChatModel, messages: list[ChatMessage], tools: list[ToolSpec], on_text: TextSink | None
) -> ChatResponse:
    """One model call: whole, or streamed with each text piece passed to `on_text`. Whatever model answers
    (a server's client, the program's `FunctionModel` or own `ChatModel`), an answer past `MAX_ANSWER_CHARS`
    fails the turn here, saying why, before any of it is recorded (decision 465): a 40 MiB one was stored
    in a log line too long for its readers, and `klaw memory forget` could not erase it."""
    if on_text is None:
        response = await model.complete(messages, tools or None)
        _within_cap(model, answer_chars(response.content, (call.arguments for call in response.tool_calls)))
        return response
    accumulator = StreamAccumulator()
    batches = TextBatches(on_text)  # the pieces go beside the stream, gathered (text_batches.py)
    written = 0
    try:
        async with aclosing(model.stream(messages, tools or None)) as deltas:
            async for delta in deltas:
                written += answer_chars(delta.content, (fragment.arguments for fragment in delta.tool_calls))
                _within_cap(model, written)
                accumulator.add(delta)
                if delta.content:
                    await batches.add(delta.content)
        await batches.finish()
    finally:
        batches.cancel()
    return accumulator.result()


def _within_cap(model: ChatModel, chars: int) -> None:
    if chars > MAX_ANSWER_CHARS:
        raise too_long(MAX_ANSWER_CHARS, model.model_id, None)
