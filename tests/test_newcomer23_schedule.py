"""newcomer23 (decision 526), the scheduled tasks: a run whose held tool was refused showed "(completed)" in
`klaw schedule list`; no way to run a task now, no one-off task; `klaw schedule remove` left a removed task to
fire once more; the frequency warning counted one task, never all of them. A real engine on the fake
OpenAI-protocol server and a real scheduler.db; the commands as typed, through klaw's own entry point."""

from __future__ import annotations

import asyncio
from pathlib import Path

from klaw.engine.clock import ManualClock
from klaw.engine.runtime import Engine
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
    once = klaw_here(home.root, "schedule", "add", "call", "--at", "2030-01-01 10:00", "-m", "x")  # no run today
    assert once.returncode == 0 and "warning" not in once.stderr, once.stderr
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


def _fake_model(base_url: str) -> dict[str, str]:
    """engine.yaml's model pointed at the fake server, for the engine `klaw schedule run` starts itself."""
    return {
        "KLAW__MODELS__FAKE__BASEURL": base_url,
        "KLAW__MODELS__FAKE__MAXRETRIES": "0",
        "KLAW__ROUTING__DEFAULT": "FAKE",
        "KLAW__EMBEDDER__BACKEND": "fake",
        "KLAW__EMBEDDER__DIM": "32",
        "KLAW__SUMMARIZER__ENABLED": "false",
    }


async def test_schedule_remove_and_add_tell_the_running_engine_at_once(tmp_path: Path) -> None:
    home = _home(tmp_path)
    clock = ManualClock()  # 2026-01-01 09:00:00 UTC
    async with FakeOpenAiServer() as server:
        config = engine_config(server.base_url, scheduler={"timezone": "UTC"})
        engine = await Engine.start(home, config, clock=clock)  # listening on engine.sock, as `klaw serve` is
        try:
            scheduler = scheduler_of(engine)
            added = await asyncio.to_thread(klaw_here, home.root, "schedule", "add", "soon", "--every", "1h", "-m", "x")
            assert added.returncode == 0 and "The engine running on this home has it." in added.stdout, added
            assert "within a minute" not in added.stdout
            await asyncio.to_thread(klaw_here, home.root, "schedule", "remove", "soon")
            await scheduler.add_task("tea", TaskSchedule.every("1m"), "tea?")
            server.reply_text("tea time")
            await run_once(engine, clock, 0)
            removed = await asyncio.to_thread(klaw_here, home.root, "schedule", "remove", "tea")
            assert removed.returncode == 0, removed.stderr
            assert "Removed tea; the engine running on this home will not run it again." in removed.stdout
            assert "within a minute" not in removed.stdout
            async with asyncio.timeout(10):
                await scheduler.wait_asleep()
                await clock.advance(180)
                await scheduler.wait_asleep()
            assert scheduler.runner.completed == 1 and await scheduler.list_tasks() == []
            again = await asyncio.to_thread(klaw_here, home.root, "schedule", "remove", "tea")
            assert again.returncode == 1 and "there is no task named 'tea'" in again.stderr, again.stderr
        finally:
            await engine.shutdown(timeout_seconds=5)
    stopped = klaw_here(home.root, "schedule", "add", "later", "--every", "1h", "-m", "x")
    assert "It runs while an engine runs on this home" in stopped.stdout, stopped.stdout
    assert "Removed later." in klaw_here(home.root, "schedule", "remove", "later").stdout


async def test_schedule_run_runs_a_task_now_through_the_engine_or_in_process(tmp_path: Path) -> None:
    home = _home(tmp_path)
    clock = ManualClock()
    async with FakeOpenAiServer() as server:
        config = engine_config(server.base_url, scheduler={"timezone": "UTC"})
        engine = await Engine.start(home, config, clock=clock)
        try:
            await scheduler_of(engine).add_task("news", TaskSchedule.cron("0 8 * * *"), "What is new?")
            server.reply_text("nothing new under the sun")
            ran = await asyncio.to_thread(klaw_here, home.root, "schedule", "run", "news")
            nope = await asyncio.to_thread(klaw_here, home.root, "schedule", "run", "nope")
            (task,) = await scheduler_of(engine).list_tasks()
        finally:
            await engine.shutdown(timeout_seconds=5)
        assert ran.returncode == 0, ran.stderr
        assert "Ran news through the engine running on this home: completed." in ran.stdout, ran.stdout
        assert "  nothing new under the sun" in ran.stdout, ran.stdout
        assert task.last_status == "completed" and task.next_run_at is not None and task.next_run_at.hour == 8
        assert nope.returncode == 1 and "there is no task named 'nope'" in nope.stderr, nope.stderr

        server.reply_text("still nothing new")  # no engine runs now: one is started here for the run
        here = await asyncio.to_thread(
            klaw_here, home.root, "schedule", "run", "news", env=_fake_model(server.base_url)
        )
    assert here.returncode == 0, here.stderr
    assert "Ran news in this process (no engine runs on this home): completed." in here.stdout, here.stdout
    assert "  still nothing new" in here.stdout
    shown = klaw_here(home.root, "schedule", "runs", "news")
    assert "nothing new under the sun" in shown.stdout and "still nothing new" in shown.stdout, shown.stdout


