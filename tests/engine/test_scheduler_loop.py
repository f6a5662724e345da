"""The scheduler loop on a manual clock: firing, misfire policy (coalesce + grace), overlap, pick-up
of changes made by `klaw schedule`, stop. Runs are recorded by a stub runner (no model here)."""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from klaw.config import EngineConfig
from klaw.engine.clock import ManualClock
from klaw.engine.scheduler_loop import Scheduler
from klaw.engine.subagents import RunOutcome, RunStatus, SubagentRequest
from klaw.llm.catalogue import ModelCatalogue
from klaw.scheduling.schedules import TaskSchedule
from klaw.scheduling.task_store import DuplicateTask, ScheduledTask, ScheduleStore
from klaw.store.records import ChatRef
from klaw.tools.calls import ToolRefusal
from tests.own_disk import fill, fill_inodes, tmpfs

START = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
CHAT = ChatRef("console", "me")


@dataclass
class StubRunner:
    requests: list[SubagentRequest] = field(default_factory=list)
    busy: set[str] = field(default_factory=set)
    accepting: bool = True
    on_finished: Any = None

    @property
    def running(self) -> list[str]:
        return sorted(self.busy)

    def spawn(self, request: SubagentRequest) -> None:
        if not self.accepting:
            raise RuntimeError("stopped")
        self.requests.append(request)

    def is_running(self, name: str) -> bool:
        return name in self.busy

    def stop_accepting(self) -> None:
        self.accepting = False


@dataclass
class Rig:
    scheduler: Scheduler
    runner: StubRunner
    store: ScheduleStore
    clock: ManualClock

    async def asleep(self) -> None:
        async with asyncio.timeout(60):  # a safety net only
            await self.scheduler.wait_asleep()

    async def advance(self, seconds: float) -> None:
        await self.clock.advance(seconds)
        await self.asleep()

    def fired(self) -> list[str]:
        return [r.task_name for r in self.runner.requests]


def config(**scheduler: Any) -> EngineConfig:
    return EngineConfig.model_validate(
        {
            "models": {"fake/small": {"baseUrl": "http://127.0.0.1:9/v1"}},
            "routing": {"default": "fake/small"},
            "scheduler": {"timezone": "UTC", **scheduler},
        }
    )


def stored_task(name: str, schedule: TaskSchedule, **fields: Any) -> ScheduledTask:
    values: dict[str, Any] = {"message": f"run {name}", "model": None, "inject_into": CHAT, "created_at": START}
    values.update(fields)
    return ScheduledTask(name, schedule, **values)


@pytest.fixture
def store(tmp_path: Path) -> ScheduleStore:
    created = ScheduleStore(tmp_path / "scheduler.db")
    created.create()
    return created


async def start(store: ScheduleStore, clock: ManualClock | None = None, **scheduler: Any) -> Rig:
    runner = StubRunner()
    clock = clock or ManualClock(START)
    loaded = config(**scheduler)
    started = Scheduler(
        config=loaded.scheduler,
        catalogue=ModelCatalogue.from_config(loaded),
        store=store,
        runner=runner,  # type: ignore[arg-type]
        clock=clock,
    )
    await started.start()
    rig = Rig(started, runner, store, clock)
    await rig.asleep()
    return rig


@pytest.fixture
async def rig(store: ScheduleStore) -> AsyncIterator[Rig]:
    started = await start(store)
    yield started
    await started.scheduler.stop()


async def test_a_task_every_minute_fires_every_minute(rig: Rig) -> None:
    added = await rig.scheduler.add_task("tick", TaskSchedule.cron("* * * * *"), "tick", inject_into=CHAT)
    assert added.next_run_at == START + timedelta(minutes=1)
    await rig.asleep()
    await rig.advance(59)
    assert rig.fired() == []
    await rig.advance(1)
    assert rig.fired() == ["tick"]
    await rig.advance(60)
    await rig.advance(60)
    assert rig.fired() == ["tick", "tick", "tick"]
    request = rig.runner.requests[0]
    assert (request.message, request.inject_into, request.origin) == ("tick", CHAT, "schedule")
    task = rig.store.get("tick")
    assert task is not None and task.next_run_at == START + timedelta(minutes=4)


