"""A turn cut off by `kill -9` is closed as interrupted when its message is answered after the restart,
and forgetting either exchange never leaves the other without its message (decision 306).

A real `klaw engine` answers a gateway in this process over the fake OpenAI server: its first model
call asks for a tool, its second never answers, and the engine is SIGKILLed meanwhile. The restarted
engine answers the message in a new exchange. Then a person runs `klaw memory list` and
`klaw memory forget exchange N`, as commands. Before, the cut-off exchange stayed `open`, and
forgetting it erased the message the new exchange answered, whose id became unknown."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path

from klaw.gateway.link import Backoff
from klaw.gateway.service import Gateway
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer, HangReply
from klaw.store.exchange_records import exchange_close_record, exchange_open_record
from klaw.store.records import ExchangeStatus, Role
from tests.engine import short_socket_dir
from tests.engine.harness import CHAT as HARNESS_CHAT
from tests.engine.harness import running_engine
from tests.engine.test_resume_after_crash import NOW, said, stored_before_start
from tests.engine.test_resume_after_kill import AnswerChannel, write_config
from tests.engine.test_stable_exchange_ids import command, klaw
from tests.serve_helpers import STARTS_WITHIN, EngineProcess

ASKED = "what is on my schedule today"
CHAT = "burst:one-chat"
ASKED_BEFORE = "what did I plan for friday"


@asynccontextmanager
async def cut_off_then_answered() -> AsyncIterator[KlawHome]:
    """A home whose chat holds one message, a turn killed in its second model call and the turn the
    restart answered it with (engines stopped)."""
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as server:
            server.reply_tool_calls([("schedule_list", {})])
            second_call = asyncio.Event()

            async def reached() -> None:
                second_call.set()

            server.reply(HangReply(None), before=reached)  # the engine is killed while it waits for this one
            write_config(home, server.base_url, debounce_ms=0)
            engine = EngineProcess(home)
            await engine.start()
            channel = AnswerChannel()
            gateway = Gateway(home, [channel], backoff=Backoff(initial=0.05, maximum=0.3))
            await gateway.start()
            try:
                await gateway.submit("burst", "one-chat", ASKED)
                async with asyncio.timeout(STARTS_WITHIN):  # safety net: ends when the second call is made
                    await second_call.wait()
                assert await engine.stop(signal.SIGKILL) == -signal.SIGKILL
                assert channel.replies == []
                await engine.start()  # the message, unanswered, is answered again (echoed)
                async with asyncio.timeout(STARTS_WITHIN):
                    await channel.answered.wait()
                assert await engine.stop(signal.SIGTERM) == 0
            finally:
                await gateway.stop()
        assert [reply.text for reply in channel.replies] == [f"echo: {ASKED}"]
        yield home


def exchange_lines(listing: str) -> list[str]:
    return [line.strip() for line in listing.splitlines() if line.strip().startswith("exchange ")]


async def test_the_killed_turn_is_listed_as_interrupted_and_forgetting_it_keeps_the_answered_message(
    tmp_path: Path,
) -> None:
    async with cut_off_then_answered() as home:
        listed = exchange_lines(await klaw(home, "memory", "list", "--chat", CHAT))
        assert len(listed) == 2, listed
        assert listed[0].startswith("exchange 1:") and f"interrupted: {ASKED}" in listed[0]
        assert listed[1].startswith("exchange 2:") and f"completed: {ASKED}" in listed[1]

        said = await klaw(home, "memory", "forget", "exchange", "1", "--chat", CHAT, "--yes")
        assert "Forgot exchange 1" in said, said
        assert "exchange 2 answered them again" in " ".join(said.split()), said

        after = exchange_lines(await klaw(home, "memory", "list", "--chat", CHAT))
        assert len(after) == 1 and after[0].startswith("exchange 2:") and f"completed: {ASKED}" in after[0], after
        found = await klaw(home, "memory", "search", "schedule today", "--chat", CHAT)
        assert ASKED in " ".join(found.split()), found  # the message is still there


async def test_forgetting_the_answering_exchange_takes_the_cut_off_one_with_the_message(tmp_path: Path) -> None:
    async with cut_off_then_answered() as home:
        said = await klaw(home, "memory", "forget", "exchange", "2", "--chat", CHAT, "--yes")
        assert "Forgot exchange 2" in said, said
        assert "with exchange 1, the turn klaw stopping cut off" in " ".join(said.split()), said
        assert exchange_lines(await klaw(home, "memory", "list", "--chat", CHAT)) == []
        for part in home.conversations.rglob("*.jsonl"):
            assert ASKED not in part.read_text(encoding="utf-8")
            assert "schedule_list" not in part.read_text(encoding="utf-8")  # the cut-off round went too


async def test_an_exchange_a_crash_left_open_before_this_keeps_the_message_its_answer_needs(tmp_path: Path) -> None:
    """A chat a crash cut before decision 306: the killed turn's exchange still `open` beside the one that
    answered the same message. `/forget exchange 1` erases only the open one's records."""
    asked = said(ASKED_BEFORE, 10)
    killed = exchange_open_record(HARNESS_CHAT, asked.id, NOW - timedelta(minutes=10), 1)
    resumed = exchange_open_record(HARNESS_CHAT, asked.id, NOW - timedelta(minutes=5), 2)
    answer = said("here it is", 4.9, role=Role.ASSISTANT)
    closed = exchange_close_record(resumed, ExchangeStatus.COMPLETED, answer.id, NOW - timedelta(minutes=4.9))
    await stored_before_start(tmp_path, [asked, killed, resumed, answer, closed])
    async with running_engine(tmp_path) as h:
        reply = await command(h, "/forget exchange 1")
        assert reply.startswith("Forgot exchange 1"), reply
        assert "exchange 2 answered them again" in reply, reply
        assert [(t.id, t.status) for t in await h.engine.chats.turns(HARNESS_CHAT)] == [(2, "completed")]
        assert [m.text for m in await h.engine.chats.history(HARNESS_CHAT)] == [ASKED_BEFORE, "here it is"]
