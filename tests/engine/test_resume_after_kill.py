"""A real `klaw engine` SIGKILLed with 30 acknowledged messages waiting for their debounce answers all
30 after restart, in one turn: the resume after a crash is not limited to the sliding window."""

from __future__ import annotations

import asyncio
import signal

import yaml

from klaw.engine.frames import OutboundFrame
from klaw.gateway.link import Backoff
from klaw.gateway.service import Gateway
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from tests.engine import short_socket_dir
from tests.gateway.test_engine_killed_mid_burst import BurstChannel
from tests.serve_helpers import STARTS_WITHIN, EngineProcess

MESSAGES = 30


class AnswerChannel(BurstChannel):
    """Collects replies and says when the first one came."""

    def __init__(self) -> None:
        super().__init__()
        self.answered = asyncio.Event()

    async def deliver(self, frame: OutboundFrame) -> None:
        await super().deliver(frame)
        self.answered.set()


def write_config(home: KlawHome, base_url: str, debounce_ms: int) -> None:
    config = {
        "models": {"fake/small": {"baseUrl": base_url, "contextBudget": 8000, "maxRetries": 0}},
        "routing": {"default": "fake/small"},
        "embedder": {"backend": "fake", "dim": 32},
        "processing": {"debounceMs": debounce_ms},
        "channels": {"web": {"enabled": False}},
        "summarizer": {"enabled": False},  # its background requests would join the turn's
    }
    home.config_file.write_text(yaml.safe_dump(config), encoding="utf-8")


async def test_thirty_acknowledged_messages_are_all_answered_after_sigkill() -> None:
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as server:
            write_config(home, server.base_url, debounce_ms=60_000)  # nothing is answered before the kill
            engine = EngineProcess(home)
            await engine.start()
            channel = AnswerChannel()
            gateway = Gateway(home, [channel], backoff=Backoff(initial=0.05, maximum=0.3))
            await gateway.start()
            try:
                texts = [f"message number {n}" for n in range(MESSAGES)]
                for text in texts:
                    await gateway.submit("burst", "one-chat", text)
                async with asyncio.timeout(STARTS_WITHIN):  # safety nets: each wait ends on what it waits for
                    await gateway.buffer.wait_for(lambda: gateway.buffer.acked >= MESSAGES)
                assert await engine.stop(signal.SIGKILL) == -signal.SIGKILL
                assert server.chat_requests == []

                write_config(home, server.base_url, debounce_ms=0)
                await engine.start()
                async with asyncio.timeout(STARTS_WITHIN):
                    await channel.answered.wait()
                assert await engine.stop(signal.SIGTERM) == 0
            finally:
                await gateway.stop()
        assert len(server.chat_requests) == 1
        body = server.chat_requests[0].body
        assert isinstance(body, dict)
        assert body["messages"][-1]["content"].split("\n") == texts
        assert [reply.text for reply in channel.replies] == ["echo: " + "\n".join(texts)]
