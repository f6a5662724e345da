"""A task's run cut off by `kill -9` is told in its chat at the next start, shown `interrupted` by
`klaw schedule list`, and not run again (decision 307).

A real `klaw engine` runs the run over the fake OpenAI server, which holds the run's model call (a
scheduled task's, then one `subagent_spawn` started from a chat), and is SIGKILLed meanwhile. Before,
the run was lost without a word: its chat heard nothing, the listing showed no such run."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from collections.abc import Mapping
from contextlib import closing
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from klaw.engine.frames import OutboundFrame
from klaw.gateway.link import Backoff
from klaw.gateway.service import Gateway
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer, HangReply, Reply, ToolCallsReply, echo_last_user_message
from klaw.scheduling.schedules import TaskSchedule
from klaw.scheduling.task_store import NotedAnswer, ScheduledTask, ScheduleStore
from klaw.store.records import ChatRef
from tests.engine import short_socket_dir
from tests.engine.test_resume_after_kill import AnswerChannel, write_config
from tests.engine.test_stable_exchange_ids import klaw
from tests.serve_helpers import STARTS_WITHIN, EngineProcess

CHAT = ChatRef("burst", "one-chat")


class TaskChannel(AnswerChannel):
    """Collects what the engine sends; `told` once a task's message came (labelled with its task)."""

    def __init__(self) -> None:
        super().__init__()
        self.told = asyncio.Event()

    async def deliver(self, frame: OutboundFrame) -> None:
        await super().deliver(frame)
        if frame.task is not None:
            self.told.set()


def is_run(body: Mapping[str, Any]) -> bool:
    """A task run's model call: its system prompt says it runs a task on its own."""
    return any("You are running the scheduled task" in str(m.get("content")) for m in body.get("messages") or [])


async def killed_in_the_run(home: KlawHome, server: FakeOpenAiServer, started: asyncio.Event, say: str | None) -> str:
    """Start the engine (saying `say` in the chat, if given), SIGKILL it once a run's model call is held,
    start it again; returns the task's message the chat is sent after the restart (the only one)."""
    engine = EngineProcess(home)
    await engine.start()
    channel = TaskChannel()
    gateway = Gateway(home, [channel], backoff=Backoff(initial=0.05, maximum=0.3))
    await gateway.start()
    try:
        if say is not None:
            await gateway.submit(CHAT.channel, CHAT.chat_id, say)
        async with asyncio.timeout(STARTS_WITHIN):  # safety net: ends when the run is in the model
            await started.wait()
        assert await engine.stop(signal.SIGKILL) == -signal.SIGKILL
        channel.replies.clear()
        await engine.start()
        async with asyncio.timeout(STARTS_WITHIN):
            await channel.told.wait()
        assert await engine.stop(signal.SIGTERM) == 0
    finally:
        await gateway.stop()
    [told] = [reply for reply in channel.replies if reply.task is not None]
    return " ".join(told.text.split())


async def test_a_scheduled_run_cut_off_by_a_kill_is_told_in_its_chat_and_listed_interrupted(tmp_path: Path) -> None:
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        started = asyncio.Event()

        def reply(body: Mapping[str, Any]) -> Reply:
            if is_run(body):
                started.set()
                return HangReply(None)
            return echo_last_user_message(body)

        async with FakeOpenAiServer(default_reply=reply) as server:
            write_config(home, server.base_url, debounce_ms=0)
            now = datetime.now(UTC)
            store = ScheduleStore(home.scheduler_db)
            store.create()  # as `klaw schedule add` writes it, due now
            store.add(ScheduledTask("digest", TaskSchedule.every("1d"), "sum up my inbox", None, CHAT, now, now))
            told = await killed_in_the_run(home, server, started, say=None)
            runs = [r for r in server.chat_requests if is_run(r.body)]
        assert told.startswith("The run of task 'digest' that started at "), told
        assert "was cut off: klaw stopped (a restart or a crash) before it finished" in told
        assert "It was not run again, since its tools may already have acted" in told
        assert len(runs) == 1  # not run again after the restart
        listed = " ".join((await klaw(home, "schedule", "list")).split())
        assert "(interrupted)" in listed, listed


