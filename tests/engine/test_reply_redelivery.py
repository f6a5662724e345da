"""A reply is shown exactly once although the engine is SIGKILLed after closing its exchange and
before any channel showed it (docs/decisions/101-reply-redelivery.md): a real `klaw engine` process,
the fake OpenAI server, the real gateway; the kill is a real SIGKILL at two points: while no gateway
serves the chat's channel (the reply waits in the engine's memory), and while the gateway's channel
is showing the reply (so the gateway's confirmation never reaches that engine)."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from collections.abc import Callable

from klaw.engine.frames import AckFrame, HelloFrame, InboundFrame, OutboundFrame
from klaw.engine.runtime import Engine
from klaw.gateway.link import Backoff
from klaw.gateway.service import Gateway
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.store.records import ChatRef
from tests.engine import GatewayClient, short_socket_dir
from tests.engine.harness import engine_config
from tests.engine.test_resume_after_kill import AnswerChannel, write_config
from tests.gateway.test_engine_killed_mid_burst import BurstChannel
from tests.serve_helpers import EngineProcess

WAIT_SECONDS = 120.0  # a safety net: every wait ends on an event


class HoldingChannel(BurstChannel):
    """Shows replies; while `hold` is clear it stays inside `deliver` (the reply on screen, the
    gateway not yet told it may confirm it)."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = asyncio.Event()
        self.arrived = asyncio.Event()

    async def deliver(self, frame: OutboundFrame) -> None:
        await super().deliver(frame)
        self.arrived.set()
        await self.hold.wait()


async def until(condition: Callable[[], bool]) -> None:
    """Poll a condition on the engine's files: another process's, so there is no event to wait on."""
    async with asyncio.timeout(WAIT_SECONDS):
        while not condition():  # noqa: ASYNC110 - the engine is another process
            await asyncio.sleep(0.02)


def logged(home: KlawHome, kind: str) -> bool:
    return any(f'"type":"{kind}"' in p.read_text() for p in home.conversations.rglob("*.jsonl"))


def waiting_replies(home: KlawHome) -> int:
    with sqlite3.connect(f"file:{home.database_file('klaw.db')}?mode=ro", uri=True) as db:
        return int(db.execute("SELECT count(*) FROM undelivered_replies").fetchone()[0])


async def test_a_reply_cut_off_by_sigkill_arrives_once_after_restart() -> None:
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as server:
            write_config(home, server.base_url, debounce_ms=0)
            engine = EngineProcess(home)
            await engine.start()
            # 1. A gateway that serves another channel hands in the message: the reply has nowhere to go.
            client = await GatewayClient.connect(home.socket_path)
            await client.send(HelloFrame(channels=["other"]))
            await client.send(InboundFrame(id="m1", channel="burst", chat_id="one", text="what is a quokka"))
            assert await client.recv() == AckFrame(id="m1")
            await until(lambda: logged(home, "exchange_close"))
            assert await engine.stop(signal.SIGKILL) == -signal.SIGKILL
            await client.aclose()

            # 2. Restarted, the engine sends it to the gateway that serves the channel; killed again
            #    while the channel is showing it, before the gateway could confirm it.
            await engine.start()
            channel = HoldingChannel()
            gateway = Gateway(home, [channel], backoff=Backoff(initial=0.05, maximum=0.3))
            await gateway.start()
            try:
                async with asyncio.timeout(WAIT_SECONDS):
                    await channel.arrived.wait()
                assert await engine.stop(signal.SIGKILL) == -signal.SIGKILL
                channel.hold.set()

                # 3. Restarted once more, it sends the reply again: the gateway shows it once and confirms it.
                await engine.start()
                await until(lambda: waiting_replies(home) == 0)
            finally:
                await gateway.stop()
            assert [(r.text, r.reply_to) for r in channel.replies] == [("echo: what is a quokka", "m1")]
            first_id = channel.replies[0].id
            assert first_id is not None

            # 4. A new gateway (remembering nothing) after a clean restart: nothing old comes back, a new
            #    message is answered as usual.
            assert await engine.stop(signal.SIGTERM) == 0
            await engine.start()
            fresh = AnswerChannel()
            gateway = Gateway(home, [fresh], backoff=Backoff(initial=0.05, maximum=0.3))
            await gateway.start()
            try:
                await gateway.submit("burst", "one", "and a wombat?")
                async with asyncio.timeout(WAIT_SECONDS):
                    await fresh.answered.wait()
                assert await engine.stop(signal.SIGTERM) == 0
            finally:
                await gateway.stop()
        assert [r.text for r in fresh.replies] == ["echo: and a wombat?"]
        assert fresh.replies[0].id not in (None, first_id)
        assert len(server.chat_requests) == 2  # the reply was sent again, never asked for again
        # recovery working is no warning to the person (was: a raw "WARNING klaw.engine.delivery: sending again")
        restarted = (home.root / "engine-3.err").read_text()
        assert "sending again" not in restarted and "WARNING" not in restarted, restarted


async def test_a_task_answer_no_channel_showed_comes_after_restart_once_with_its_label() -> None:
    """A scheduled task's and a subagent's answer, written while no gateway served the chat's channel,
    are kept like a turn's reply: the next engine start sends them, labelled, under their record ids; once
    a gateway showed them they are not sent again. Before, they were in the history and never shown."""
    chat = ChatRef("burst", "one")
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as server:
            config = engine_config(server.base_url)
            engine = await Engine.start(home, config)
            try:  # nobody serves "burst": the answers wait in this engine's memory, lost when it stops
                await engine.processor.inject(chat, "Rain after five.", {"source": "task", "task": "weather"})
                spawned = {"source": "task", "task": "research", "origin": "spawn"}
                await engine.processor.inject(chat, "Three sources found.", spawned)
                assert waiting_replies(home) == 2
            finally:
                await engine.shutdown(timeout_seconds=5)

            for start in (1, 2):  # the first start sends both, the second nothing: the gateway confirmed them
                engine = await Engine.start(home, config)
                channel = AnswerChannel()
                gateway = Gateway(home, [channel], backoff=Backoff(initial=0.05, maximum=0.3))
                await gateway.start()
                try:
                    if start == 2:
                        await gateway.submit("burst", "one", "anything new?")
                    async with asyncio.timeout(WAIT_SECONDS):
                        await channel.answered.wait()
                    await until(lambda: waiting_replies(home) == 0)
                finally:
                    await engine.shutdown(timeout_seconds=5)
                    await gateway.stop()
                shown = [(r.text, r.task, r.spawned, r.id is not None) for r in channel.replies]
                if start == 1:
                    assert shown == [
                        ("Rain after five.", "weather", False, True),
                        ("Three sources found.", "research", True, True),
                    ]
                else:
                    assert shown == [("echo: anything new?", None, False, True)]
