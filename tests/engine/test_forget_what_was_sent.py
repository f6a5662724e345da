"""`/forget` over the engine socket right after a message was accepted (decisions 219, 277): `last` is that
message's exchange even when its turn has not opened one yet, every message stopped is answered at once
(erased, or stopped only), and none of them is answered again, neither later nor at the next start. The
fake OpenAI server holds a turn where a test needs one under way."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from klaw.engine.clock import ManualClock
from klaw.engine.frames import AckFrame, CommandFrame, HelloFrame, InboundFrame, OutboundFrame
from klaw.engine.runtime import Engine
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.store.records import ChatRef
from tests.engine import GatewayClient
from tests.engine.harness import engine_config
from tests.memory.archive_helpers import log_text

SECRET = "FORGET-WHAT-I-SENT-7731"
CHAT = ChatRef("web", "u1")
ERASED = "Stopped before answering: this conversation turn was forgotten (erased)."
KEPT = (  # no "/forget" in it: `klaw memory forget` through the socket stops turns too
    "Stopped before answering: something in this chat was forgotten while this message waited for its answer;"
    " send it again for one."
)
DEBOUNCE_SECONDS = 1.5  # the engine's default debounce


@pytest.fixture
def home() -> Iterator[KlawHome]:
    root = Path(tempfile.mkdtemp(prefix="klaw-", dir="/tmp"))  # short: the socket path
    try:
        klaw_home = KlawHome(root)
        initialise_home(klaw_home)
        yield klaw_home
    finally:
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class Running:
    engine: Engine
    gateway: GatewayClient
    clock: ManualClock
    early: list[OutboundFrame] = field(default_factory=list)  # outbound frames read while waiting for an ack

    async def send(self, msg_id: str, text: str) -> None:
        await self.gateway.send(InboundFrame(id=msg_id, channel=CHAT.channel, chat_id=CHAT.chat_id, text=text))
        while (frame := await self.gateway.recv()) != AckFrame(id=msg_id):  # accepted: stored and acknowledged
            if isinstance(frame, AckFrame):
                continue  # a command's, read after its answer
            assert isinstance(frame, OutboundFrame)
            self.early.append(frame)

    async def outbound_until(self, reply_to: str) -> list[OutboundFrame]:
        """Every outbound frame up to and with the one answering `reply_to` (acks left out)."""
        seen, self.early = self.early, []
        while not (seen and seen[-1].reply_to == reply_to):
            frame = await self.gateway.recv()
            if isinstance(frame, OutboundFrame):
                seen.append(frame)
        return seen

    async def command(self, msg_id: str, command: str, args: str) -> list[OutboundFrame]:
        frame = CommandFrame(id=msg_id, channel=CHAT.channel, chat_id=CHAT.chat_id, command=command, args=args)
        await self.gateway.send(frame)
        return await self.outbound_until(msg_id)

    async def history(self) -> str:
        return "\n".join(m.text for m in await self.engine.chats.history(CHAT))


@asynccontextmanager
async def running(home: KlawHome, server: FakeOpenAiServer) -> AsyncIterator[Running]:
    clock = ManualClock()
    engine = await Engine.start(home, engine_config(server.base_url), clock=clock)
    gateway = await GatewayClient.connect(home.socket_path)
    try:
        await gateway.send(HelloFrame(channels=[CHAT.channel]))
        yield Running(engine, gateway, clock)
    finally:
        await gateway.aclose()
        await engine.shutdown(timeout_seconds=5)


async def nothing_answered_after_a_restart(home: KlawHome, server: FakeOpenAiServer, stopped: set[str]) -> None:
    """At the next start no stopped message gets a turn: a new message's reply is the first thing answered."""
    asked = len(server.chat_requests)
    async with running(home, server) as r:
        await r.clock.advance(DEBOUNCE_SECONDS)  # a resumed message's turn would run now
        await r.send("after-restart", "a new question")
        await r.clock.advance(DEBOUNCE_SECONDS)
        frames = await r.outbound_until("after-restart")
        assert not {f.reply_to for f in frames} & stopped
        assert frames[-1].answers == ("after-restart",) and frames[-1].text == "echo: a new question"
    assert len(server.chat_requests) == asked + 1


async def test_forget_last_right_after_a_message_erases_that_message_not_the_one_before(home: KlawHome) -> None:
    async with FakeOpenAiServer() as server:
        async with running(home, server) as r:
            await r.send("m-1", "the weather is nice today")
            await r.clock.advance(DEBOUNCE_SECONDS)
            assert [f.text for f in await r.outbound_until("m-1")] == ["echo: the weather is nice today"]
            await r.send("m-2", f"my pin is {SECRET}")  # its turn has not begun: still in its debounce

            frames = await r.command("c-1", "forget", "last")

            assert [(f.reply_to, f.kind, f.text) for f in frames[:-1]] == [("m-2", "error", ERASED)]
            assert frames[-1].text.startswith("Stopped the turn under way in this chat, then forgot exchange 2:")
            await r.clock.advance(10 * DEBOUNCE_SECONDS)
            assert SECRET not in await r.history()
            assert "the weather is nice today" in await r.history()
            assert len(server.chat_requests) == 1  # the erased message went to no model
        assert SECRET not in log_text(home)
        await nothing_answered_after_a_restart(home, server, {"m-2"})


