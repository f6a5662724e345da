"""review55: `klaw status` printed every note scheduler.db's task_notes held, so a task removed with `klaw schedule
remove` (and one added again under its name, not yet run) was still said to have met its old run's trouble. A
note stands for the task's last run only: the task as it is, whose last run is the one the note was kept with."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from klaw.scheduling.schedules import TaskSchedule
from klaw.scheduling.task_store import ScheduledTask, ScheduleStore
from klaw.store.records import ChatRef
from tests.cli.klaw_here import klaw_here

SETTINGS = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}
NOTE = "its replies reach nobody: the bot is off"


def _task(name: str) -> ScheduledTask:
    return ScheduledTask(name, TaskSchedule.every("1h"), "hi", None, ChatRef("telegram", "1"), datetime.now(UTC))


def test_a_removed_tasks_note_is_not_said(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    (home / "engine.yaml").write_text(yaml.safe_dump(SETTINGS), encoding="utf-8")
    store = ScheduleStore(home / "scheduler.db")
    store.create()
    for name in ("gone", "again", "kept"):
        store.add(_task(name))
        store.record_run(name, datetime.now(UTC) - timedelta(minutes=5), "completed", NOTE)
    before = klaw_here(home, "status")
    assert before.returncode == 3, before.stderr
    assert f"Last run of task gone: {NOTE}" in before.stdout, before.stdout

    store.remove("gone")
    store.remove("again")
    store.add(_task("again"))  # the same name, not run yet
    after = klaw_here(home, "status")
    assert after.returncode == 3, after.stderr
    assert "task gone" not in after.stdout and "task again" not in after.stdout, after.stdout
    assert f"Last run of task kept: {NOTE}" in after.stdout, after.stdout
    listed = klaw_here(home, "schedule", "list")
    assert "Last run of gone" not in listed.stdout and "Last run of again" not in listed.stdout, listed.stdout
