"""`klaw schedule list|add|remove` through typer's CliRunner, on scheduler.db in a temp KLAW_HOME."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from klaw.cli.app import app
from klaw.scheduling.schedules import TaskSchedule
from klaw.scheduling.task_store import ScheduleStore
from klaw.store.records import ChatRef
from klaw.store.sqlite.store import SqliteStore
from tests.memory.recall_helpers import Conversation

CONFIG = """
models:
  fake/small: {baseUrl: "http://127.0.0.1:9/v1"}
routing: {default: fake/small}
scheduler: {timezone: Europe/Berlin}
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "engine.yaml").write_text(CONFIG, encoding="utf-8")
    return tmp_path


def klaw(home: Path, *args: str) -> Result:
    return CliRunner().invoke(app, ["schedule", *args], env={"KLAW_HOME": str(home), "COLUMNS": "200"})


def test_add_list_remove(home: Path) -> None:
    added = klaw(
        home,
        "add",
        "morning",
        "--cron",
        "0 8 * * 1-5",
        "--message",
        "Brief me",
        "--inject-into",
        "web:u1",
        "--new-chat",
    )
    assert added.exit_code == 0, added.output
    assert "Added morning: cron '0 8 * * 1-5', next run" in added.output
    assert "It runs while an engine runs on this home" in added.output  # none runs here (decision 526)
    assert klaw(home, "add", "poll", "--every", "30m", "-m", "Check the feed", "--model", "fake/small").exit_code == 0

    tasks = ScheduleStore(home / "scheduler.db").list()
    assert [(t.name, t.schedule, t.inject_into, t.model) for t in tasks] == [
        ("morning", TaskSchedule.cron("0 8 * * 1-5"), ChatRef("web", "u1"), None),
        ("poll", TaskSchedule.every("30m"), None, "fake/small"),
    ]
    assert all(t.next_run_at is not None for t in tasks)
    morning = tasks[0].next_run_at
    # 08:00 in Berlin is 07:00 UTC in winter, 06:00 in summer.
    assert morning is not None and morning.minute == 0 and morning.hour in (6, 7)

    listed = klaw(home, "list")
    assert listed.exit_code == 0
    for text in ("morning", "cron '0 8 * * 1-5'", "web:u1", "Brief me", "poll", "every 30m", "(only logged)"):
        assert text in listed.output
    assert "Europe/Berlin" in listed.output and " 08:00:00" in listed.output  # to the second (newcomer14)

    removed = klaw(home, "remove", "poll")
    assert removed.exit_code == 0 and "Removed poll" in removed.output
    assert [t.name for t in ScheduleStore(home / "scheduler.db").list()] == ["morning"]


def test_list_without_tasks(home: Path) -> None:
    result = klaw(home, "list")
    assert result.exit_code == 0 and "No scheduled tasks." in result.output
    assert not (home / "scheduler.db").exists()  # listing creates nothing


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # the field, its place, what it takes (before: cronsim's own "Bad minute")
        (
            ["bad", "--cron", "61 * * * *", "-m", "x"],
            "invalid cron expression '61 * * * *': the minute (field 1 of 5) is '61'; it takes 0-59,",
        ),
        (["bad", "--cron", "0 25 * * *", "-m", "x"], "the hour (field 2 of 5) is '25'; it takes 0-23,"),
        (["bad", "--cron", "* * *", "-m", "x"], "expected five fields"),
        (["bad", "--every", "10", "-m", "x"], "invalid interval '10'"),
        (["bad", "--every", "30s", "-m", "x"], "the shortest interval is 60 seconds"),
        # past datetime's year 9999 was an OverflowError traceback; 5,000 digits int() refuses
        (["bad", "--every", "999999999d", "-m", "x"], "invalid interval '999999999d': the longest interval is 3650d"),
        (["bad", "--every", "99999999999999999999d", "-m", "x"], "the longest interval is 3650d (10 years)"),
        (
            ["bad", "--every", "9" * 5000 + "d", "-m", "x"],
            "invalid interval '9999999999999999999999999999999999999...'",
        ),
        (["bad", "--every", "3650d1m", "-m", "x"], "for a date once a year use cron"),
        (["bad", "-m", "x"], "give exactly one of --cron EXPR, --every INTERVAL or --at"),
        (["bad", "--cron", "* * * * *", "--every", "1h", "-m", "x"], "give exactly one of"),
        (["../etc", "--every", "1h", "-m", "x"], "invalid task name '../etc'"),
        (["a/b", "--every", "1h", "-m", "x"], "invalid task name"),
        (["bad", "--every", "1h", "-m", "x", "--model", "nope/x"], "unknown model 'nope/x'"),
        (["bad", "--every", "1h", "-m", "x", "--inject-into", "nochat"], "write it as channel:chat_id"),
        (["bad", "--every", "1h", "-m", " "], "a task needs a message"),
    ],
)
def test_invalid_input_gets_a_clear_error_and_nothing_is_added(home: Path, args: list[str], message: str) -> None:
    result = klaw(home, "add", *args)
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())
    assert "Traceback" not in result.output
    assert not (home / "scheduler.db").exists() or ScheduleStore(home / "scheduler.db").list() == []


