"""newcomer23 (decision 526), the scheduled tasks: a run whose held tool was refused showed "(completed)" in
`klaw schedule list`; no way to run a task now, no one-off task; `klaw schedule remove` left a removed task to
fire once more; the frequency warning counted one task, never all of them. A real engine on the fake
OpenAI-protocol server and a real scheduler.db; the commands as typed, through klaw's own entry point."""

from __future__ import annotations

import asyncio
from pathlib import Path

from klaw.engine.clock import ManualClock
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.scheduling.schedules import TaskSchedule
from tests.cli.klaw_here import klaw_here
from tests.engine.harness import engine_config
from tests.engine.test_scheduler_e2e import engine_on, run_once, scheduler_of


def _home(tmp_path: Path) -> KlawHome:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    (home.root / "engine.yaml").write_text("scheduler:\n  timezone: UTC\n", encoding="utf-8")
    return home


async def test_a_run_whose_held_tool_was_denied_is_not_listed_as_just_completed(tmp_path: Path) -> None:
    home = _home(tmp_path)
    clock = ManualClock()
    async with FakeOpenAiServer() as server:
        config = engine_config(server.base_url, scheduler={"timezone": "UTC"}, tools={"approval": ["file_write"]})
        async with engine_on(home, config, clock) as engine:
            await scheduler_of(engine).add_task("held", TaskSchedule.cron("* * * * *"), "Write the note")
            server.reply_tool_calls([("file_write", {"path": "note.md", "content": "hi"})])
            server.reply_text("I could not write it")
            await run_once(engine, clock, 0)
            listed = await asyncio.to_thread(klaw_here, home.root, "schedule", "list")
            shown = await asyncio.to_thread(klaw_here, home.root, "schedule", "runs", "held")
            server.reply_text("nothing to write today")  # a run that calls nothing held: plain completed again
            await run_once(engine, clock, 1)
            listed_again = await asyncio.to_thread(klaw_here, home.root, "schedule", "list")
    assert listed.returncode == 0, listed.stderr
    said = " ".join(listed.stdout.split())
    assert "(completed, a tool denied)" in said, said
    assert "Last run of held (" in said and "file_write did not run: a run asks nobody" in said, said
    assert "--allow-tool file_write" in said, said
    assert shown.returncode == 0, shown.stderr
    assert "completed, a tool denied" in shown.stdout.split("\n\n")[1].splitlines()[0], shown.stdout
    again = " ".join(listed_again.stdout.split())
    assert "(completed)" in again and "a tool denied" not in again, again


def test_the_frequency_warning_counts_every_task_not_only_the_one_added(tmp_path: Path) -> None:
    home = _home(tmp_path)
    first = klaw_here(home.root, "schedule", "add", "tea", "--every", "1m", "-m", "tea?")
    assert first.returncode == 0 and "this task runs 1440 times a day, 100 % of the 1440 runs" in " ".join(
        first.stderr.split()
    ), first.stderr
    second = klaw_here(home.root, "schedule", "add", "coffee", "--every", "1m", "-m", "coffee?")
    said = " ".join(second.stderr.split())
    assert second.returncode == 0, second.stderr
    assert "this task runs 1440 times a day and the other 1 task 1440: together 2880 times a day, 200 %" in said, said
    assert "over the cap, so some runs are skipped every day" in said and "remove a task" in said, said
    # Two tasks of 8 an hour are 384 of 1440 (27 %): nothing said; a third of 30 an hour takes them past half.
    fresh = _home(tmp_path / "fresh")
    for name in ("a", "b"):
        quiet = klaw_here(fresh.root, "schedule", "add", name, "--every", "450s", "-m", "x")
        assert quiet.returncode == 0 and "warning" not in quiet.stderr, quiet.stderr
    third = klaw_here(fresh.root, "schedule", "add", "c", "--every", "2m", "-m", "x")
    said = " ".join(third.stderr.split())
    assert "this task runs 720 times a day and the other 2 tasks 384: together 1104 times a day, 77 %" in said, said
    assert "most of them" in said, said
