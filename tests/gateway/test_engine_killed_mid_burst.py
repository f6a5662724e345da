"""No loss, no duplicates: a burst of 200 messages, the engine SIGKILLed in the middle and restarted.

The engine runs as a real `klaw engine` subprocess (so it can really be killed) on a KLAW_HOME whose
engine.yaml points at the fake OpenAI server in this process. The gateway runs here. Afterwards
the engine's log and database must hold each of the 200 message ids exactly once.
"""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from pathlib import Path

import yaml

from klaw.engine.frames import DeltaFrame, OutboundFrame
from klaw.gateway.link import Backoff
from klaw.gateway.service import Gateway
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.memory.conversation_log import ConversationLog
from klaw.store.records import Role
from klaw.store.sqlite.store import SqliteStore
from tests.engine import short_socket_dir
from tests.serve_helpers import STARTS_WITHIN, EngineProcess

MESSAGES = 200
CHATS = 4
KILL_AFTER_ACKS = 50


class BurstChannel:
    """A channel that only collects what the engine sends back."""

    name = "burst"
    streaming = False

    def __init__(self) -> None:
        self.replies: list[OutboundFrame] = []

    async def start(self, gateway: Gateway) -> None: ...

    async def stop(self) -> None: ...

    async def deliver(self, frame: OutboundFrame) -> None:
        self.replies.append(frame)

    async def delta(self, frame: DeltaFrame) -> None: ...


def write_config(home: KlawHome, base_url: str, *, web: bool = False) -> None:
    """engine.yaml for the fake model at `base_url`; the web page on a port the kernel picks if `web`."""
    config = {
        "models": {"fake/small": {"baseUrl": base_url, "contextBudget": 4000, "maxRetries": 0}},
        "routing": {"default": "fake/small"},
        "embedder": {"backend": "fake", "dim": 32},
        "processing": {"debounceMs": 30},
        "channels": {"web": {"enabled": True, "port": 0} if web else {"enabled": False}},
    }
    home.config_file.write_text(yaml.safe_dump(config), encoding="utf-8")


async def test_engine_killed_mid_burst_loses_nothing_and_duplicates_nothing() -> None:
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as server:
            write_config(home, server.base_url)
            engine = EngineProcess(home)
            await engine.start()
            channel = BurstChannel()
            gateway = Gateway(home, [channel], backoff=Backoff(initial=0.05, maximum=0.3))
            await gateway.start()
            try:
                ids: list[str] = []

                async def burst(numbers: range) -> None:
                    for n in numbers:
                        ids.append((await gateway.submit("burst", f"chat-{n % CHATS}", f"message number {n}")).id)

                await burst(range(0, 120))  # faster than the engine takes them: a backlog builds up
                async with asyncio.timeout(STARTS_WITHIN):  # a safety net: the wait ends on the acks
                    await gateway.buffer.wait_for(lambda: gateway.buffer.acked >= KILL_AFTER_ACKS)
                assert await engine.stop(signal.SIGKILL) == -signal.SIGKILL
                assert len(gateway.buffer) > 0  # the kill really was mid-burst
                await burst(range(120, MESSAGES))  # the engine is down: these wait on disk

                await engine.start()
                async with asyncio.timeout(STARTS_WITHIN):
                    await gateway.buffer.wait_for(lambda: len(gateway.buffer) == 0)
                assert await engine.stop(signal.SIGTERM) == 0
            finally:
                await gateway.stop()

        assert len(set(ids)) == MESSAGES
        log = ConversationLog(home.conversations)
        records = (await log.read([f for d in log.chat_dirs() for f in log.files(d)])).records
        in_log = Counter(record.id for record in records if record.role is Role.USER)
        assert {message_id: in_log[message_id] for message_id in ids} == dict.fromkeys(ids, 1)
        store = await SqliteStore.open(home.database_file("klaw.db"))
        try:
            stored = [await store.messages.get(message_id) for message_id in ids]
        finally:
            await store.aclose()
        assert all(message is not None for message in stored)
        texts = Counter(message.content for message in stored if message is not None)
        assert texts == Counter(f"message number {n}" for n in range(MESSAGES))
        assert not Path(home.socket_path).exists()
