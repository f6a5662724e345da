"""Subagent runs: one request of a task, run alone in the background, logged to the task's JSONL.

A run is an isolated coroutine with its own context (engine/subagent_context.py). It waits for an
LLM slot with subagent priority, so a person's turn is always served first, and holds it for the
whole tool loop, like a chat turn. Its request, tool calls, tool results and final answer are
appended to `conversations/scheduler_<task>/<date>.jsonl` and to nothing else: not to any chat's
window, not to the database, not to the embedding queue.

When the slot is released the answer is judged: a silent answer (`{"silent": true}`) goes nowhere;
anything else is injected into the task's chat (`injectInto`, or the chat that spawned the run),
where it is recorded as an assistant message marked with the task's name and delivered through the
gateway. A run that fails (the model unreachable) still ends with a final record saying so, so the
log stays a sequence of complete runs; the chat gets a notice. A run cut off by a crash is
closed with an "interrupted" record when the task next runs.

A task never runs twice at once: runs of one task append to one log, and a second one would
interleave with the first.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from klaw.config import EngineConfig
from klaw.engine.clock import Clock
from klaw.engine.delivery import Delivery, Outbound
from klaw.engine.silent import is_silent
from klaw.engine.slots import LlmSlots, Priority
from klaw.engine.subagent_context import SubagentContextBuilder
from klaw.engine.tool_loop import run_tool_loop
from klaw.home import KlawHome
from klaw.llm.errors import LlmError
from klaw.llm.router import ModelRouter
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.subagent_history import SubagentHistoryLoader
from klaw.scheduling.names import task_chat, validate_task_name
from klaw.store.records import ChatRef, ExchangeStatus, MessageRecord, Role
from klaw.tools.registry import ToolContext, ToolRegistry

log = logging.getLogger(__name__)

Origin = Literal["schedule", "spawn"]
Inject = Callable[[ChatRef, str, dict[str, str]], Awaitable[None]]
INTERRUPTED_TEXT = "(no answer: this run was interrupted before it finished)"


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


@dataclass(frozen=True)
class RunOutcome:
    task_name: str
    status: RunStatus
    delivered: bool


class TaskBusy(ValueError):
    """A run of the task is already in progress."""


Finished = Callable[[SubagentRequest, RunOutcome], Awaitable[None]]


class SubagentRunner:
    def __init__(
        self,
        *,
        config: EngineConfig,
        home: KlawHome,
        router: ModelRouter,
        tools: ToolRegistry,
        slots: LlmSlots,
        context: SubagentContextBuilder,
        log_: ConversationLog,
        history: SubagentHistoryLoader,
        inject: Inject,
        delivery: Delivery,
        clock: Clock,
    ) -> None:
        self._config = config
        self._home = home
        self._router = router
        self._tools = tools
        self._slots = slots
        self._context = context
        self._log = log_
        self._history = history
        self._inject = inject
        self._delivery = delivery
        self._clock = clock
        self._runs: dict[str, asyncio.Task[RunOutcome]] = {}
        self._accepting = True
        self._finished = asyncio.Condition()
        self.completed = 0
        self.on_finished: Finished | None = None

    @property
    def running(self) -> list[str]:
        """Names of the tasks with a run in progress."""
        return sorted(self._runs)

    def is_running(self, task_name: str) -> bool:
        return task_name in self._runs

    def spawn(self, request: SubagentRequest) -> asyncio.Task[RunOutcome]:
        """Start a run in the background; raises for a bad name or model, a busy task, or shutdown."""
        validate_task_name(request.task_name)
        self._router.catalogue.check(request.model)
        if not self._accepting:
            raise RuntimeError("the engine is shutting down and starts no new runs")
        if request.task_name in self._runs:
            raise TaskBusy(f"a run of task {request.task_name!r} is already in progress")
        task = asyncio.create_task(self._guarded(request), name=f"subagent-{request.task_name}")
        self._runs[request.task_name] = task
        return task

    def stop_accepting(self) -> None:
        self._accepting = False

    async def drain(self, timeout_seconds: float) -> bool:
        """Wait for runs in flight; cancel them after the timeout (returns False then)."""
        try:
            async with asyncio.timeout(timeout_seconds):
                while self._runs:
                    await asyncio.gather(*list(self._runs.values()), return_exceptions=True)
            return True
        except TimeoutError:
            for task in self._runs.values():
                task.cancel()
            await asyncio.gather(*list(self._runs.values()), return_exceptions=True)
            return False

    async def wait_for_completed(self, count: int) -> None:
        """Wait until `count` runs have finished since start (tests, benchmarks)."""
        async with self._finished:
            await self._finished.wait_for(lambda: self.completed >= count)

    async def _guarded(self, request: SubagentRequest) -> RunOutcome:
        try:
            outcome = await self._run(request)
        except Exception as exc:  # a bug or a disk error: the run fails, the engine goes on
            log.error("run of task %s failed: %s", request.task_name, type(exc).__name__, exc_info=True)
            outcome = RunOutcome(request.task_name, RunStatus.FAILED, delivered=False)
        finally:
            self._runs.pop(request.task_name, None)
        if self.on_finished is not None:
            try:
                await self.on_finished(request, outcome)
            except Exception as exc:
                log.warning("recording the run of task %s failed: %s", request.task_name, type(exc).__name__)
        async with self._finished:
            self.completed += 1
            self._finished.notify_all()
        return outcome

    async def _run(self, request: SubagentRequest) -> RunOutcome:
        name = request.task_name
        chat = task_chat(name)
        model_id = request.model or self._config.subagent_model
        failure: LlmError | None = None
        async with self._slots.hold(Priority.SUBAGENT):
            if await self._history.has_unfinished_run(name):
                await self._append(self._final(chat, INTERRUPTED_TEXT, "interrupted"))
            context = await self._context.build(name, request.message, model_id)
            request_record = MessageRecord(
                chat, Role.USER, request.message, metadata={"origin": request.origin}, created_at=self._clock.now()
            )
            await self._append(request_record)
            try:
                outcome = await run_tool_loop(
                    model=self._router.client(model_id),
                    messages=list(context.messages),
                    tools=context.tools,
                    registry=self._tools,
                    tool_context=ToolContext(chat=chat, workspace=self._home.workspace, extras={"clock": self._clock}),
                    max_rounds=self._config.processing.max_tool_call_rounds,
                    chat=chat,
                    record=self._append,
                    now=self._clock.now,
                )
            except LlmError as exc:
                log.warning("run of task %s failed: %s", name, type(exc).__name__)
                failure = exc
                await self._append(self._final(chat, f"(no answer: this run failed: {type(exc).__name__})", "failed"))
            else:
                await self._append(self._final(chat, outcome.text, outcome.status.value))
        # The slot is free again before delivery, which may wait for the target chat's turn to end.
        target = request.inject_into
        if failure is not None:
            if target is not None:
                # A notice, not an "error": that kind answers the person's own message in a channel.
                notice = f"The task '{name}' could not run: {failure}"
                await self._delivery.deliver(Outbound(target, notice, None, "notice"))
            return RunOutcome(name, RunStatus.FAILED, delivered=False)
        status = RunStatus.TOOL_LIMIT if outcome.status is ExchangeStatus.TOOL_LIMIT else RunStatus.COMPLETED
        if is_silent(outcome.text):
            return RunOutcome(name, RunStatus.SILENT, delivered=False)
        if target is None:
            return RunOutcome(name, status, delivered=False)
        await self._inject(target, outcome.text, {"source": "task", "task": name, "origin": request.origin})
        return RunOutcome(name, status, delivered=True)

    def _final(self, chat: ChatRef, text: str, status: str) -> MessageRecord:
        """A run's last record: what ends a run in the task's log (memory/subagent_history.py)."""
        return MessageRecord(chat, Role.ASSISTANT, text, metadata={"run_status": status}, created_at=self._clock.now())

    async def _append(self, record: MessageRecord) -> None:
        """The task's log only: subagent messages never enter a chat's window or the database."""
        await self._log.append(record)
