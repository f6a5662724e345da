"""A task's run ends when its work ends, though its chat is held by a turn waiting for an approval: the
task keeps firing, and the answers go into the chat once the turn is over, in order, once each, never
between the turn's tool call and its result; a `kill -9` while they wait has them sent at the next start
(decision 432).

Before, a run's answer waited for the chat with the run: the run counted as running until the approval was
answered (up to tools.approvalTimeoutSeconds), so every firing meanwhile was skipped as `busy` (newcomer13,
with a one-minute task), and a second run of a name could not start (a spawn was refused as busy)."""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
from collections.abc import Callable, Mapping
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import Any

from klaw.engine.frames import OutboundFrame
from klaw.engine.scheduler_loop import Scheduler
from klaw.gateway.link import Backoff
from klaw.gateway.service import Gateway
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer, HangReply, Reply, TextReply, ToolCallsReply, echo_last_user_message
from klaw.scheduling.schedules import TaskSchedule
from klaw.scheduling.task_store import ScheduledTask, ScheduleStore
from klaw.store.records import MessageType
from tests.engine import short_socket_dir
from tests.engine.test_cut_off_task_run import CHAT, TaskChannel, is_run
from tests.engine.test_resume_after_kill import write_config
from tests.engine.test_tool_approval import COMMAND, WEB, stand
from tests.serve_helpers import STARTS_WITHIN, EngineProcess


async def until(seen: Callable[[], bool]) -> None:
    """Until `seen()`: a state of the engine (or of its files, when it is another process), not a time."""
    while True:
        if seen():
            return
        await asyncio.sleep(0.02)


async def run_recorded(scheduler: Scheduler, fired_at: datetime) -> ScheduledTask:
    """The task once the run fired at `fired_at` is over and its outcome written: the runner lets go of the
    run a moment before the store's row says how it went, so reading the row right after would race."""
    async with asyncio.timeout(30):  # a safety net: on the old code the run waits with its answer
        while True:
            (task,) = await scheduler.list_tasks()
            written = task.last_run_at is not None and task.last_run_at >= fired_at and task.last_status
            if written and not scheduler.runner.is_running(task.name):
                return task
            await asyncio.sleep(0.02)


async def test_a_task_keeps_firing_while_an_approval_holds_its_chat_and_its_answers_follow_in_order(
    tmp_path: Path,
) -> None:
    async with stand(approvalTimeoutSeconds=3600) as s:
        answers = iter(f"answer {n}" for n in range(1, 10))

        def reply(body: Mapping[str, Any]) -> Reply:
            if is_run(body):
                return TextReply(next(answers))
            if body["messages"][-1]["role"] == "tool":
                return TextReply("Cleaned up.")
            return ToolCallsReply((("call_1", "host_exec", json.dumps({"command": COMMAND})),))

        s.server.default_reply = reply
        scheduler = s.engine.scheduler
        assert scheduler is not None
        await scheduler.add_task("tick", TaskSchedule.every("1m"), "tick", inject_into=WEB)
        asked = await s.ask("clean up my old backups")
        request_id, _ = await s.question()  # the turn holds the chat until the person answers

        for fired in range(1, 4):  # the task fires three times while the question waits
            await scheduler.wait_asleep()
            (task,) = await scheduler.list_tasks()
            assert task.next_run_at is not None
            fired_at = task.next_run_at
            await s.clock.advance((fired_at - s.clock.now()).total_seconds())
            await scheduler.wait_asleep()
            task = await run_recorded(scheduler, fired_at)
            assert task.last_status == "completed", task.last_status  # was `busy` from the second on
            assert sum(is_run(r.body) for r in s.server.chat_requests) == fired
        assert s.ran == []  # the turn still waits
        assert not [m for m in await s.engine.chats.history(WEB) if m.text.startswith("answer")]

        approved = await s.send(f"/approve {request_id}")
        frames = [await s.outbound() for _ in range(5)]
        assert [(f.reply_to, f.task, f.text) for f in frames] == [
            (approved, None, "Approved: host_exec runs now."),
            (asked, None, "Cleaned up."),
            (None, "tick", "answer 1"),
            (None, "tick", "answer 2"),
            (None, "tick", "answer 3"),
        ]
        history = [(m.type, m.text) for m in await s.engine.chats.history(WEB)]
        assert history[1:] == [  # never between the turn's tool call and its result
            (MessageType.TOOL_CALL, history[1][1]),
            (MessageType.TOOL_RESULT, f"ran: {COMMAND}"),
            (MessageType.TEXT, "Cleaned up."),
            (MessageType.TEXT, "answer 1"),
            (MessageType.TEXT, "answer 2"),
            (MessageType.TEXT, "answer 3"),
        ]
        await s.engine.shutdown(timeout_seconds=5)
        s.stopped = True
        assert ScheduleStore(s.home.scheduler_db).runs_under_way() == ()  # nothing left to send again
        assert not [f for f in s.early if isinstance(f, OutboundFrame)]