def test_duplicate_names_are_refused(home: Path) -> None:
    assert klaw(home, "add", "daily", "--every", "1d", "-m", "x").exit_code == 0
    again = klaw(home, "add", "daily", "--cron", "0 9 * * *", "-m", "y")
    assert again.exit_code == 2
    assert "a task named 'daily' already exists" in again.output
    (task,) = ScheduleStore(home / "scheduler.db").list()
    assert task.message == "x"


def test_removing_an_unknown_task_fails(home: Path) -> None:
    result = klaw(home, "remove", "ghost")
    assert result.exit_code == 1
    assert "there is no task named 'ghost'" in result.output


def test_add_allows_a_held_tool_and_refuses_one_that_is_not_held(home: Path) -> None:
    (home / "engine.yaml").write_text(CONFIG + "tools: {approval: [host_exec]}\n", encoding="utf-8")
    added = klaw(home, "add", "cleanup", "--every", "1d", "-m", "Clean up", "--allow-tool", "host_exec")
    assert added.exit_code == 0, added.output
    [task] = ScheduleStore(home / "scheduler.db").list()
    assert task.allowed_tools == ("host_exec",)
    assert "may run without asking: host_exec" in klaw(home, "list").output

    refused = klaw(home, "add", "other", "--every", "1d", "-m", "Read", "--allow-tool", "file_read")
    assert refused.exit_code != 0
    assert "'file_read' is not held for approval (tools.approval in engine.yaml lists host_exec)" in refused.output
    assert [t.name for t in ScheduleStore(home / "scheduler.db").list()] == ["cleanup"]


def test_a_scheduler_db_of_an_older_klaw_keeps_its_tasks(home: Path) -> None:
    """Version 1 had no allowed_tools column: the first open adds it, tasks allow nothing."""
    path = home / "scheduler.db"
    with sqlite3.connect(path) as connection:
        connection.execute(
            "CREATE TABLE tasks (name TEXT PRIMARY KEY, kind TEXT NOT NULL, expression TEXT NOT NULL,"
            " message TEXT NOT NULL, model TEXT, inject_into TEXT, created_at INTEGER NOT NULL,"
            " next_run_at INTEGER, last_run_at INTEGER, last_status TEXT)"
        )
        connection.execute(
            "INSERT INTO tasks VALUES ('old', 'every', '3600', 'Check', NULL, NULL, 0, NULL, NULL, NULL)"
        )
        connection.execute("PRAGMA user_version = 1")
    listed = klaw(home, "list")
    assert listed.exit_code == 0, listed.output
    assert "old" in listed.output
    [task] = ScheduleStore(path).list()
    assert (task.name, task.allowed_tools) == ("old", ())


def test_inject_into_names_a_chat_with_messages_or_says_new_chat(home: Path) -> None:
    """A mistyped chat id used to be accepted, and every run then started that chat, where nobody reads."""
    fresh = klaw(home, "add", "brief", "--every", "1h", "-m", "x", "--inject-into", "console:alice")
    assert fresh.exit_code == 2
    said = " ".join(fresh.output.split())
    assert "no chat console:alice has any messages (no chat has messages yet)" in said
    assert "--new-chat" in said and "Traceback" not in said

    async def talk() -> None:
        store = await SqliteStore.open(home / "klaw.db")
        try:
            await Conversation(store).say("good morning", embed=False)
        finally:
            await store.aclose()

    asyncio.run(talk())
    typo = klaw(home, "add", "brief", "--every", "1h", "-m", "x", "--inject-into", "console:alcie")
    assert typo.exit_code == 2
    assert "no chat console:alcie has any messages (the chats with messages: console:alice)" in " ".join(
        typo.output.split()
    )
    assert not (home / "scheduler.db").exists() or ScheduleStore(home / "scheduler.db").list() == []

    assert klaw(home, "add", "brief", "--every", "1h", "-m", "x", "--inject-into", "console:alice").exit_code == 0
    assert (
        klaw(home, "add", "other", "--every", "1h", "-m", "x", "--inject-into", "web:new", "--new-chat").exit_code == 0
    )
    assert [t.inject_into for t in ScheduleStore(home / "scheduler.db").list()] == [
        ChatRef("console", "alice"),
        ChatRef("web", "new"),
    ]
