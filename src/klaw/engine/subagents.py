"""Subagent runs: one request of a task, run alone in the background, logged to the task's JSONL.

A run is an isolated coroutine with its own context (engine/subagent_context.py). It waits for an
LLM slot with subagent priority, so a person's turn is always served first, and holds it for the
whole tool loop, like a chat turn. Its request, tool calls, tool results and final answer are
appended to `conversations/scheduler_<task>/<date>.jsonl` (`scheduler_spawn%3A<task>/` for a run
`subagent_spawn` started: decision 217) and to nothing else: not to any chat's
window, not to the database, not to the embedding queue.

When the run has its final answer it is judged: a silent answer (`{"silent": true}`) goes nowhere;
anything else is injected into the task's chat (`injectInto`, or the chat that spawned the run), where
it is recorded as an assistant message marked with the task's name and delivered through the gateway.
The run ends before that (its status recorded, its task free to fire again): the answer waits for the
chat's turn to be over, in order with the chat's other answers, noted in scheduler.db until it is in
(engine/run_answers.py, decision 432). The run itself goes through the shared `TurnRunner`
(turn_runner.py) and its one failure policy: a run that fails for any reason (the model unreachable, a
disk error, a bug) still ends with a final record saying so, so the log stays a sequence of complete
runs; the chat gets a notice with the error id the log also names. A run cut off by a crash is closed
with an "interrupted" record and told in its chat at the next start (engine/cut_off_runs.py, decision
307), or when the task next runs.

A task never runs twice at once: runs of one task append to one log, and a second one would
interleave with the first. A spawned run and a scheduled run of the same name have separate logs
(decision 217), so they are separate here too.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal, Protocol

from klaw.config import EngineConfig
from klaw.engine.approval import ApprovalScope
from klaw.engine.clock import Clock
from klaw.engine.delivery import Delivery, Outbound
from klaw.engine.drain_deadline import DrainDeadline
from klaw.engine.run_answers import ChatOrder, RunNotes, WaitingAnswer
from klaw.engine.silent import is_silent
from klaw.engine.slots import LlmSlots, Priority
from klaw.engine.subagent_context import SubagentContextBuilder
from klaw.engine.tool_loop import LoopOutcome
from klaw.engine.tools_used import DENIED
from klaw.engine.turn_runner import Turn, TurnFailure, TurnPrompt, TurnRunner
from klaw.errors import KlawError
from klaw.llm.call_purpose import calling_for
from klaw.llm.catalogue import ModelCatalogue
from klaw.llm.errors import LlmError
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.subagent_history import SubagentHistoryLoader
from klaw.scheduling.names import run_log_name, task_chat
from klaw.scheduling.task_store import RunUnderWay
from klaw.store.records import ChatRef, ExchangeStatus, MessageRecord, Role

log = logging.getLogger(__name__)

Origin = Literal["schedule", "spawn"]


class Inject(Protocol):
    """`MessageProcessor.inject`: `once` (an id, a time) records the message only if the chat lacks it."""

    def __call__(
        self, chat: ChatRef, text: str, metadata: dict[str, str], once: tuple[str, datetime] | None = None
    ) -> Awaitable[None]: ...


INTERRUPTED_TEXT = "(no answer: this run was interrupted before it finished)"
ANSWERS = frozenset({"completed", "tool_limit"})  # a final record's run_status that a chat is sent


def answer_id(final: MessageRecord) -> str:
    """The id of the chat message carrying a run's answer, from the run's final record: the same at the
    next start, so an answer a crash kept from its chat is sent there once (decision 324)."""
    return uuid.uuid5(uuid.NAMESPACE_OID, f"klaw-answer:{final.id}").hex


def run_answer_metadata(task: str, origin: str) -> dict[str, str]:
    return {"source": "task", "task": task, "origin": origin}


class RunStatus(StrEnum):
    COMPLETED = "completed"  # answered (delivered if the task has a chat)
    SILENT = "silent"
    TOOL_LIMIT = "tool_limit"
    FAILED = "failed"


@dataclass(frozen=True)
class SubagentRequest:
    task_name: str
    message: str
    model: str | None = None  # None: routing.tasks.subagent, else routing.default
    inject_into: ChatRef | None = None
    origin: Origin = "schedule"
    allowed_tools: tuple[str, ...] = ()  # held tools (tools.approval) its task was created allowing
    # A spawned run's tools share what the spawning turn's tools keep there (the turn's message_send count)
    tool_extras: Mapping[str, Any] = field(default_factory=dict)

    @property
    def log_name(self) -> str:
        """Where its run is logged and what its history is: `spawn:<task>` for a spawned run (decision 217)."""
        return run_log_name(self.task_name, spawned=self.origin == "spawn")


@dataclass(frozen=True)
class RunOutcome:
    task_name: str
    status: RunStatus
    delivered: bool
    reason: str = ""  # a failed run's, in words (its model refused, …): `klaw schedule list|runs` (decision 510)
    denied: tuple[str, ...] = ()  # the held tools it called and was refused: nobody is asked in a run (decision 526)
    answer: str = ""  # its final answer, for `klaw schedule run` to show (decision 526)


class TaskBusy(KlawError, ValueError):
    """A run of the task is already in progress."""


Finished = Callable[[SubagentRequest, RunOutcome], Awaitable[None]]


@dataclass(eq=False)
class SubagentRunner:
    _: KW_ONLY
    config: EngineConfig
    catalogue: ModelCatalogue
    turns: TurnRunner
    slots: LlmSlots
    context: SubagentContextBuilder
    conversation_log: ConversationLog
    history: SubagentHistoryLoader
    inject: Inject
    delivery: Delivery
    clock: Clock
    completed: int = field(default=0, init=False)  # runs ended, their answer (if any) in its chat
    on_finished: Finished | None = field(default=None, init=False)  # at the run's end, before its answer goes
    notes: RunNotes | None = field(default=None, init=False)  # scheduler.db's runs (decision 307)
    _runs: dict[str, asyncio.Task[RunOutcome]] = field(default_factory=dict, init=False)
    _answers: ChatOrder = field(default_factory=ChatOrder, init=False)
    _accepting: bool = field(default=True, init=False)
    _finished: asyncio.Condition = field(default_factory=asyncio.Condition, init=False)

    @property
    def running(self) -> list[str]:
        """Names of the tasks with a run in progress (`spawn:<task>` for a spawned one)."""
        return sorted(self._runs)

    @property
    def under_way(self) -> int:
        """Runs started and not ended (the engine's "one turn in flight?" counts them: decision 533)."""
        return len(self._runs)

    def is_running(self, task_name: str) -> bool:
        return task_name in self._runs

    def spawn(self, request: SubagentRequest) -> asyncio.Task[RunOutcome]:
        """Start a run in the background; raises for a bad name or model, a busy task, or shutdown."""
        key = request.log_name  # validates the name
        self.catalogue.check(request.model)
        if not self._accepting:
            raise RuntimeError("the engine is shutting down and starts no new runs")
        if key in self._runs:
            raise TaskBusy(f"a run of task {request.task_name!r} is already in progress")
        task = asyncio.create_task(self._guarded(request), name=f"subagent-{key}")
        self._runs[key] = task
        return task

    def stop_accepting(self) -> None:
        self._accepting = False

    async def drain(self, timeout_seconds: float, deadline: DrainDeadline | None = None) -> bool:
        """Wait for runs in flight and their answers; cancel them after the timeout, or once `deadline` is
        brought forward (returns False then): an answer kept from its chat so goes there at the next start."""
        try:
            async with (deadline or DrainDeadline()).within(timeout_seconds):
                while self._runs or self._answers.pending:
                    await asyncio.gather(*self._runs.values(), *self._answers.pending, return_exceptions=True)
            return True
        except TimeoutError:
            for task in [*self._runs.values(), *self._answers.pending]:
                task.cancel()
            await asyncio.gather(*self._runs.values(), *self._answers.pending, return_exceptions=True)
            return False

    def deliver_later(
        self, answer: WaitingAnswer, run: RunUnderWay | None, *, of_run: bool = False
    ) -> asyncio.Task[None]:
        """Put `answer` into its chat once the chat's turn is over, after the answers handed before it, then
        remove `run`'s note. A failure (a full disk) is logged and leaves the note: the next start sends it.
        `of_run`: it ends a run of this engine, counted in `completed` once it is in."""
        return self._answers.put(answer.chat, lambda: self._deliver(answer, run, of_run))

    async def _deliver(self, answer: WaitingAnswer, run: RunUnderWay | None, of_run: bool) -> None:
        task = answer.metadata.get("task", "?")
        try:
            await self.inject(answer.chat, answer.text, answer.metadata, answer.once)
        except Exception as exc:
            log.error("a message of task %s was not put into its chat: %s; tried again at the next start", task,
                      type(exc).__name__, exc_info=True)  # fmt: skip
        else:
            if run is not None and self.notes is not None:
                await self.notes.ended(run)
        finally:
            if of_run:
                await self._count()

    async def _count(self) -> None:
        async with self._finished:
            self.completed += 1
            self._finished.notify_all()

    async def wait_for_completed(self, count: int) -> None:
        """Wait until `count` runs have finished since start (tests, benchmarks)."""
        async with self._finished:
            await self._finished.wait_for(lambda: self.completed >= count)

    async def _guarded(self, request: SubagentRequest) -> RunOutcome:
        """The run, then its end: its note keeps its answer (if any) before the task may run again, so a
        second run's note never stands for this one's (decision 432), and the answer waits for its chat."""
        run: RunUnderWay | None = None
        answer: WaitingAnswer | None = None
        try:
            if self.notes is not None:  # before its first record: noted as under way (decision 307)
                run = await self.notes.started(request.log_name, request.task_name, request.origin, request.inject_into)
            outcome, answer = await self._run(request)
            if answer is not None and run is not None and self.notes is not None:
                await self.notes.answer_waits(run, answer)
        except Exception as exc:  # a bug or a disk error: the run fails, the engine goes on
            log.error("run of task %s failed: %s", request.task_name, type(exc).__name__, exc_info=True)
            outcome = RunOutcome(request.task_name, RunStatus.FAILED, delivered=False)
        finally:
            self._runs.pop(request.log_name, None)
        if self.on_finished is not None:
            try:
                await self.on_finished(request, outcome)
            except Exception as exc:
                log.warning("recording the run of task %s failed: %s", request.task_name, type(exc).__name__)
        if answer is not None:
            # The task is free (`_runs`); what awaits `spawn`'s task (a library caller) sees the answer in.
            await asyncio.wait({self.deliver_later(answer, run, of_run=True)})
            return outcome
        if run is not None and self.notes is not None:
            await self.notes.ended(run)
        await self._count()
        return outcome

    async def _run(self, request: SubagentRequest) -> tuple[RunOutcome, WaitingAnswer | None]:
        name = request.task_name
        chat = task_chat(request.log_name)
        model_id = request.model or self.catalogue.routing.subagent_model
        sink = _TaskLog(self, chat, request)

        async def context() -> TurnPrompt:
            # A run holding pre-approved tools reads no text a chat could have written (decision 217).
            built = await self.context.build(
                name, request.message, model_id, history_of=request.log_name, core_memory=not request.allowed_tools
            )
            return TurnPrompt(list(built.messages), built.tools, model_id)

        # Nobody answers approval questions in a scheduled run: a held tool runs only if the task allows it.
        # A run spawned from a chat asks that chat's person, as its agent would (decision 525).
        if request.origin == "spawn" and request.inject_into is not None:
            approval = ApprovalScope(ask=True, ask_in=request.inject_into, asker=f"subagent {name!r}", task=name)
        else:
            approval = ApprovalScope(ask=False, allowed=frozenset(request.allowed_tools))
        turn = Turn(
            label=f"run of task {name}",
            chat=chat,
            context=context,
            record=self.append_many,
            sink=sink,
            approval=approval,
            # Around each model call, never the run's tools: a slow tool holds no slot (decision 297).
            model_slot=lambda: self.slots.hold(Priority.SUBAGENT),
            tool_extras=request.tool_extras,
        )
        with calling_for("subagent"):
            result = await self.turns.run(turn)
        target = request.inject_into
        if isinstance(result, TurnFailure):
            if target is not None:
                # A notice, not an "error": that kind answers the person's own message in a channel.
                notice = f"The task '{name}' could not run: {_reason(result)} (error {result.error_id})"
                await self.delivery.deliver(Outbound(target, notice, None, "notice"))
            reason = f"it could not run: {_reason(result)} (error {result.error_id})"
            return RunOutcome(name, RunStatus.FAILED, delivered=False, reason=reason), None
        status = RunStatus.TOOL_LIMIT if result.status is ExchangeStatus.TOOL_LIMIT else RunStatus.COMPLETED
        denied = tuple(dict.fromkeys(result.tool_names[at] for at, why in result.not_run if why == DENIED))
        if is_silent(result.text):
            return RunOutcome(name, RunStatus.SILENT, delivered=False, denied=denied, answer=result.text), None
        if target is None:
            return RunOutcome(name, status, delivered=False, denied=denied, answer=result.text), None
        once = None if sink.final is None else (answer_id(sink.final), sink.final.created_at)
        answer = WaitingAnswer(target, result.text, run_answer_metadata(name, request.origin), once)
        return RunOutcome(name, status, True, denied=denied, answer=result.text), answer  # delivered: handed on

    def final(self, chat: ChatRef, text: str, status: str) -> MessageRecord:
        """A run's last record: what ends a run in the task's log (memory/subagent_history.py)."""
        return MessageRecord(chat, Role.ASSISTANT, text, metadata={"run_status": status}, created_at=self.clock.now())

    def now(self) -> datetime:
        return self.clock.now()

    async def append(self, record: MessageRecord) -> None:
        """The task's log only: subagent messages never enter a chat's window or the database."""
        await self.conversation_log.append(record)

    async def append_many(self, records: Sequence[MessageRecord]) -> None:
        """`append` for records written together (a round's tool results): one write."""
        await self.conversation_log.append_many(records)


def _reason(failure: TurnFailure) -> str:
    """A model error's own words (they say what to fix); anything else only by its type."""
    return str(failure.error) if isinstance(failure.error, LlmError) else "something went wrong"


class _TaskLog:
    """A run's sink: the task's log gets the request first (after closing a run a crash cut off) and a
    final record last, whatever happened, so the log stays a sequence of complete runs."""

    def __init__(self, runner: SubagentRunner, chat: ChatRef, request: SubagentRequest) -> None:
        self._runner = runner
        self._chat = chat
        self._request = request
        self.final: MessageRecord | None = None  # the run's final record, once written

    async def begin(self) -> None:
        runner, request = self._runner, self._request
        if await runner.history.has_unfinished_run(request.log_name):
            await runner.append(runner.final(self._chat, INTERRUPTED_TEXT, "interrupted"))
        metadata = {"origin": request.origin}
        await runner.append(
            MessageRecord(self._chat, Role.USER, request.message, metadata=metadata, created_at=runner.now())
        )

    async def finish(self, outcome: LoopOutcome) -> None:
        final = self._runner.final(self._chat, outcome.text, outcome.status.value)
        await self._runner.append(final)
        self.final = final

    async def fail(self, failure: TurnFailure) -> None:
        if self.final is None:
            text = f"(no answer: this run failed: {failure.kind})"
            await self._runner.append(self._runner.final(self._chat, text, "failed"))