def spawned(body: Mapping[str, Any]) -> int:
    """How many of the turn's `subagent_spawn` calls were started (their results say so)."""
    return sum(1 for m in body["messages"] if m["role"] == "tool" and "Started a run" in str(m.get("content")))


def noted_answers(home: KlawHome) -> list[str]:
    """The answers scheduler.db keeps with their runs' notes, read as another process reads it."""
    if not home.scheduler_db.exists():
        return []
    with closing(sqlite3.connect(home.scheduler_db)) as connection:
        try:
            rows = connection.execute("SELECT answer FROM runs WHERE answer IS NOT NULL ORDER BY answered_at")
        except sqlite3.OperationalError:  # the old code's table has no such column
            return []
        return [str(answer) for (answer,) in rows.fetchall()]


async def test_two_waiting_answers_of_one_name_survive_a_kill_and_arrive_once_in_order(tmp_path: Path) -> None:
    """A real `klaw engine`: a chat's turn spawns `lookup`, then (its first run over) `lookup` again, and
    its next model call is held, so the turn keeps the chat; both answers wait. SIGKILL once scheduler.db
    keeps both (a state read from the file, not a time); the restarted engine sends both, in order, once."""
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        killed = False

        def spawn(message: str, body: Mapping[str, Any]) -> Reply:
            arguments = json.dumps({"task_name": "lookup", "message": message})
            return ToolCallsReply(((f"call_{len(body['messages'])}", "subagent_spawn", arguments),))

        def reply(body: Mapping[str, Any]) -> Reply:
            if is_run(body):
                return echo_last_user_message(body)  # the run answers with its request
            if killed:
                return echo_last_user_message(body)
            started = spawned(body)
            return spawn("first", body) if started == 0 else spawn("second", body) if started == 1 else HangReply(None)

        async def second_after_first() -> None:
            """The turn's second spawn waits until the first run is over (its answer noted)."""
            body = server.requests[-1].body  # this request's: recorded just before
            if not killed and isinstance(body, dict) and not is_run(body) and spawned(body) == 1:
                await until(lambda: bool(noted_answers(home)))

        async with FakeOpenAiServer(default_reply=reply, latency=second_after_first) as server:
            write_config(home, server.base_url, debounce_ms=0)
            engine = EngineProcess(home)
            await engine.start()
            channel = TaskChannel()
            gateway = Gateway(home, [channel], backoff=Backoff(initial=0.05, maximum=0.3))
            await gateway.start()
            try:
                await gateway.submit(CHAT.channel, CHAT.chat_id, "look it up twice in the background")
                async with asyncio.timeout(STARTS_WITHIN):  # a safety net: the old code refuses the second
                    await until(lambda: noted_answers(home) == ["echo: first", "echo: second"])
                assert await engine.stop(signal.SIGKILL) == -signal.SIGKILL
                assert not channel.told.is_set()
                killed = True
                write_config(home, server.base_url, debounce_ms=1500)  # the resumed turn after the answers
                await engine.start()
                async with asyncio.timeout(STARTS_WITHIN):
                    await until(lambda: len([r for r in channel.replies if r.task is not None]) >= 2)
                assert await engine.stop(signal.SIGTERM) == 0
            finally:
                await gateway.stop()
            runs = [r for r in server.chat_requests if is_run(r.body)]
        told = [" ".join(r.text.split()) for r in channel.replies if r.task is not None]
        assert told == ["echo: first", "echo: second"]  # in order, once each, after a restart that stopped cleanly
        assert len(runs) == 2  # not run again
        assert ScheduleStore(home.scheduler_db).runs_under_way() == ()
        assert answers_outside_exchanges(home) == 2  # the cut-off exchange closed before they went in (trial48)


def answers_outside_exchanges(home: KlawHome) -> int:
    """How many task answers the chat's log holds, each checked to be outside every exchange: written inside
    one a crash cut off, the exchange's readers (its messages, summary, `/forget`) took it as the turn's."""
    open_exchanges: set[str] = set()
    answers = 0
    for path in sorted((home.conversations / CHAT.log_dir_name).glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            metadata = row.get("metadata") or {}
            if row["type"] == MessageType.EXCHANGE_OPEN:
                open_exchanges.add(row["id"])
            elif row["type"] == MessageType.EXCHANGE_CLOSE:
                open_exchanges.discard(metadata["opened"])
            elif metadata.get("source") == "task":
                assert not open_exchanges, f"a task's answer inside an open exchange: {row['content']!r}"
                answers += 1
    return answers
