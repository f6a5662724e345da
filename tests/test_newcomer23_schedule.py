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
