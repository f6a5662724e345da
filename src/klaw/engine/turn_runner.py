"""One turn, whoever asked for it: a chat turn (processor.py) or a task run (subagents.py).

A turn is three parts its caller gives: where its context comes from (`Turn.context`), where its
steps are recorded (`Turn.record`: ingestion for a chat, the task's log for a run) and where its
outcome goes (`Turn.sink`). The runner owns the sequence, begin → context → tool loop → finish, and
the one failure policy, so the two kinds of turn cannot drift apart again:

* any exception (the model unreachable, a disk or store error, a bug) ends the turn as failed: the
  sink closes what it opened and tells the person a short "something went wrong" with an error id;
* the same error id is logged with the exception's type and its frames, never its message (messages
  quote arguments and text, which are the person's conversation);
* the engine goes on: `run` returns the failure instead of raising, so the chat's next message and
  every other chat are served. Cancellation (shutdown past its deadline) is not a failure and passes.

A model error (`LlmError`) says what went wrong in words a person can act on ("the model timed
out"), so its text is kept in the apology, a full disk is named with what to do (free some
space), and so is a folder klaw may no longer open (give it back); any other error is only named by its id.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from klaw.disk_trouble import denied_words
from klaw.engine.approval import NOBODY, ApprovalGate, ApprovalScope, Verdict
from klaw.engine.clock import Clock
from klaw.engine.failures import is_disk_full, permission_denied, unreachable_database
from klaw.engine.tool_loop import DEFAULT_MAX_CALLS, LoopOutcome, Recorder, TextSink, run_tool_loop
from klaw.engine.turn_timing import PhaseTimes
from klaw.errors import KlawError
from klaw.llm.errors import LlmError
from klaw.llm.messages import ChatMessage, ToolCall, ToolSpec
from klaw.llm.protocol import ChatModel
from klaw.store.lease_fence import LeaseLostError
from klaw.store.records import ChatRef
from klaw.tools.messaging.limits import TURN_KEY, TurnSends
from klaw.tools.registry import ToolRegistry
from klaw.tools.schema import ToolContext

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TurnPrompt:
    """What the context source gives the loop: the messages, the tools offered, the model to ask."""

    messages: list[ChatMessage]
    tools: list[ToolSpec]
    model: str


class TurnStopped(KlawError, RuntimeError):
    """A turn its `Turn.checkpoint` stopped before its next model call or its reply: the chat had something
    forgotten on another engine sharing the store (decision 286). Its text is what the person reads, the
    same words a turn stopped by this engine's `/forget` gets (engine/stopped_turns.py); never content.
    `erased`: the forget took the turn's exchange, so there is nothing left to close."""

    def __init__(self, text: str, *, erased: bool = False) -> None:
        super().__init__(text)
        self.erased = erased


@dataclass(frozen=True)
class TurnFailure:
    """A turn that ended in an exception: its id (in the log and in what the person reads) and the error."""

    error_id: str
    error: Exception

    @property
    def kind(self) -> str:
        return type(self.error).__name__

    def apology(self) -> str:
        """What the person reads: short, with the id to find the log lines by (a stopped turn: why only)."""
        if isinstance(self.error, TurnStopped):
            return str(self.error)
        if isinstance(self.error, LlmError):
            return f"Sorry, I could not answer: {self.error} (error {self.error_id})"
        if is_disk_full(self.error):
            return (
                f"Sorry, I could not answer: the disk is full, so this conversation could not be saved (error"
                f" {self.error_id}). Free some space on the disk holding klaw's home, then send your message again."
            )
        if (denied := permission_denied(self.error)) is not None:  # a folder made unreadable: named (466)
            said = denied_words(Path(denied.filename), "then send your message again")
            return f"Sorry, I could not answer: {said} (error {self.error_id})"
        if (away := unreachable_database(self.error)) is not None:  # its words name the variable, never the DSN
            return (
                f"Sorry, I could not answer yet: {away} (error {self.error_id}). Your message is kept: it is"
                " answered once the database is back."
            )
        return f"Sorry, something went wrong and I could not answer (error {self.error_id}); the engine log says more."


