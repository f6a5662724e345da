"""A task run's answer between the run's end and its chat (docs/decisions/432-a-runs-answer-waits-not-its-task.md).

An answer goes into its chat under the chat's turn lock (`MessageProcessor.inject`), so never between a
turn's tool call and its result; a turn waiting for the person to approve a tool holds that lock for up to
`tools.approvalTimeoutSeconds`. The run has ended by then: its status and log are final and its task fires
again. What is left waits here:
- `RunNotes` keeps the run's note in `scheduler.db` (decision 307) with the answer (`answer_waits`) until the
  answer is in the chat (`ended`): a crash meanwhile has it sent at the next start, under the id drawn from
  the run's final record, so it is recorded once (decision 324).
- `ChatOrder` puts one chat's answers in one after another, in the order they were handed to it (the runs'
  ends, a start's kept answers first): a second run of the same task whose answer also waits comes after.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime

from klaw.engine.clock import Clock
from klaw.scheduling.task_store import NotedAnswer, RunUnderWay, ScheduleStore
from klaw.store.records import ChatRef

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WaitingAnswer:
    """What goes into `chat` for a run: its answer (or a start's notice of a cut-off run). `once`: the id
    and time `MessageProcessor.inject` checks, so an answer a crash interrupted is not recorded twice."""

    chat: ChatRef
    text: str
    metadata: dict[str, str]
    once: tuple[str, datetime] | None


@dataclass(frozen=True)
class RunNotes:
    """The runs' notes in `scheduler.db`: from a run's start until its answer is in its chat."""

    store: ScheduleStore
    clock: Clock

    async def started(self, log_name: str, task: str, origin: str, chat: ChatRef | None) -> RunUnderWay:
        run = RunUnderWay(log_name, task, origin, chat, self.clock.now())
        await asyncio.to_thread(self.store.run_started, run)
        return run

    async def answer_waits(self, run: RunUnderWay, answer: WaitingAnswer) -> bool:
        """Keep `answer` with the note; False if it could not be (a full disk: then it waits in memory only,
        and a crash before it is in the chat leaves the note to decision 324's reading of the log)."""
        if answer.once is None:
            return False
        try:
            await asyncio.to_thread(
                self.store.answer_waits, run, NotedAnswer(answer.once[0], answer.text, answer.once[1])
            )
        except Exception as exc:
            log.error("the answer of task %s could not be noted for its chat: %s", run.task, type(exc).__name__)
            return False
        return True

    async def ended(self, run: RunUnderWay) -> None:
        """The note goes; a failure is logged and leaves it (the next start finds the answer in the chat)."""
        try:
            await asyncio.to_thread(self.store.run_ended, run)
        except Exception as exc:
            log.warning("the note of the run of task %s could not be removed: %s", run.task, type(exc).__name__)


class ChatOrder:
    """One chat's sends one after another, each after the one handed before it ended (whatever its end:
    a failed or cancelled send does not hold the next). `pending` is what shutdown's drain waits for."""

    def __init__(self) -> None:
        self._last: dict[ChatRef, asyncio.Task[None]] = {}
        self.pending: set[asyncio.Task[None]] = set()

    def put(self, chat: ChatRef, send: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
        task = asyncio.create_task(_after(self._last.get(chat), send), name=f"answer-{chat}")
        self._last[chat] = task
        self.pending.add(task)
        task.add_done_callback(lambda done: self._done(chat, done))
        return task

    def _done(self, chat: ChatRef, task: asyncio.Task[None]) -> None:
        self.pending.discard(task)
        if self._last.get(chat) is task:
            del self._last[chat]


async def _after(before: asyncio.Task[None] | None, send: Callable[[], Awaitable[None]]) -> None:
    if before is not None:
        await asyncio.wait({before})
    await send()
