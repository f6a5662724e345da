"""A whole engine on a temp KLAW_HOME, a manual clock, and the fake OpenAI server over real HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from klaw.config import EngineConfig
from klaw.engine.clock import ManualClock
from klaw.engine.delivery import Outbound
from klaw.engine.runtime import Engine
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.store.records import ChatRef

CHAT = ChatRef("console", "me")
# The `database` section every test engine gets unless a test gives its own: empty is SQLite in the
# home; tests/engine/test_postgres_engine.py points it at PostgreSQL to run whole scenarios there.
DATABASE: dict[str, Any] = {}


def engine_config(base_url: str, **overrides: Any) -> EngineConfig:
    """The test engine's config, `overrides` merged per section. A model or an `openai` embedder
    without a baseUrl talks to the fake server (its port is only known here)."""
    data: dict[str, Any] = {
        "models": {
            "fake/small": {"baseUrl": base_url, "contextBudget": 4000, "maxRetries": 0},
            "fake/large": {"baseUrl": base_url, "contextBudget": 32000, "maxRetries": 0},
        },
        "routing": {"default": "fake/small"},
        "embedder": {"backend": "fake", "dim": 32},
        # The summarizers call the model in the background, which would race tests' scripted replies;
        # tests of summaries turn them on (summarizer={"enabled": True}). Each exchange is summarized
        # at once, alone, unless a test asks for batches (batchExchanges): most tests look at one summary.
        "summarizer": {"enabled": False, "batchExchanges": 1},
        "database": dict(DATABASE),
    }
    for section, values in overrides.items():
        data.setdefault(section, {}).update(values)
    for model in data["models"].values():
        model.setdefault("baseUrl", base_url)
    if data["embedder"].get("backend") == "openai":
        data["embedder"].setdefault("baseUrl", base_url)
    if data["embedder"].get("backend") == "minilm":
        # A turn gives up on its query embedding after 2 s by default; on a loaded CI machine the real
        # model's first load can take longer, and the test would then measure the machine, not recall.
        # tests/engine/test_query_embedding_deadline.py sets its own deadline.
        data["embedder"].setdefault("queryTimeoutSeconds", 60)
    return EngineConfig.model_validate(data)


@dataclass
class Harness:
    engine: Engine
    server: FakeOpenAiServer
    clock: ManualClock
    home: KlawHome
    delivered: list[Outbound] = field(default_factory=list)
    arrived: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def say(self, text: str, chat: ChatRef = CHAT) -> None:
        await self.engine.submit(chat, text)

    async def turn(self, text: str, chat: ChatRef = CHAT) -> Outbound:
        """Send a message, let its debounce expire, and return the reply."""
        before = len(self.delivered)
        await self.say(text, chat)
        await self.clock.advance(self.engine.config.processing.debounce_ms / 1000)
        await self.wait_for_replies(before + 1)
        return self.delivered[-1]

    async def wait_for_replies(self, count: int) -> None:
        """Wait until `count` replies were delivered (turns cross real HTTP); 30 s is a safety net (a
        turn that loads the real MiniLM model on a loaded CI machine has taken over 10 s)."""
        async with asyncio.timeout(30), self.arrived:
            await self.arrived.wait_for(lambda: len(self.delivered) >= count)

    async def record(self, outbound: Outbound) -> None:
        async with self.arrived:
            self.delivered.append(outbound)
            self.arrived.notify_all()

    def last_request_messages(self) -> list[dict[str, Any]]:
        body = self.server.chat_requests[-1].body
        assert isinstance(body, dict)
        messages = body["messages"]
        assert isinstance(messages, list)
        return messages


@asynccontextmanager
async def running_engine(tmp_path: Any, **overrides: Any) -> AsyncIterator[Harness]:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    async with FakeOpenAiServer() as server:
        clock = ManualClock()
        engine = await Engine.start(home, engine_config(server.base_url, **overrides), clock=clock, listen=False)
        harness = Harness(engine, server, clock, home)
        engine.delivery.register("console", harness.record)
        engine.delivery.set_fallback(harness.record)
        try:
            yield harness
        finally:
            await engine.shutdown(timeout_seconds=5)