async def test_forget_last_while_a_turn_runs_erases_the_message_sent_after_it(home: KlawHome) -> None:
    asked, released = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        asked.set()
        await released.wait()

    async with FakeOpenAiServer() as server:
        async with running(home, server) as r:
            server.reply_text("a slow answer", before=hold)
            await r.send("m-1", "a slow question")
            await r.clock.advance(DEBOUNCE_SECONDS)
            await asyncio.wait_for(asked.wait(), 30)  # m-1's turn is under way, held by the model
            await r.send("m-2", f"and my pin is {SECRET}")  # waits for its own turn

            frames = await r.command("c-1", "forget", "last")
            released.set()

            notices = sorted((f.reply_to, f.kind, f.text) for f in frames[:-1])
            assert notices == [("m-1", "error", KEPT), ("m-2", "error", ERASED)]
            assert frames[-1].text.startswith("Stopped the turn under way in this chat, then forgot exchange 2:")
            await r.clock.advance(10 * DEBOUNCE_SECONDS)
            assert SECRET not in await r.history()
            assert "a slow question" in await r.history()  # stopped, not erased: the person sends it again
        assert SECRET not in log_text(home)
        await nothing_answered_after_a_restart(home, server, {"m-1", "m-2"})


async def test_a_turn_stopped_by_another_forget_is_told_so_and_not_answered_at_the_next_start(home: KlawHome) -> None:
    asked, released = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        asked.set()
        await released.wait()

    async with FakeOpenAiServer() as server:
        async with running(home, server) as r:
            await r.send("m-1", "an old topic")
            await r.clock.advance(DEBOUNCE_SECONDS)
            await r.outbound_until("m-1")
            server.reply_text("a slow answer", before=hold)
            await r.send("m-2", "a slow question")
            await r.clock.advance(DEBOUNCE_SECONDS)
            await asyncio.wait_for(asked.wait(), 30)

            frames = await r.command("c-1", "forget", "exchange 1")  # not the turn under way
            released.set()

            assert [(f.reply_to, f.kind, f.text) for f in frames[:-1]] == [("m-2", "error", KEPT)]
            assert frames[-1].text.startswith("Stopped the turn under way in this chat, then forgot exchange 1:")
            assert "an old topic" not in await r.history()
        await nothing_answered_after_a_restart(home, server, {"m-2"})


async def test_forget_last_stops_a_message_waiting_for_the_turn_before_it_and_it_never_reaches_the_model(
    home: KlawHome,
) -> None:
    """m-2's debounce ends while m-1's turn is held by the model, so m-2 waits for the chat's turn; it used
    to run once m-1's turn was stopped: the model got the pin and the reply echoed it, erased only after."""
    asked, released = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        asked.set()
        await released.wait()

    async with FakeOpenAiServer() as server:
        async with running(home, server) as r:
            server.reply_text("a slow answer", before=hold)
            await r.send("m-1", "a slow question")
            await r.clock.advance(DEBOUNCE_SECONDS)
            await asyncio.wait_for(asked.wait(), 30)  # m-1's turn is under way, held by the model
            await r.send("m-2", f"and my pin is {SECRET}")
            await r.clock.advance(DEBOUNCE_SECONDS)  # out of its debounce: waiting for m-1's turn to end
            assert r.engine.processor.waiting_chats == 0  # the debounce has handed m-2 to its turn

            frames = await r.command("c-1", "forget", "last")
            released.set()

            notices = sorted((f.reply_to, f.kind, f.text) for f in frames[:-1])
            assert notices == [("m-1", "error", KEPT), ("m-2", "error", ERASED)]
            assert frames[-1].text.startswith("Stopped the turn under way in this chat, then forgot exchange 2:")
            await r.clock.advance(10 * DEBOUNCE_SECONDS)
            await r.send("m-3", "anything else?")  # the chat goes on; nothing of m-2 was answered before this
            await r.clock.advance(DEBOUNCE_SECONDS)
            later = await r.outbound_until("m-3")
            assert [(f.reply_to, f.text) for f in later] == [("m-3", "echo: anything else?")]
            assert all(SECRET not in str(request) for request in server.chat_requests)  # the model never saw it
            assert SECRET not in await r.history()
        assert SECRET not in log_text(home)
        await nothing_answered_after_a_restart(home, server, {"m-1", "m-2"})