class TurnSink(Protocol):
    """Where a turn's outcome goes. `fail` is called at most once, after `begin` or `finish` raised
    or at any point between; it must tolerate a `begin` that never completed."""

    async def begin(self) -> None: ...

    async def finish(self, outcome: LoopOutcome) -> None: ...

    async def fail(self, failure: TurnFailure) -> None: ...


@dataclass(frozen=True)
class Turn:
    label: str  # for the log: "turn of chat console:me", "run of task digest" (ids, never content)
    chat: ChatRef  # the chat the tools act for (a task run: its `scheduler_<task>` chat)
    context: Callable[[], Awaitable[TurnPrompt]]
    record: Recorder
    sink: TurnSink
    on_text: TextSink | None = None  # pieces of the answer as they are written, for a streaming channel
    # How long each phase took: exchange (the sink's begin), context, model (the tool loop: model
    # calls, tools and their records), reply (the sink's finish); see engine/turn_timing.py. With
    # `begin_alongside_context`, exchange and context overlap (each its own wall time).
    timings: PhaseTimes = field(default_factory=PhaseTimes)
    # Who answers for a held tool (engine/approval.py): the person of a chat turn, or nobody (a task's run).
    approval: ApprovalScope = NOBODY
    # Held around each model call alone, never the tools between calls, the context or the reply: the
    # turn's LLM slot (decisions 253, 297), a chat's interactive one or a run's subagent one; None: none.
    model_slot: Callable[[], AbstractAsyncContextManager[None]] | None = None
    # The sink's begin may run while the context is built (it writes nothing the context reads: a chat
    # turn's exchange opening). A task run's begin writes its request into the log its context reads.
    begin_alongside_context: bool = False
    # Awaited before each model call and before an answer or a round's tool results are recorded; raises
    # `TurnStopped` when the turn must not go on (a chat turn on a shared store: a forget there, decision 286).
    checkpoint: Callable[[], Awaitable[None]] | None = None
    # Put into its tools' `ToolContext.extras` (a spawned run: what its spawning turn's tools kept there).
    tool_extras: Mapping[str, Any] = field(default_factory=dict)


ModelFor = Callable[[str], ChatModel]


@dataclass(frozen=True, eq=False)
class TurnRunner:
    """Runs turns on the engine's model router and tools; shared by chat turns and task runs.

    `approvals`: the tools held for the person's answer; None holds none. A turn's model may call only
    the tools its context offered (engine/tool_loop.py)."""

    _: KW_ONLY
    model_for: ModelFor
    tools: ToolRegistry
    workspace: Path
    clock: Clock
    max_rounds: int
    max_calls: int = DEFAULT_MAX_CALLS  # of one model answer (tools.maxCallsPerResponse)
    approvals: ApprovalGate | None = None

    async def run(self, turn: Turn) -> LoopOutcome | TurnFailure:
        """The turn's outcome, or its failure once the sink has been told; never raises an Exception."""
        try:
            timed = turn.timings.phase
            prompt = await _begun_with_context(turn)
            turn.timings.seconds.setdefault("slot", 0.0)  # listed before the model's phase it is part of
            with timed("model"):
                outcome = await run_tool_loop(
                    model=self.model_for(prompt.model),
                    messages=list(prompt.messages),
                    tools=prompt.tools,
                    registry=self.tools,
                    tool_context=ToolContext(turn.chat, self.workspace, _turn_extras(turn.tool_extras, self.clock)),
                    max_rounds=self.max_rounds,
                    max_calls=self.max_calls,
                    chat=turn.chat,
                    record=turn.record,
                    now=self.clock.now,
                    on_text=turn.on_text,
                    approve=self._approver(turn),
                    stopping=self._stopping,
                    checkpoint=turn.checkpoint,
                    around_call=None if turn.model_slot is None else _timed_slot(turn.model_slot, turn.timings),
                )
            with timed("reply"):
                await turn.sink.finish(outcome)
            return outcome
        except Exception as exc:
            failure = TurnFailure(new_error_id(), exc)
            log_failure(turn.label, failure)
            try:
                await turn.sink.fail(failure)
            except Exception as second:  # the disk that failed the turn may fail its notice too
                log.error(
                    "%s: telling the person about error %s failed too: %s",
                    turn.label,
                    failure.error_id,
                    type(second).__name__,
                )
            return failure

    def _stopping(self) -> bool:
        return self.approvals is not None and self.approvals.stopping

    def _approver(self, turn: Turn) -> Callable[[ToolCall], Awaitable[Verdict | None]] | None:
        gate = self.approvals
        if gate is None:
            return None

        async def approve(call: ToolCall) -> Verdict | None:
            return await gate.check(call, turn.chat, turn.approval)

        return approve


