"""lefts55 (decision 510), items 3 and 4: a Telegram chat id written in engine.yaml (the allow-list, the
message targets) or stored with a task is checked by `klaw config check` in the words `klaw schedule add`
gives a typed one; a run's warning (its replies reach nobody, its model refused) was only in the log, and
`klaw schedule list` and `klaw schedule runs NAME` now say it. klaw through its own entry point in process,
an engine on the fake OpenAI server with a real scheduler.db."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from klaw import ManualClock
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.scheduling.schedules import TaskSchedule
from klaw.scheduling.task_store import ScheduledTask, ScheduleStore
from klaw.store.records import ChatRef
from tests.cli.klaw_here import klaw_here
from tests.engine.harness import engine_config
from tests.engine.test_scheduler_e2e import engine_on, run_once

SAID = "a Telegram chat's id is its number (e.g. "
WHERE = "the bot's refusal names it when that chat writes to it (docs/channels.md)"


def _home(tmp_path: Path) -> KlawHome:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    return home


def _edit(home: KlawHome, old: str, new: str) -> None:
    text = home.config_file.read_text(encoding="utf-8")
    assert old in text, old
    home.config_file.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_telegram_chat_ids_in_engine_yaml_and_stored_tasks_are_checked_in_one_sentence(tmp_path: Path) -> None:
    home = _home(tmp_path)
    typed = klaw_here(home.root, "schedule", "add", "t", "-m", "hi", "--every", "1h", "--inject-into", "telegram:abc")
    assert typed.returncode == 2 and f"{SAID}telegram:123456789, a group's is negative), not 'abc': {WHERE}" in (
        typed.stderr
    ), typed.stderr

    _edit(home, "allowedChatIds: []", "allowedChatIds: [abc]")
    checked = klaw_here(home.root, "config", "check")
    assert checked.returncode == 2, checked.stderr
    assert f"allowedChatIds.0 = 'abc': {SAID}123456789, a group's is negative), not 'abc': {WHERE}" in checked.stderr
    assert "valid integer" not in checked.stderr  # pydantic's own words named no fix
    _edit(home, "allowedChatIds: [abc]", 'allowedChatIds: ["telegram:42"]')
    prefixed = klaw_here(home.root, "config", "check")
    assert prefixed.returncode == 2 and "(here the number alone: 42)" in prefixed.stderr, prefixed.stderr
    _edit(home, 'allowedChatIds: ["telegram:42"]', "allowedChatIds: [42]")
    _edit(home, "  approval: [", "  messageTargets: [telegram:abc]\n  approval: [")
    targets = klaw_here(home.root, "config", "check")
    assert targets.returncode == 2
    assert f"tools.messageTargets: {SAID}telegram:123456789, a group's is negative), not 'abc'" in targets.stderr
    _edit(home, "  messageTargets: [telegram:abc]\n", "")

    store = ScheduleStore(home.scheduler_db)  # as an older klaw (or the agent's schedule_add) stored them
    store.create()
    created = datetime(2026, 11, 30, tzinfo=UTC)
    for name, chat in (("letters", "abc"), ("unserved", "123456")):
        store.add(ScheduledTask(name, TaskSchedule.every("1h"), "hi", None, ChatRef("telegram", chat), created))
    warned = klaw_here(home.root, "config", "check")
    assert warned.returncode == 0, warned.stderr
    said = " ".join(warned.stderr.split())
    assert f"warning: task letters reports to telegram:abc: {SAID}telegram:123456789" in said, said
    assert "`klaw schedule remove letters`, then add it again with the chat's number" in said
    assert "warning: task unserved runs, but its replies reach nobody: channels.telegram.enabled is false" in said, said


async def test_a_runs_warning_is_shown_by_schedule_list_and_runs(tmp_path: Path) -> None:
    home = _home(tmp_path)
    clock = ManualClock()
    async with FakeOpenAiServer() as server:
        config = engine_config(server.base_url, scheduler={"timezone": "UTC"})
        async with engine_on(home, config, clock) as engine:
            assert engine.scheduler is not None
            await engine.scheduler.add_task(
                "tg", TaskSchedule.cron("* * * * *"), "hi", inject_into=ChatRef("telegram", "123456")
            )
            server.reply_text("hello tg")
            await run_once(engine, clock, 0)
            listed = await asyncio.to_thread(klaw_here, home.root, "schedule", "list")
            shown = await asyncio.to_thread(klaw_here, home.root, "schedule", "runs", "tg")
            server.reply_error(400, message="the model refuses this request")
            await run_once(engine, clock, 1)
            refused = await asyncio.to_thread(klaw_here, home.root, "schedule", "runs", "tg")
            server.reply_text("fine again")
            await run_once(engine, clock, 2)
            listed_again = await asyncio.to_thread(klaw_here, home.root, "schedule", "list")
    assert listed.returncode == 0, listed.stderr
    line = next(line for line in listed.stdout.splitlines() if line.startswith("Last run of tg ("))
    assert "completed): its replies reach nobody: channels.telegram.enabled is false" in line, line
    assert shown.returncode == 0, shown.stderr
    last = shown.stdout.strip().splitlines()[-1]
    assert last.startswith("Its last run (") and "completed): its replies reach nobody:" in last, shown.stdout
    said = " ".join(refused.stdout.split())
    assert "failed): its replies reach nobody:" in said and "it could not run:" in said, said
    assert "the model refuses this request" in said, said
    assert "its replies reach nobody" in listed_again.stdout  # still unserved: said again
    assert "it could not run" not in listed_again.stdout  # the older run's failure is not the last run's
