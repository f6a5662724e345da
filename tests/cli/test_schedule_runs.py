"""`klaw schedule runs NAME` shows what a task did from its log (newcomer13: no command read a task's runs;
its log is JSONL under conversations/scheduler_<task>/). The runs are made by a real engine on a manual
clock against the fake OpenAI-protocol server, one of them calling a tool; the command then reads the
home as a person would, through klaw's own entry point (tests/cli/klaw_here.py)."""

from __future__ import annotations

from pathlib import Path

from klaw.engine.clock import ManualClock
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.scheduling.schedules import TaskSchedule
from klaw.scheduling.task_store import ScheduleStore
from tests.cli.klaw_here import klaw_here
from tests.engine.harness import engine_config
from tests.engine.test_scheduler_e2e import engine_on, run_once, scheduler_of


async def test_a_tasks_runs_are_shown_with_their_tools_and_answers(tmp_path: Path) -> None:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    (home.root / "engine.yaml").write_text("scheduler:\n  timezone: UTC\n", encoding="utf-8")
    clock = ManualClock()
    async with FakeOpenAiServer() as server:
        config = engine_config(server.base_url, scheduler={"timezone": "UTC"})
        async with engine_on(home, config, clock) as engine:
            await scheduler_of(engine).add_task("news", TaskSchedule.cron("* * * * *"), "Report what is new")
            server.reply_tool_calls([("current_time", {"timezone": "UTC"})])
            server.reply_text("first report")
            await run_once(engine, clock, 0)
            server.reply_text("second report\n\x1b[2Jwith a second line")
            await run_once(engine, clock, 1)

    shown = klaw_here(home.root, "schedule", "runs", "news")
    assert shown.returncode == 0, shown.stderr
    said = shown.stdout
    assert "The last 2 run(s) of task news, oldest first (times in UTC):" in said, said
    first, second = said.split("\n\n")[1:3]
    assert first.startswith("2026-01-01 09:01:00") and "completed" in first.splitlines()[0], said
    assert "  Tools used: current_time" in first and "  first report" in first, said
    assert "Tools used" not in second and "  second report\n  ␛[2Jwith a second line" in second, said
    assert "\x1b" not in said  # shown, never obeyed

    assert klaw_here(home.root, "schedule", "runs", "news", "--last", "1").stdout.count("report") == 1
    ScheduleStore(home.scheduler_db).remove("news")  # a removed task's log is kept, and still shown
    assert "second report" in klaw_here(home.root, "schedule", "runs", "news").stdout
    missing = klaw_here(home.root, "schedule", "runs", "nope")
    assert missing.returncode == 1 and "no run of a task named 'nope' is logged" in missing.stderr, missing.stderr


async def test_a_call_refused_for_lack_of_approval_is_marked_denied_as_in_a_chat(tmp_path: Path) -> None:
    """newcomer15: a task's held file_write, refused because a run has nobody to ask, was listed as "Tools used:
    file_write", as if it had run; a chat's reply marks such a call "(denied)", and so does this now."""
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    (home.root / "engine.yaml").write_text("scheduler:\n  timezone: UTC\n", encoding="utf-8")
    clock = ManualClock()
    async with FakeOpenAiServer() as server:
        config = engine_config(server.base_url, scheduler={"timezone": "UTC"}, tools={"approval": ["file_write"]})
        async with engine_on(home, config, clock) as engine:
            await scheduler_of(engine).add_task("held", TaskSchedule.cron("* * * * *"), "Write the note")
            server.reply_tool_calls(
                [("current_time", {"timezone": "UTC"}), ("file_write", {"path": "note.md", "content": "hi"})]
            )
            server.reply_text("I could not write it")
            await run_once(engine, clock, 0)

    shown = klaw_here(home.root, "schedule", "runs", "held")
    assert shown.returncode == 0, shown.stderr
    assert "  Tools used: current_time, file_write (denied)\n" in shown.stdout, shown.stdout
    assert not (home.workspace / "note.md").exists()


async def test_the_runs_are_shown_beside_a_damaged_scheduler_db(tmp_path: Path) -> None:
    """review55 (decision 517): decision 510 read scheduler.db for the last run's note before showing the log,
    so a damaged scheduler.db stopped `klaw schedule runs` showing runs its log holds whole."""
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    (home.root / "engine.yaml").write_text("scheduler:\n  timezone: UTC\n", encoding="utf-8")
    clock = ManualClock()
    async with FakeOpenAiServer() as server:
        config = engine_config(server.base_url, scheduler={"timezone": "UTC"})
        async with engine_on(home, config, clock) as engine:
            await scheduler_of(engine).add_task("news", TaskSchedule.cron("* * * * *"), "Report what is new")
            server.reply_text("first report")
            await run_once(engine, clock, 0)
    for path in home.root.glob("scheduler.db*"):
        path.unlink()
    home.scheduler_db.write_bytes(b"not a database " * 100)
    home.scheduler_db.chmod(0o600)

    shown = klaw_here(home.root, "schedule", "runs", "news")
    assert shown.returncode == 0, shown.stderr
    assert "first report" in shown.stdout, shown.stdout
    missing = klaw_here(home.root, "schedule", "runs", "nope")  # no log: the damaged file is said, as before
    assert missing.returncode == 1 and "a database is damaged" in missing.stderr, missing.stderr
