"""End to end: a person asks for a task every minute; on a manual clock it runs three times against the
local OpenAI-protocol server over real HTTP; the third run sees the first two; a silent run delivers
nothing; after a restart the schedule is still there and keeps running."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

from klaw.config import EngineConfig
from klaw.engine.clock import ManualClock
from klaw.engine.delivery import Outbound
from klaw.engine.runtime import Engine
from klaw.engine.scheduler_loop import Scheduler
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.scheduling.task_store import ScheduleStore
from tests.engine.harness import CHAT, engine_config

REQUEST = "Report what is new"


@asynccontextmanager
async def engine_on(home: KlawHome, config: EngineConfig, clock: ManualClock) -> AsyncIterator[Engine]:
    engine = await Engine.start(home, config, clock=clock, listen=False)
    try:
        yield engine
    finally:
        await engine.shutdown(timeout_seconds=5)


def scheduler_of(engine: Engine) -> Scheduler:
    assert engine.scheduler is not None
    return engine.scheduler


async def run_once(engine: Engine, clock: ManualClock, runs_before: int) -> None:
    """Move the clock to the task's next fire time and wait until that run has finished."""
    scheduler = scheduler_of(engine)
    async with asyncio.timeout(10):
        await scheduler.wait_asleep()
        (task,) = await scheduler.list_tasks()
        assert task.next_run_at is not None
        await clock.advance((task.next_run_at - clock.now()).total_seconds())
        await scheduler.runner.wait_for_completed(runs_before + 1)
        await scheduler.wait_asleep()


def run_requests(server: FakeOpenAiServer) -> list[list[dict[str, Any]]]:
    """The messages of each model request made by a run of the task (not by the chat's turn)."""
    found = []
    for request in server.chat_requests:
        messages = request.body["messages"]
        is_task_run = messages[1]["content"].startswith("You are running the scheduled task")
        if is_task_run and messages[-1]["content"] == REQUEST:
            found.append(messages)
    return found


async def test_a_minutely_task_runs_sees_its_past_stays_silent_and_survives_a_restart(tmp_path: Path) -> None:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    clock = ManualClock()
    delivered: list[Outbound] = []
    first_reply = asyncio.Event()

    async def record(outbound: Outbound) -> None:
        delivered.append(outbound)
        first_reply.set()

    async with FakeOpenAiServer() as server:
        config = engine_config(server.base_url, scheduler={"timezone": "UTC"})
        async with engine_on(home, config, clock) as engine:
            engine.delivery.register("console", record)
            # The person asks; the agent schedules it with its tool, in this chat.
            server.reply_tool_calls([("schedule_add", {"name": "news", "cron": "* * * * *", "message": REQUEST})])
            server.reply_text("Done: every minute.")
            await engine.submit(CHAT, "tell me every minute what is new")
            await clock.advance(1.5)
            async with asyncio.timeout(10):
                await first_reply.wait()
            assert delivered[0].text == "Done: every minute."

            server.reply_text("first report")
            await run_once(engine, clock, 0)
            server.reply_text("second report")
            await run_once(engine, clock, 1)
            server.reply_text('{"silent": true}')
            await run_once(engine, clock, 2)
            assert clock.now().strftime("%H:%M") == "09:03"

            # Three runs over HTTP; the first two answers reached the chat, the silent third did not.
            runs = run_requests(server)
            assert len(runs) == 3
            assert [(o.chat, o.text) for o in delivered[1:]] == [(CHAT, "first report"), (CHAT, "second report")]
            # The third run's context holds the first two runs (request + answer each), oldest first.
            history = [(m["role"], m["content"]) for m in runs[2] if m["role"] != "system"]
            assert history == [
                ("user", REQUEST),
                ("assistant", "first report"),
                ("user", REQUEST),
                ("assistant", "second report"),
                ("user", REQUEST),
            ]
            # The runs live in the task's own log; the chat's window got only the two delivered answers.
            assert (home.conversations / "scheduler_news" / "2026-01-01.jsonl").is_file()
            window = [m.text for m in await engine.chats.history(CHAT, limit=50)]
            assert REQUEST not in window and '{"silent": true}' not in window
            assert window[-2:] == ["first report", "second report"]
            task = (await scheduler_of(engine).list_tasks())[0]
            assert task.last_status == "silent"
            assert task.next_run_at == clock.now() + timedelta(minutes=1)

        # Restart: the schedule was persisted in scheduler.db and the engine picks it up again.
        assert [t.name for t in ScheduleStore(home.scheduler_db).list()] == ["news"]
        async with engine_on(home, config, clock) as engine:
            engine.delivery.register("console", record)
            server.reply_text("fourth report")
            await run_once(engine, clock, 0)
            assert delivered[-1].text == "fourth report"
            runs = run_requests(server)
            assert len(runs) == 4
            answers = [m["content"] for m in runs[3] if m["role"] == "assistant"]
            assert answers == ["first report", "second report", '{"silent": true}']
