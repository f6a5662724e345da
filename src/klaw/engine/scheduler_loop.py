"""The scheduler: fires scheduled tasks on the engine's clock and hands each firing to a subagent run.

The task table lives in `scheduler.db` (klaw/scheduling/task_store.py), so tasks survive restarts; the
calendar maths is klaw/scheduling/schedules.py. The loop is klaw's own, driven by the injected
`Clock`, so tests move time with `ManualClock.advance()` instead of waiting for it.

Each wake-up re-reads the table — `klaw schedule add|remove` edits the file while the engine runs —
fires what is due and sleeps until the next fire time, at most `RELOAD_SECONDS`, so a change made
from the command line is picked up within a minute. Changes made by the agent's tools wake it at once.

Misfire policy (coalesce, with a grace period): when a task's fire time has passed (the engine was
down, or busy), its latest missed fire time decides — at most `scheduler.misfireGraceSeconds` late,
the task runs once, however many times were missed; later than that, or when its next fire time is
nearer than the latest missed one (a minutely task back 48 s late: its next time is 12 s away; decision
464), the firing is recorded as `missed` and the task waits for its next time. A fire time reached while
the task's previous run is still going is skipped (`busy`): a task never overlaps itself. The next fire time is always
computed from now, and stored before the run starts, so a crash mid-run does not re-run it.

At most `scheduler.maxRunsPerDay` runs start in any 24 hours (`DailyRuns`), fired or spawned: a
firing over the cap is recorded as `capped`, a spawn over it refused.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import sqlite3
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, InitVar, dataclass, field
from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

from klaw.config import SchedulerConfig
from klaw.disk_trouble import damaged_database, damaged_words, disk_trouble, repair_scheduler_db
from klaw.engine.clock import Clock
from klaw.engine.cut_off_runs import tell_cut_off
from klaw.engine.open_questions import OpenQuestions
from klaw.engine.run_answers import RunNotes
from klaw.engine.subagents import RunOutcome, SubagentRequest, SubagentRunner
from klaw.llm.catalogue import ModelCatalogue
from klaw.scheduling.names import validate_task_name
from klaw.scheduling.schedules import TaskSchedule
from klaw.scheduling.task_store import RunUnderWay, ScheduledTask, ScheduleStore
from klaw.scheduling.zones import scheduler_zone
from klaw.store.records import ChatRef
from klaw.tools.calls import ToolRefusal

log = logging.getLogger(__name__)
DAMAGED_SCHEDULER_FIX = repair_scheduler_db()

RELOAD_SECONDS = 60.0
DENIED_STATUS = "a tool denied"
"""Added to a run's status when a held tool it called was refused: it did not do what it was asked (decision 526)."""


@dataclass(frozen=True)
class SchedulerStatus:
    tasks: int
    running: list[str]
    next_task: ScheduledTask | None


