"""Scheduled tasks as data: name validation, cron and interval schedules, scheduler.db."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from klaw.config import EngineConfig
from klaw.memory.conversation_log import ConversationLog
from klaw.scheduling.names import InvalidTaskName, is_task_log_dir, parse_chat_target, task_chat, validate_task_name
from klaw.scheduling.schedules import InvalidSchedule, TaskSchedule
from klaw.scheduling.task_store import DuplicateTask, ScheduledTask, ScheduleStore
from klaw.scheduling.zones import scheduler_zone
from klaw.store.records import ChatRef

NOW = datetime(2026, 1, 1, 9, 0, 30, tzinfo=UTC)  # a Thursday


@pytest.mark.parametrize("name", ["daily", "morning-briefing", "a", "x_1", "0day", "a" * 64])
def test_valid_task_names(name: str) -> None:
    assert validate_task_name(name) == name
    assert task_chat(name).log_dir_name == f"scheduler_{name}"


@pytest.mark.parametrize(
    "name",
    [
        *("", "..", ".", "../etc", "a/b", "a\\b", "/abs", "with space", "Daily", "-lead", "_lead", "a.b"),
        *("é", "a" * 65, "a\0b", "trailing-newline\n"),
    ],
)
def test_task_names_that_could_escape_or_collide_are_refused(name: str) -> None:
    with pytest.raises(InvalidTaskName, match="lowercase letters, digits"):
        validate_task_name(name)


def test_task_log_dirs_are_not_chat_dirs(tmp_path: Path) -> None:
    log = ConversationLog(tmp_path)
    for name in ("console_me", "scheduler_daily", "telegram_42"):
        (tmp_path / name).mkdir()
    assert [p.name for p in log.chat_dirs()] == ["console_me", "telegram_42"]
    assert [p.name for p in log.task_dirs()] == ["scheduler_daily"]
    assert is_task_log_dir("scheduler_daily") and not is_task_log_dir("console_me")


def test_chat_targets() -> None:
    assert parse_chat_target("console:alice") == ChatRef("console", "alice")
    assert parse_chat_target("telegram:-100:42") == ChatRef("telegram", "-100:42")
    for bad in ("console", "console:", ":x", "Bad Channel:x"):
        with pytest.raises(ValueError, match=r"channel"):
            parse_chat_target(bad)
    with pytest.raises(ValueError, match="task logs"):
        parse_chat_target("scheduler:daily")


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ("61 * * * *", "the minute (field 1 of 5) is '61'; it takes 0-59,"),
        ("0 25 * * *", "the hour (field 2 of 5) is '25'; it takes 0-23,"),
        ("0 0 * * 8", "the day-of-week (field 5 of 5) is '8'; it takes 0-7 (0 and 7 are Sunday)"),
        ("0 0 30 2 *", "the day-of-month (field 3 of 5) is '30'; it takes 1-31 (a day the month has"),
        ("*/0 * * * *", "the minute (field 1 of 5) is '*/0'"),
        ("* * *", "expected five fields"),
        ("0 * * * * *", "expected five fields"),  # no seconds field
        ("", "expected five fields"),
        ("every day", "expected five fields"),
    ],
)
def test_invalid_cron_expressions_get_a_clear_error(expression: str, reason: str) -> None:
    with pytest.raises(InvalidSchedule) as raised:
        TaskSchedule.cron(expression)
    message = str(raised.value)
    assert f"invalid cron expression {expression!r}" in message
    assert reason in message
    assert "minute hour day-of-month month day-of-week" in message


def test_cron_follows_crontab_weekdays_and_day_fields() -> None:
    """0 is Sunday (APScheduler 3 would say Monday), and restricted day fields are ORed as in cron."""
    sunday = TaskSchedule.cron("0 8 * * 0").next_after(NOW, anchor=NOW, zone=UTC)
    assert sunday == datetime(2026, 1, 4, 8, tzinfo=UTC)
    assert TaskSchedule.cron("0 8 * * 7").next_after(NOW, anchor=NOW, zone=UTC) == sunday
    assert TaskSchedule.cron("0 8 * * 1").next_after(NOW, anchor=NOW, zone=UTC) == datetime(2026, 1, 5, 8, tzinfo=UTC)
    either = TaskSchedule.cron("0 8 15 * 5")  # the 15th, or any Friday
    assert either.next_after(NOW, anchor=NOW, zone=UTC) == datetime(2026, 1, 2, 8, tzinfo=UTC)


def test_cron_is_read_in_the_scheduler_zone() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    fire = TaskSchedule.cron("0 8 * * *").next_after(NOW, anchor=NOW, zone=berlin)
    assert fire == datetime(2026, 1, 2, 7, tzinfo=UTC)  # 08:00 CET
    summer = datetime(2026, 7, 1, 12, tzinfo=UTC)
    assert TaskSchedule.cron("0 8 * * *").next_after(summer, anchor=summer, zone=berlin) == datetime(
        2026, 7, 2, 6, tzinfo=UTC
    )


def test_next_fire_is_strictly_after_and_latest_is_at_or_before() -> None:
    minute = TaskSchedule.cron("* * * * *")
    at = datetime(2026, 1, 1, 9, 1, tzinfo=UTC)
    assert minute.next_after(at, anchor=at, zone=UTC) == at + timedelta(minutes=1)
    assert minute.latest_at_or_before(at, anchor=at, zone=UTC) == at
    assert minute.latest_at_or_before(at + timedelta(seconds=59.5), anchor=at, zone=UTC) == at


@pytest.mark.parametrize(
    ("text", "seconds"), [("10m", 600), ("1h30m", 5400), ("2h", 7200), ("1d", 86400), ("1m30s", 90)]
)
def test_intervals(text: str, seconds: int) -> None:
    schedule = TaskSchedule.every(text)
    assert schedule.interval == timedelta(seconds=seconds)
    assert schedule.describe() == f"every {text}"


@pytest.mark.parametrize("text", ["", "10", "m", "10x", "-5m", "30s", "0m", "1.5h"])
def test_invalid_intervals_get_a_clear_error(text: str) -> None:
    with pytest.raises(InvalidSchedule, match=f"invalid interval {text!r}"):
        TaskSchedule.every(text)


def test_intervals_stay_on_their_grid() -> None:
    every = TaskSchedule.every("10m")
    created = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
    assert every.first_fire(created, UTC) == created + timedelta(minutes=10)
    later = created + timedelta(minutes=35)
    assert every.next_after(later, anchor=created, zone=UTC) == created + timedelta(minutes=40)
    assert every.latest_at_or_before(later, anchor=created, zone=UTC) == created + timedelta(minutes=30)
    assert every.latest_at_or_before(created + timedelta(minutes=5), anchor=created, zone=UTC) is None


def task(name: str = "daily", **fields: object) -> ScheduledTask:
    values: dict[str, object] = {
        "schedule": TaskSchedule.cron("0 8 * * *"),
        "message": "Summarise my day",
        "model": None,
        "inject_into": ChatRef("console", "me"),
        "created_at": NOW,
    }
    values.update(fields)
    return ScheduledTask(name, **values)  # type: ignore[arg-type]


def test_store_persists_tasks_across_opens(tmp_path: Path) -> None:
    path = tmp_path / "scheduler.db"
    store = ScheduleStore(path)
    store.create()
    store.add(task("daily", next_run_at=NOW + timedelta(hours=1)))
    store.add(task("ticker", schedule=TaskSchedule.every("10m"), model="fake/small", inject_into=None))
    reopened = ScheduleStore(path)
    reopened.create()  # idempotent
    assert [t.name for t in reopened.list()] == ["daily", "ticker"]
    assert reopened.get("daily") == task("daily", next_run_at=NOW + timedelta(hours=1))
    ticker = reopened.get("ticker")
    assert ticker is not None and ticker.schedule == TaskSchedule.every("10m") and ticker.model == "fake/small"
    reopened.set_next_run("daily", NOW + timedelta(days=1))
    reopened.record_run("daily", NOW, "silent")
    daily = ScheduleStore(path).get("daily")
    assert daily is not None
    assert (daily.next_run_at, daily.last_run_at, daily.last_status) == (NOW + timedelta(days=1), NOW, "silent")


def test_duplicate_names_get_a_clear_error(tmp_path: Path) -> None:
    store = ScheduleStore(tmp_path / "scheduler.db")
    store.create()
    store.add(task("daily"))
    with pytest.raises(DuplicateTask, match="a task named 'daily' already exists"):
        store.add(task("daily", message="another"))
    assert store.remove("daily") and not store.remove("daily")
    store.add(task("daily"))  # free again once removed


def test_a_hand_edited_invalid_row_is_skipped_not_fatal(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "scheduler.db"
    store = ScheduleStore(path)
    store.create()
    store.add(task("good"))
    with sqlite3.connect(path) as connection:
        insert = "INSERT INTO tasks (name, kind, expression, message, created_at) VALUES (?, ?, ?, 'x', 0)"
        connection.execute(insert, ("bad", "cron", "99 * * * *"))
        connection.execute(insert, ("../up", "every", "600"))
    assert [t.name for t in store.list()] == ["good"]
    assert "skipping task 'bad'" in caplog.text


def test_a_task_needs_a_message() -> None:
    with pytest.raises(ValueError, match="needs a message"):
        task(message="  ")


def test_scheduler_config_validates_the_zone() -> None:
    berlin = EngineConfig.model_validate({"scheduler": {"timezone": "Europe/Berlin"}})
    assert berlin.scheduler.timezone == "Europe/Berlin"
    with pytest.raises(ValueError, match="unknown time zone 'Mars/Olympus'"):
        EngineConfig.model_validate({"scheduler": {"timezone": "Mars/Olympus"}})
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        EngineConfig.model_validate({"scheduler": {"misfireGraceSeconds": -1}})


def test_the_scheduler_zone_is_the_configured_one_else_the_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    assert scheduler_zone("Europe/Berlin") == ZoneInfo("Europe/Berlin")
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    assert scheduler_zone(None) == ZoneInfo("Asia/Tokyo")
    monkeypatch.setenv("TZ", ":America/New_York")  # the glibc form
    assert scheduler_zone(None) == ZoneInfo("America/New_York")