async def test_interval_tasks_fire_on_their_grid(rig: Rig) -> None:
    await rig.scheduler.add_task("poll", TaskSchedule.every("10m"), "poll")
    await rig.asleep()
    for _ in range(25):
        await rig.advance(60)
    assert rig.fired() == ["poll", "poll"]  # at 09:10 and 09:20


class SteppedClock(ManualClock):
    """A manual clock whose wall time a test steps as NTP or a person would; its sleeps run on as before."""

    step = timedelta(0)

    def now(self) -> datetime:
        return super().now() + self.step


async def test_an_interval_task_runs_on_when_the_wall_clock_is_set_back(store: ScheduleStore) -> None:
    """Every 10 minutes is elapsed time: set back an hour, the clock held the next run back an hour (the
    stored next run, a wall time, was an hour away; adversary26). Cron times stay the wall clock's."""
    clock = SteppedClock(START)
    rig = await start(store, clock)
    try:
        await rig.scheduler.add_task("poll", TaskSchedule.every("10m"), "poll")
        await rig.scheduler.add_task("nine", TaskSchedule.cron("20 9 * * *"), "nine")
        await rig.asleep()
        for _ in range(10):
            await rig.advance(60)
        assert rig.fired() == ["poll"]  # at 09:10
        clock.step = timedelta(hours=-1)  # the wall clock now says 08:10
        for _ in range(25):
            await rig.advance(60)
        assert rig.fired() == ["poll", "poll", "poll"]  # at 08:20 and 08:30 by the clock; old code: none
        task = store.get("poll")
        assert task is not None and task.next_run_at == START - timedelta(minutes=20)  # 08:40, on the grid
    finally:
        await rig.scheduler.stop()


async def test_duplicate_names_and_unknown_models_are_refused(rig: Rig) -> None:
    await rig.scheduler.add_task("daily", TaskSchedule.cron("0 8 * * *"), "x")
    with pytest.raises(DuplicateTask, match="already exists"):
        await rig.scheduler.add_task("daily", TaskSchedule.every("1h"), "y")
    with pytest.raises(ValueError, match="unknown model 'nope/x'; configured models: fake/small"):
        await rig.scheduler.add_task("other", TaskSchedule.every("1h"), "y", model="nope/x")
    with pytest.raises(ValueError, match="invalid task name"):
        await rig.scheduler.add_task("../other", TaskSchedule.every("1h"), "y")
    assert [t.name for t in await rig.scheduler.list_tasks()] == ["daily"]


async def test_missed_fire_times_within_grace_coalesce_into_one_run(store: ScheduleStore) -> None:
    """Down for ten minutes: ten minutely fire times missed, one run at start-up."""
    store.add(stored_task("tick", TaskSchedule.cron("* * * * *"), next_run_at=START - timedelta(minutes=10)))
    rig = await start(store)
    try:
        assert rig.fired() == ["tick"]
        task = store.get("tick")
        assert task is not None and task.next_run_at == START + timedelta(minutes=1)
    finally:
        await rig.scheduler.stop()


async def test_a_missed_time_farther_than_the_next_is_not_run_twice(store: ScheduleStore) -> None:
    """newcomer18 (decision 464): a minutely task back 48 s after its time ran then and again 12 s later. It
    runs at whichever time is nearer: the next one here, 12 s on; the missed one when that is nearer."""
    store.add(stored_task("tick", TaskSchedule.cron("* * * * *"), next_run_at=START))
    rig = await start(store, ManualClock(START + timedelta(seconds=48)))
    try:
        assert rig.fired() == []
        task = store.get("tick")
        assert task is not None and (task.last_status, task.next_run_at) == ("missed", START + timedelta(minutes=1))
        await rig.advance(12)
        assert rig.fired() == ["tick"]
    finally:
        await rig.scheduler.stop()
    store.add(stored_task("soon", TaskSchedule.cron("* * * * *"), next_run_at=START + timedelta(minutes=2)))
    rig = await start(store, ManualClock(START + timedelta(minutes=2, seconds=10)))  # 10 s late, next in 50 s
    try:
        assert sorted(rig.fired()) == ["soon", "tick"]
    finally:
        await rig.scheduler.stop()