class DailyRuns:
    """Runs started in the last 24 hours, against `scheduler.maxRunsPerDay`. `schedule_add` refuses a
    task that would exceed the cap, but a schedule can fire more on another day than in the next 24
    hours (`* * * * 0` added on a Thursday) and `subagent_spawn` adds runs no schedule shows: the cap
    is also checked as runs start, for every task (the person's included: a firing over it is recorded
    `capped`). Kept in memory: a restart starts counting afresh."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._starts: deque[datetime] = deque()

    def has_room(self, now: datetime) -> bool:
        cutoff = now - timedelta(days=1)
        while self._starts and self._starts[0] <= cutoff:
            self._starts.popleft()
        return len(self._starts) < self.cap

    def started(self, now: datetime) -> None:
        self._starts.append(now)


@dataclass(eq=False)
class Scheduler:
    """`config` is the `scheduler` section; `catalogue` checks a task's model."""

    _: KW_ONLY
    config: InitVar[SchedulerConfig]
    catalogue: ModelCatalogue
    store: ScheduleStore
    runner: SubagentRunner
    clock: Clock
    unserved: Callable[[ChatRef], str | None] = lambda _chat: None
    """Why replies injected into a chat reach nobody (the Telegram bot off, the chat not allowed): warned at
    each run (decision 501)."""
    zone: tzinfo = field(init=False)
    open_questions: OpenQuestions | None = field(default=None, init=False)  # the gate's: a cut-off run's (535)
    _grace: timedelta = field(init=False)
    _daily: DailyRuns = field(init=False)
    _wake: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _asleep: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _stopping: bool = field(default=False, init=False)
    _loop_task: asyncio.Task[None] | None = field(default=None, init=False)
    # Held by a tick (the table read, then its due tasks fired) and by a removal: a task removed while a tick
    # has it read is never fired by that tick (`klaw schedule remove` beside this engine, decision 526).
    _editing: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)

    def __post_init__(self, config: SchedulerConfig) -> None:
        self.zone = scheduler_zone(config.timezone)
        self._grace = timedelta(seconds=config.misfire_grace_seconds)
        self._daily = DailyRuns(config.max_runs_per_day)
        self._notes: dict[str, str] = {}  # a run's warning at its start, recorded with its end (decision 510)
        self.runner.on_finished = self._finished
        self.runner.notes = RunNotes(self.store, self.clock)  # a run's note, from its start until its answer is in

    async def start(self) -> None:
        """Start the loop, which first tells the runs a crash cut off (read now, before any run starts)."""
        await asyncio.to_thread(self.store.create)
        cut_off = await asyncio.to_thread(self.store.runs_under_way)
        self._loop_task = asyncio.create_task(self._loop(cut_off), name="scheduler")

    async def stop(self) -> None:
        """Fire nothing more; runs already started are the runner's to finish (its `drain`)."""
        self._stopping = True
        self.runner.stop_accepting()
        self._poke()
        if self._loop_task is not None:
            await asyncio.gather(self._loop_task, return_exceptions=True)

    async def wait_asleep(self) -> None:
        """Wait until the loop has handled everything due and sleeps (tests advance the clock then)."""
        await self._asleep.wait()

    def _poke(self) -> None:
        """Make the loop look at the table again now (a task was added or removed, or it must stop)."""
        self._asleep.clear()
        self._wake.set()

    # -- what the tools and commands use -----------------------------------------------------------

    async def add_task(
        self,
        name: str,
        schedule: TaskSchedule,
        message: str,
        *,
        model: str | None = None,
        inject_into: ChatRef | None = None,
        allowed_tools: tuple[str, ...] = (),
    ) -> ScheduledTask:
        """Add a task; raises ValueError (bad name, unknown model, duplicate name) with the reason."""
        validate_task_name(name)
        self.catalogue.check(model)
        now = self.clock.now()
        task = ScheduledTask(
            name,
            schedule,
            message,
            model,
            inject_into,
            created_at=now,
            next_run_at=schedule.first_fire(now, self.zone),
            allowed_tools=allowed_tools,
        )
        await asyncio.to_thread(self.store.add, task)
        self._poke()
        return task

    async def list_tasks(self) -> list[ScheduledTask]:
        return await asyncio.to_thread(self.store.list)

    async def remove_task(self, name: str) -> bool:
        """Remove `name`: once this returns it never fires again (a run under way finishes)."""
        async with self._editing:
            removed = await asyncio.to_thread(self.store.remove, name)
        self._poke()
        return removed

    def changed(self) -> None:
        """scheduler.db was edited by `klaw schedule add` beside this engine: read it now, not within a minute."""
        self._poke()

    async def run_now(self, name: str) -> RunOutcome:
        """A run of task `name` now, as a firing runs it (its log, history, chat, allowed tools and last run),
        its next fire time untouched (`klaw schedule run`, decision 526); the outcome once its answer is handed
        on for its chat. ValueError in words: no such task, a run of it under way, the daily cap, a stop."""
        task = await asyncio.to_thread(self.store.get, name)
        if task is None:
            raise ValueError(f"there is no task named {name!r}; `klaw schedule list` shows the tasks")
        if self._stopping:
            raise ValueError("klaw is shutting down and starts no run; run it again once klaw runs")
        if self.runner.is_running(name):
            raise ValueError(f"a run of task {name!r} is under way; `klaw schedule runs {name}` shows it once done")
        now = self.clock.now()
        if not self._daily.has_room(now):
            raise ValueError(
                f"tasks already ran {self._daily.cap} times in the last 24 hours, the most allowed"
                " (scheduler.maxRunsPerDay); try again later, or raise it in engine.yaml"
            )
        request = SubagentRequest(
            name, task.message, task.model, task.inject_into, origin="schedule", allowed_tools=task.allowed_tools
        )
        try:
            run = self.runner.spawn(request)
        except RuntimeError as exc:  # its model removed from engine.yaml, the engine stopping
            raise ValueError(f"task {name!r} could not start: {exc}") from None
        self._daily.started(now)
        return await run

    def spawn(
        self,
        task_name: str,
        message: str,
        *,
        model: str | None,
        reply_to: ChatRef | None,
        tool_extras: Mapping[str, Any] | None = None,
    ) -> None:
        """A one-off run of `task_name` now (the `subagent_spawn` tool); its answer goes to `reply_to`.
        Refused in words the model reads (`ToolRefusal`, no class name in front) once the engine is
        shutting down (a turn still running when it began), and once runs reached
        `scheduler.maxRunsPerDay` in 24 hours."""
        if self._stopping:
            raise ToolRefusal(
                f"klaw is shutting down, so the run of task {task_name!r} was not started; tell the person,"
                " who can ask for it again once klaw is running"
            )
        now = self.clock.now()
        if not self._daily.has_room(now):
            raise ToolRefusal(
                f"tasks already ran {self._daily.cap} times in the last 24 hours, the most allowed"
                " (scheduler.maxRunsPerDay); try again later, or ask the person to raise it"
            )
        extras = dict(tool_extras or {})
        self.runner.spawn(SubagentRequest(task_name, message, model, reply_to, origin="spawn", tool_extras=extras))
        self._daily.started(now)

    async def status(self) -> SchedulerStatus:
        tasks = await self.list_tasks()
        upcoming = [t for t in tasks if t.next_run_at is not None]
        first = min(upcoming, key=lambda t: t.next_run_at or self.clock.now(), default=None)
        return SchedulerStatus(len(tasks), self.runner.running, first)

    # -- the loop ----------------------------------------------------------------------------------

    async def _loop(self, cut_off: Sequence[RunUnderWay]) -> None:
        if cut_off:  # before any firing: a task's cut-off run is told before its next one starts
            await tell_cut_off(self.store, self.runner, cut_off, self.zone, self.open_questions)
        if self.open_questions is not None:
            self.open_questions.drop_runs_left()
        while not self._stopping:
            try:
                async with self._editing:
                    wake_at = await self._tick()
            except Exception as exc:  # a locked or damaged scheduler.db: say so, try again later
                if (reason := damaged_database(exc)) is not None:  # final: said once, not retried (decision 326)
                    log.error("%s", damaged_words("the scheduler", reason, DAMAGED_SCHEDULER_FIX))
                    return
                if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
                    # Out of open files (a flood of connections, say): a state of the machine, told in
                    # one line, not a traceback a minute.
                    log.error("scheduler: too many open files (%s); retrying in %.0f s", exc.strerror, RELOAD_SECONDS)
                elif (words := _disk_words(self.store.path, exc)) is not None:
                    # A full or read-only disk (sqlite3 says "disk I/O error", no errno): the same.
                    log.error("scheduler: %s", words)
                else:
                    log.error("scheduler: %s; retrying in %.0f s", type(exc).__name__, RELOAD_SECONDS, exc_info=True)
                wake_at = self.clock.now() + timedelta(seconds=RELOAD_SECONDS)
            if self._stopping:
                break
            # From the time it is now, not when the tick began: the tick itself takes time.
            await self._sleep((wake_at - self.clock.now()).total_seconds())

    async def _tick(self) -> datetime:
        """Fire what is due; returns when to look again."""
        now = self.clock.now()
        soonest = now + timedelta(seconds=RELOAD_SECONDS)
        for task in await asyncio.to_thread(self.store.list):
            due = task.next_run_at
            if due is None and task.schedule.kind == "at":
                continue  # a one-off task that ran (or was missed): done (decision 526)
            if due is not None and task.schedule.kind == "every" and due - now > task.schedule.interval:
                # The wall clock was set back past it: an interval is elapsed time, not a date (decision 466).
                due = task.schedule.next_after(now, anchor=task.created_at, zone=self.zone)
                await asyncio.to_thread(self.store.set_next_run, task.name, due)
            if due is None or due <= now:
                following = task.schedule.next_after(now, anchor=task.created_at, zone=self.zone)
                await asyncio.to_thread(self.store.set_next_run, task.name, following)
                if due is not None:
                    await self._fire(task, now, following)
                due = following
            if due is not None:
                soonest = min(soonest, due)
        return soonest

    async def _fire(self, task: ScheduledTask, now: datetime, following: datetime | None) -> None:
        latest = task.schedule.latest_at_or_before(now, anchor=task.created_at, zone=self.zone) or task.next_run_at
        if latest is not None and now - latest > self._grace:
            late = now - latest
            log.info("task %s missed its time by %s (grace %s); waiting for the next", task.name, late, self._grace)
            await asyncio.to_thread(self.store.record_run, task.name, now, "missed")
            return
        if latest is not None and following is not None and following - now < now - latest:
            # Its next time is nearer than the one missed: that one is its run. A minutely task back 48 s
            # after its time ran then, and again 12 s later (newcomer18, decision 464).
            log.info("task %s: its next time is nearer than the one missed; waiting for it", task.name)
            await asyncio.to_thread(self.store.record_run, task.name, now, "missed")
            return
        if self.runner.is_running(task.name):
            log.info("task %s is still running; this firing is skipped", task.name)
            await asyncio.to_thread(self.store.record_run, task.name, now, "busy")
            return
        if not self._daily.has_room(now):
            log.warning(
                "task %s not run: tasks already ran %d times in 24 hours (scheduler.maxRunsPerDay)",
                task.name,
                self._daily.cap,
            )
            capped = f"not run: tasks already ran {self._daily.cap} times in 24 hours (scheduler.maxRunsPerDay)"
            await asyncio.to_thread(self.store.record_run, task.name, now, "capped", capped)
            return
        if task.inject_into is not None and (why := self.unserved(task.inject_into)) is not None:
            log.warning("task %s runs, but its replies reach nobody: %s", task.name, why)
            self._notes[task.name] = f"its replies reach nobody: {why}"
        try:
            request = SubagentRequest(
                task.name,
                task.message,
                task.model,
                task.inject_into,
                origin="schedule",
                allowed_tools=task.allowed_tools,
            )
            self.runner.spawn(request)
            self._daily.started(now)
        except (ValueError, RuntimeError) as exc:  # e.g. its model was removed from engine.yaml
            log.warning("task %s could not start: %s", task.name, exc)
            self._notes.pop(task.name, None)
            await asyncio.to_thread(self.store.record_run, task.name, now, "failed", f"it could not start: {exc}")

    async def _finished(self, request: SubagentRequest, outcome: RunOutcome) -> None:
        """At the run's end, before its answer is in its chat (decision 432): the task's last run."""
        if request.origin == "schedule":
            said = [note for note in (self._notes.pop(request.task_name, None), outcome.reason) if note]
            status = outcome.status.value
            if outcome.denied:  # "completed" said a run did its work when a held tool it needed never ran (526)
                status = f"{status}, {DENIED_STATUS}"
                said.append(denied_note(outcome.denied, request.task_name))
            note = "; ".join(said) or None  # what the run met, for `klaw schedule list|runs` (decision 510)
            now = self.clock.now()
            await asyncio.to_thread(self.store.record_run, request.task_name, now, status, note)

    async def _sleep(self, seconds: float) -> None:
        """Sleep on the engine's clock, or until a task changes or the scheduler stops."""
        if seconds <= 0 or self._wake.is_set():
            self._wake.clear()
            return
        sleeper = asyncio.ensure_future(self.clock.sleep(seconds))
        waker = asyncio.ensure_future(self._wake.wait())
        self._asleep.set()
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._asleep.clear()
            for pending in (sleeper, waker):
                pending.cancel()
            self._wake.clear()


def denied_note(tools: Sequence[str], task: str) -> str:
    """What a run whose held tools were refused met: nobody is asked in a run, so they did not run (decision 526)."""
    named = ", ".join(tools)
    return (
        f"{named} did not run: a run asks nobody, so a held tool (tools.approval) runs only when its task allows it"
        f" (`klaw schedule remove {task}`, then add it again with --allow-tool {tools[0]})"
    )


def _disk_words(path: Path, exc: Exception) -> str | None:
    """A full or read-only disk behind a failed read or write of scheduler.db, in one sentence; None
    otherwise. Asked only of the file's and the database's own errors: a bug met while the disk happens
    to be nearly full keeps its traceback."""
    if not isinstance(exc, (OSError, sqlite3.Error)):
        return None
    return disk_trouble(path, exc, then=f"the scheduler tries again every {RELOAD_SECONDS:.0f} s")