def _timed_slot(
    model_slot: Callable[[], AbstractAsyncContextManager[None]], timings: PhaseTimes
) -> Callable[[], AbstractAsyncContextManager[None]]:
    """The turn's slot around one model call, its wait timed as the `slot` phase (summed over the calls)."""

    @asynccontextmanager
    async def around_call() -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            with timings.phase("slot"):
                await stack.enter_async_context(model_slot())
            yield

    return around_call


async def _begun_with_context(turn: Turn) -> TurnPrompt:
    """The sink's `begin` and the turn's context: side by side when the turn allows it (a chat turn's
    opening record is written and fsync'd while its context is read, a few milliseconds it no longer
    waits), else one after the other. Either way both are done before the model is asked, so nothing
    the tool loop records can come before the opening; a context that fails waits for the opening to
    settle, so the failure closes what was opened."""
    timed = turn.timings.phase

    async def begin() -> None:
        with timed("exchange"):
            await turn.sink.begin()

    if not turn.begin_alongside_context:
        await begin()
        with timed("context"):
            return await turn.context()
    opening = asyncio.ensure_future(begin())
    # The opening's first write handed to the database thread before the context starts: a context whose
    # reads run on the loop (decision 533) would otherwise yield only after them, and the opening, then
    # the turn, wait that long.
    await asyncio.sleep(0)
    try:
        with timed("context"):
            prompt = await turn.context()
    except Exception:
        await asyncio.wait([opening])
        if not opening.cancelled():
            opening.exception()  # seen: the context's error is the turn's
        raise
    except BaseException:  # cancelled (a shutdown past its deadline): the opening goes with the turn
        opening.cancel()
        raise
    await opening
    return prompt


def new_error_id() -> str:
    return uuid.uuid4().hex[:12]


def log_failure(label: str, failure: TurnFailure) -> None:
    """Type, id and frames; the message stays out (it can quote the conversation)."""
    error = failure.error
    if isinstance(error, LlmError):  # expected weather: the model's state, not a bug in klaw
        log.warning("%s failed: %s (error %s)", label, failure.kind, failure.error_id)
        return
    if isinstance(error, TurnStopped):  # a forget on another engine: no fault, the person is told why
        log.info("%s stopped: something in its chat was forgotten (error %s)", label, failure.error_id)
        return
    if isinstance(error, LeaseLostError):  # the engine stalled past its lease: another one answers
        log.warning("%s abandoned: %s (error %s)", label, error, failure.error_id)
        return
    if (away := unreachable_database(error)) is not None:  # weather too: its words name the variable, no frames
        log.warning("%s failed: %s (error %s)", label, away, failure.error_id)
        return
    frames = "".join(traceback.format_tb(error.__traceback__)).rstrip()
    log.error("%s failed: %s (error %s)\n%s", label, failure.kind, failure.error_id, frames)


def _turn_extras(inherited: Mapping[str, Any], clock: Clock) -> dict[str, Any]:
    """The turn's tool extras: its `message_send` count made when it starts, not at its first send, so a
    run it spawns before sending shares it (a copy of this dict shares its objects); a spawned run's own
    turn gets its parent's from `inherited` (decision 389's addendum)."""
    return {TURN_KEY: TurnSends(), **inherited, "clock": clock}