async def test_a_run_missed_by_more_than_the_grace_is_skipped_until_its_next_time(store: ScheduleStore) -> None:
    store.add(stored_task("daily", TaskSchedule.cron("0 8 * * *"), next_run_at=START - timedelta(hours=1)))
    rig = await start(store)  # 09:00: today's 08:00 is an hour late, over the 300 s grace
    try:
        assert rig.fired() == []
        task = store.get("daily")
        assert task is not None
        assert (task.last_status, task.next_run_at) == ("missed", datetime(2026, 1, 2, 8, tzinfo=UTC))
    finally:
        await rig.scheduler.stop()


async def test_grace_is_measured_from_the_latest_missed_time(store: ScheduleStore) -> None:
    """Down since yesterday 07:00, back at 08:03: yesterday's 08:00 is long gone, today's is 3 min late."""
    store.add(stored_task("daily", TaskSchedule.cron("0 8 * * *"), next_run_at=datetime(2025, 12, 31, 8, tzinfo=UTC)))
    rig = await start(store, ManualClock(datetime(2026, 1, 1, 8, 3, tzinfo=UTC)))
    try:
        assert rig.fired() == ["daily"]
    finally:
        await rig.scheduler.stop()


async def test_misfire_grace_is_configurable(store: ScheduleStore) -> None:
    store.add(stored_task("daily", TaskSchedule.cron("0 8 * * *"), next_run_at=START - timedelta(hours=1)))
    rig = await start(store, misfireGraceSeconds=7200)
    try:
        assert rig.fired() == ["daily"]
    finally:
        await rig.scheduler.stop()


async def test_a_task_never_overlaps_itself(rig: Rig) -> None:
    await rig.scheduler.add_task("slow", TaskSchedule.cron("* * * * *"), "x")
    await rig.asleep()
    rig.runner.busy.add("slow")
    await rig.advance(60)
    assert rig.fired() == []
    task = rig.store.get("slow")
    assert task is not None and task.last_status == "busy"
    rig.runner.busy.clear()
    await rig.advance(60)
    assert rig.fired() == ["slow"]


async def test_changes_made_by_the_cli_are_picked_up_within_a_minute(rig: Rig) -> None:
    # Added straight into scheduler.db while the loop sleeps (as `klaw schedule add` does).
    rig.store.add(stored_task("cli", TaskSchedule.cron("* * * * *"), created_at=START, next_run_at=None))
    rig.store.add(stored_task("gone", TaskSchedule.cron("* * * * *"), next_run_at=START + timedelta(seconds=90)))
    await rig.advance(60)  # the loop re-reads the table: "cli" gets its next time, nothing is due yet
    task = rig.store.get("cli")
    assert task is not None and task.next_run_at == START + timedelta(minutes=2)
    assert rig.store.remove("gone")
    await rig.advance(60)
    assert rig.fired() == ["cli"]


async def test_runs_record_their_outcome_on_the_task(rig: Rig) -> None:
    await rig.scheduler.add_task("daily", TaskSchedule.cron("0 8 * * *"), "x")
    finished = rig.runner.on_finished
    await finished(SubagentRequest("daily", "x"), RunOutcome("daily", RunStatus.SILENT, delivered=False))
    await finished(SubagentRequest("daily", "y", origin="spawn"), RunOutcome("daily", RunStatus.FAILED, False))
    task = rig.store.get("daily")
    assert task is not None and (task.last_run_at, task.last_status) == (START, "silent")


async def test_stop_fires_nothing_more(store: ScheduleStore) -> None:
    rig = await start(store)
    await rig.scheduler.add_task("tick", TaskSchedule.cron("* * * * *"), "x")
    await rig.asleep()
    await rig.scheduler.stop()
    assert not rig.runner.accepting
    await rig.clock.advance(120)
    assert rig.fired() == []
    assert rig.clock.sleepers == 0