async def test_a_one_off_task_runs_once_at_its_time_and_is_then_done(tmp_path: Path) -> None:
    home = _home(tmp_path)
    (home.root / "engine.yaml").write_text("scheduler:\n  timezone: Europe/Berlin\n", encoding="utf-8")
    past = klaw_here(home.root, "schedule", "add", "old", "--at", "2020-01-01 10:00", "-m", "x")
    assert past.returncode == 2 and "'2020-01-01 10:00' is 2020-01-01 10:00 (Europe/Berlin), which has passed" in (
        " ".join(past.stderr.split())
    ), past.stderr
    bad = klaw_here(home.root, "schedule", "add", "bad", "--at", "next tuesday", "-m", "x")
    assert bad.returncode == 2 and "give a date and time as YYYY-MM-DD HH:MM" in bad.stderr, bad.stderr
    both = klaw_here(home.root, "schedule", "add", "two", "--at", "2030-01-01 10:00", "--every", "1h", "-m", "x")
    assert both.returncode == 2 and "give exactly one of --cron EXPR, --every INTERVAL or --at" in both.stderr
    added = klaw_here(home.root, "schedule", "add", "call", "--at", "2030-12-01 17:00", "-m", "Remind me to call")
    assert added.returncode == 0, added.stderr
    assert "Added call: once at 2030-12-01 17:00, next run 2030-12-01 17:00:00." in added.stdout, added.stdout

    clock = ManualClock()
    async with FakeOpenAiServer() as server:
        config = engine_config(server.base_url, scheduler={"timezone": "Europe/Berlin"})
        async with engine_on(home, config, clock) as engine:
            scheduler = scheduler_of(engine)
            (task,) = await scheduler.list_tasks()
            assert task.next_run_at is not None and task.next_run_at.hour == 16  # 17:00 in Berlin, in UTC
            server.reply_text("call your sister")
            await run_once(engine, clock, 0)
            (done,) = await scheduler.list_tasks()
            assert done.next_run_at is None and done.last_status == "completed"
            async with asyncio.timeout(10):  # a year on: it never runs again
                for _ in range(3):
                    await scheduler.wait_asleep()
                    await clock.advance(365 * 86400 / 3)
                await scheduler.wait_asleep()
            assert scheduler.runner.completed == 1
            listed = await asyncio.to_thread(klaw_here, home.root, "schedule", "list")
    said = " ".join(listed.stdout.split())
    assert "once at 2030-12-01 17:00 (done)" in said and "(completed)" in said, said


def test_the_example_a_refused_time_gives_is_itself_accepted_whatever_the_day(tmp_path: Path) -> None:
    """The words gave '2026-12-01 17:00' as their example: from that day on, a person typing the example was told
    it had passed (decision 536). The example is tomorrow at 17:00 now, on the day it is said."""
    import re
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo

    from klaw.scheduling.schedules import InvalidSchedule

    home = _home(tmp_path)
    bad = klaw_here(home.root, "schedule", "add", "call", "--at", "friday 5pm", "-m", "x")
    assert bad.returncode == 2, bad.stderr
    example = re.search(r"e\.g\. '([^']+)'", " ".join(bad.stderr.split()))
    assert example is not None, bad.stderr
    retyped = klaw_here(home.root, "schedule", "add", "call", "--at", example.group(1), "-m", "x")
    assert retyped.returncode == 0, retyped.stderr
    for zone in (UTC, ZoneInfo("Pacific/Kiritimati"), ZoneInfo("Pacific/Pago_Pago")):
        for now in (datetime(2027, 3, 1, 23, 59, tzinfo=UTC), datetime(2031, 12, 31, 0, 1, tzinfo=UTC)):
            try:
                TaskSchedule.at("friday 5pm", zone, now)
            except InvalidSchedule as refused:
                words = str(refused)
            examples = re.findall(r"'(\d{4}-[^']+)'", words)
            assert len(examples) == 2, words
            for typed in examples:
                assert TaskSchedule.at(typed, zone, now).kind == "at"  # not refused as past
