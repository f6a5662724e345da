"""A task's run that finished, its answer logged, but was killed before the answer reached its chat:
the answer is sent to the chat at the next start, once, and the run is not run again (decision 324).

A real `klaw engine` over the fake OpenAI server: a chat's turn spawns a run (`subagent_spawn`) and its
next model call is held, so the turn keeps the chat's lock. The run answers; its answer, logged in the
run's log, waits for that lock to enter the chat, and the engine is SIGKILLed there: a point the test
reaches by what it sees (the run's final record in its log), not by timing. Before, the restart only
removed the run's note: the chat never got the answer (this test's wait for it timed out)."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from klaw.engine.frames import OutboundFrame
from klaw.engine.subagents import answer_id, run_answer_metadata
from klaw.gateway.link import Backoff
from klaw.gateway.service import Gateway
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer, HangReply, Reply, TextReply, ToolCallsReply, echo_last_user_message
from klaw.store.records import MessageRecord, Role
from tests.engine import short_socket_dir
from tests.engine.harness import CHAT as HARNESS_CHAT
from tests.engine.harness import running_engine
from tests.engine.test_cut_off_task_run import CHAT, TaskChannel, is_run
from tests.engine.test_resume_after_crash import NOW
from tests.engine.test_resume_after_kill import write_config
from tests.serve_helpers import STARTS_WITHIN, EngineProcess

ANSWER = "the lookup found 42 invoices"


class ChatChannel(TaskChannel):
    """`told` once a task's message came, `answered` once a reply to the person's message came."""

    def __init__(self) -> None:
        super().__init__()
        self.replied = asyncio.Event()

    async def deliver(self, frame: OutboundFrame) -> None:
        await super().deliver(frame)
        if frame.task is None:
            self.replied.set()


def run_answered(home: KlawHome) -> bool:
    """Whether the spawned run's final record is in its log (what the kill waits for)."""
    for path in home.conversations.glob("scheduler_spawn*/*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if ANSWER in line and "run_status" in json.loads(line).get("metadata", {}):
                return True
    return False


async def answer_logged(home: KlawHome) -> None:
    """Until the run's final record is in its log: the engine is another process, with no event to wait on."""
    while True:
        if run_answered(home):
            return
        await asyncio.sleep(0.02)


async def test_a_finished_runs_answer_a_kill_kept_from_its_chat_is_sent_once_at_the_next_start() -> None:
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        spawn = ToolCallsReply((("call_1", "subagent_spawn", '{"task_name": "lookup", "message": "find it"}'),))
        killed = False

        def reply(body: Mapping[str, Any]) -> Reply:
            if is_run(body):
                return TextReply(ANSWER)
            return echo_last_user_message(body) if killed else HangReply(None)  # holds the chat's turn

        async with FakeOpenAiServer(default_reply=reply) as server:
            server.reply(spawn)  # the chat turn's first call spawns the run
            write_config(home, server.base_url, debounce_ms=0)
            engine = EngineProcess(home)
            await engine.start()
            channel = ChatChannel()
            gateway = Gateway(home, [channel], backoff=Backoff(initial=0.05, maximum=0.3))
            await gateway.start()
            try:
                await gateway.submit(CHAT.channel, CHAT.chat_id, "look it up in the background")
                async with asyncio.timeout(STARTS_WITHIN):  # safety net: ends when the answer is logged
                    await answer_logged(home)
                assert await engine.stop(signal.SIGKILL) == -signal.SIGKILL
                assert not channel.told.is_set()  # the chat had not got it
                killed = True
                await engine.start()
                async with asyncio.timeout(STARTS_WITHIN):
                    await channel.told.wait()
                    await channel.replied.wait()  # the turn the kill cut off, answered again
                assert await engine.stop(signal.SIGTERM) == 0
            finally:
                await gateway.stop()
            runs = [r for r in server.chat_requests if is_run(r.body)]
        told = [reply for reply in channel.replies if reply.task is not None]
        assert [" ".join(r.text.split()) for r in told] == [ANSWER]
        assert told[0].task == "lookup"
        assert len(runs) == 1  # not run again


async def test_an_answer_the_chat_already_holds_is_not_recorded_again(tmp_path: Path) -> None:
    """klaw stopped after the answer entered the chat but before the run's note went: the next start's
    `inject` under the same id records and sends nothing (the chat holds it; its delivery is decision 101's)."""
    async with running_engine(tmp_path) as h:
        final = MessageRecord(CHAT, Role.ASSISTANT, ANSWER, metadata={"run_status": "completed"}, created_at=NOW)
        once = (answer_id(final), final.created_at)
        metadata = run_answer_metadata("lookup", "spawn")
        await h.engine.processor.inject(HARNESS_CHAT, ANSWER, metadata, once)
        await h.engine.processor.inject(HARNESS_CHAT, ANSWER, metadata, once)  # the next start's try
        assert [m.text for m in await h.engine.chats.history(HARNESS_CHAT)] == [ANSWER]
    assert [o.text for o in h.delivered] == [ANSWER]  # sent once, not a second time