async def test_status_counts_tasks_and_names_the_next(rig: Rig) -> None:
    await rig.scheduler.add_task("later", TaskSchedule.cron("0 8 * * *"), "x")
    await rig.scheduler.add_task("soon", TaskSchedule.every("5m"), "x")
    rig.runner.busy.add("later")
    status = await rig.scheduler.status()
    assert status.tasks == 2 and status.running == ["later"]
    assert status.next_task is not None and status.next_task.name == "soon"


async def test_runs_stop_at_the_daily_cap_however_they_were_scheduled(store: ScheduleStore) -> None:
    """A Sunday-only schedule added on a Thursday fires nothing in the next 24 hours, so schedule_add's
    estimate lets it through; on Sunday it would fire every minute. Runs stop at the cap as they start,
    and start again once 24 hours have passed since the first."""
    sunday = datetime(2026, 1, 4, 0, 0, tzinfo=UTC)
    store.add(stored_task("sundays", TaskSchedule.cron("* * * * 0"), next_run_at=sunday))
    rig = await start(store, ManualClock(sunday - timedelta(seconds=30)), maxRunsPerDay=3)
    try:
        await rig.advance(30)
        for _ in range(5):
            await rig.advance(60)
        assert rig.fired() == ["sundays"] * 3
        task = store.get("sundays")
        assert task is not None and task.last_status == "capped"
        with pytest.raises(ToolRefusal, match=r"scheduler\.maxRunsPerDay"):
            rig.scheduler.spawn("extra", "one more", model=None, reply_to=CHAT)
        await rig.advance(24 * 3600 - 5 * 60)  # a day after the first run: room for one more
        assert rig.fired() == ["sundays"] * 4
    finally:
        await rig.scheduler.stop()


async def test_running_out_of_open_files_is_one_log_line_and_the_scheduler_carries_on(
    store: ScheduleStore, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG, logger="klaw.engine.scheduler_loop")
    real_list = store.list
    failures = [OSError(errno.EMFILE, "Too many open files")]

    def listing() -> list[ScheduledTask]:
        if failures:
            raise failures.pop()
        return real_list()

    monkeypatch.setattr(store, "list", listing)
    rig = await start(store)
    try:
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert [r.getMessage() for r in errors] == [
            "scheduler: too many open files (Too many open files); retrying in 60 s"
        ]
        assert all(r.exc_info is None for r in errors)
        await rig.scheduler.add_task("tick", TaskSchedule.cron("* * * * *"), "tick", inject_into=CHAT)
        await rig.asleep()
        await rig.advance(60)
        assert rig.fired() == ["tick"]
    finally:
        await rig.scheduler.stop()


@pytest.mark.parametrize("out_of", ["space", "inodes"])
async def test_a_full_disk_is_one_worded_log_line_and_the_scheduler_carries_on_once_space_is_free(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, out_of: str
) -> None:
    """Out of inodes (adversary20): free blocks, but no file can be made; it was sqlite3's traceback a minute."""
    caplog.set_level(logging.DEBUG, logger="klaw.engine.scheduler_loop")
    with tmpfs(tmp_path / "disk", "3m", inodes=64 if out_of == "inodes" else None) as disk:
        store = ScheduleStore(disk / "scheduler.db")
        store.create()
        rig = await start(store)
        try:
            await rig.scheduler.add_task("tick", TaskSchedule.cron("* * * * *"), "tick", inject_into=CHAT)
            await rig.asleep()
            # sqlite3 then says only "disk I/O error" (its WAL cannot be made)
            fillers = [fill(disk)] if out_of == "space" else fill_inodes(disk)
            await rig.advance(60)
            errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
            holding = f"the file system holding {disk / 'scheduler.db'} (mounted at {disk})"
            assert [r.getMessage() for r in errors] == [
                f"scheduler: no space left on {holding}: free space on {disk} (df -h shows how much is left),"
                " the scheduler tries again every 60 s."
                if out_of == "space"
                else f"scheduler: no free inodes left on {holding}: it has room but cannot hold one more file;"
                f" remove files on {disk} (df -i shows how many are used), the scheduler tries again every 60 s."
            ]
            assert all(r.exc_info is None for r in errors)
            for filler in fillers:
                filler.unlink()
            await rig.advance(60)
            assert rig.fired() == ["tick"]
        finally:
            await rig.scheduler.stop()