async def test_a_spawned_run_cut_off_by_a_kill_is_told_in_the_chat_that_spawned_it(tmp_path: Path) -> None:
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        started = asyncio.Event()
        spawn = ToolCallsReply((("call_1", "subagent_spawn", '{"task_name": "lookup", "message": "find it"}'),))

        def reply(body: Mapping[str, Any]) -> Reply:
            if is_run(body):
                started.set()
                return HangReply(None)
            return echo_last_user_message(body)

        async with FakeOpenAiServer(default_reply=reply) as server:
            server.reply(spawn)  # the chat turn's first call spawns the run
            write_config(home, server.base_url, debounce_ms=0)
            before = datetime.now(UTC) - timedelta(minutes=1)
            told = await killed_in_the_run(home, server, started, say="look it up in the background")
            runs = [r for r in server.chat_requests if is_run(r.body)]
        assert told.startswith("The subagent run 'lookup' that started at "), told
        assert f"{before:%Y-%m-%d}" in told
        assert "was cut off" in told and "Ask again if you still want it." in told
        assert len(runs) == 1


async def test_a_run_note_that_cannot_be_read_does_not_stop_the_engine(tmp_path: Path) -> None:
    """scheduler.db edited by hand (or damaged) so a run's start time is not a number: `klaw engine`
    starts, says the note could not be read and removes it (adversary9: it exited 1 with a traceback)."""
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as server:
            write_config(home, server.base_url, debounce_ms=0)
            store = ScheduleStore(home.scheduler_db)
            store.create()
            with closing(sqlite3.connect(home.scheduler_db)) as connection, connection:
                connection.execute(
                    "INSERT INTO runs (log_name, task, origin, inject_into, started_at) VALUES (?, ?, ?, ?, ?)",
                    ("digest", "digest", "schedule", str(CHAT), "yesterday"),
                )
            engine = EngineProcess(home)
            await engine.start()  # raised with the engine's stderr when it exited instead
            await engine.stop(signal.SIGTERM)
        said = "".join(p.read_text(encoding="utf-8") for p in [home.root / "engine-1.err", *home.root.glob("logs/*")])
        assert "a run of task 'digest' noted under way cannot be read; removed" in said
        assert "Traceback" not in said
        assert store.runs_under_way() == ()


def test_a_version_3_scheduler_db_keeps_its_notes_and_takes_a_second_of_a_name(tmp_path: Path) -> None:
    """Version 3 keyed `runs` by the log name alone: opened, its note is kept, and a second run of the name
    is noted beside it (it replaced the first before)."""
    path = tmp_path / "scheduler.db"
    with closing(sqlite3.connect(path)) as connection, connection:
        connection.execute(
            "CREATE TABLE runs (log_name TEXT PRIMARY KEY, task TEXT NOT NULL, origin TEXT NOT NULL,"
            " inject_into TEXT, started_at INTEGER NOT NULL)"
        )
        connection.execute("INSERT INTO runs VALUES ('digest', 'digest', 'schedule', 'burst:one-chat', 1000)")
        connection.execute("PRAGMA user_version = 3")
    store = ScheduleStore(path)
    store.create()
    (noted,) = store.runs_under_way()
    assert (noted.log_name, noted.inject_into, noted.answer) == ("digest", CHAT, None)
    answer = NotedAnswer("a1", "the digest", noted.started_at + timedelta(seconds=2))
    store.answer_waits(noted, answer)
    store.run_started(replace(noted, started_at=noted.started_at + timedelta(seconds=3)))
    assert [run.answer for run in store.runs_under_way()] == [answer, None]
