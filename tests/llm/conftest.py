"""Fixtures for tests that talk HTTP to the fake OpenAI server."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import pytest

from klaw.config import ModelConfig
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.llm.openai_client import OpenAiChatClient

ClientFactory = Callable[..., OpenAiChatClient]


@pytest.fixture
async def openai_server() -> AsyncIterator[FakeOpenAiServer]:
    """A running `FakeOpenAiServer` on a free port of 127.0.0.1, stopped after the test."""
    async with FakeOpenAiServer() as server:
        yield server


@pytest.fixture
def sleeps() -> list[float]:
    """Every delay the clients made by `make_client` asked to sleep; nothing really waits."""
    return []


@pytest.fixture
async def make_client(openai_server: FakeOpenAiServer, sleeps: list[float]) -> AsyncIterator[ClientFactory]:
    """Builds `OpenAiChatClient`s pointed at `openai_server` (closed after the test).

    Keyword arguments are `ModelConfig` fields, plus `model_id`, `env` and `rand` for the client.
    """
    clients: list[OpenAiChatClient] = []

    async def record_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    def factory(
        model_id: str = "ollama/llama3.2",
        *,
        env: Mapping[str, str] | None = None,
        rand: Callable[[], float] = lambda: 0.5,
        **fields: Any,
    ) -> OpenAiChatClient:
        config = ModelConfig(**{"base_url": openai_server.base_url, **fields})
        client = OpenAiChatClient(model_id, config, sleep=record_sleep, env=env or {}, rand=rand)
        clients.append(client)
        return client

    yield factory
    for client in clients:
        await client.aclose()
