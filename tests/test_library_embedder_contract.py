"""A program's `embedder=` is held to the `Embedder` contract where klaw first uses it (decision 538, newcomer24
item 16): one returning `list[list[float]]` failed only in the background (`/status`: "the last try failed:
AttributeError") while search fell back to words. Now `Klaw.start` asks it for one vector and refuses a wrong
answer with `EmbedderError` (`WrongVectors`) saying what it returned and what the contract asks, and an answer
that goes wrong later is refused by every call, its words in `/status`. Through the fake OpenAI server and a
real home."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from klaw import EmbedderError, Klaw, ManualClock
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.memory.embedder.fake import FakeEmbedder


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAiServer]:
    async with FakeOpenAiServer() as running:
        yield running


def config(server: FakeOpenAiServer) -> dict[str, Any]:
    return {
        "summarizer": {"enabled": False},
        "autoRag": {"minMessageTokens": 1},  # every message embedded, however short
        "models": {"stand-in/echo": {"baseUrl": server.base_url}},
        "routing": {"default": "stand-in/echo"},
    }


class Answering:
    """An embedder of a program's own whose answer is `answer(texts)`; `right` calls first answer as the fake does."""

    model_id = "mine/v1"
    dim = 3

    def __init__(self, answer: Any, right: int = 0) -> None:
        self.answer, self.right, self.calls = answer, right, 0

    async def embed(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        if self.calls <= self.right:
            return await FakeEmbedder(dim=3).embed(texts)
        return self.answer(texts)

    async def aclose(self) -> None:
        pass


WRONG = [
    (lambda texts: [[1.0, 0.0, 0.0] for _ in texts], "returned list: it must return a float32 numpy array of"
     " shape (n, dim) = (1, 3), its rows L2-normalised; np.asarray(rows, dtype=np.float32) makes one"),
    (lambda texts: np.array([[1.0, 0.0, 0.0] for _ in texts]), "returned dtype float64"),
    (lambda texts: np.ones((len(texts), 3), dtype=np.float32), "returned a row of length 1.73"),
    (lambda texts: np.ones((len(texts), 4), dtype=np.float32) / 2, "returned an array of shape (1, 4) for 1 text"),
]  # fmt: skip


@pytest.mark.parametrize(("answer", "words"), WRONG)
async def test_a_wrong_answer_stops_the_start_saying_what_is_wrong(
    tmp_path: Path, server: FakeOpenAiServer, answer: Any, words: str
) -> None:
    with pytest.raises(EmbedderError) as refused:
        async with Klaw(tmp_path / "home", config=config(server), embedder=Answering(answer)):
            pass
    said = str(refused.value)
    assert said.startswith("embedder= Answering.embed "), said
    assert words in said, said
    async with Klaw(tmp_path / "home", config=config(server), embedder=Answering(answer, right=10**6)) as agent:
        assert await agent.ask("x", "hello") == "echo: hello"  # the refused start left the home usable


async def test_an_answer_gone_wrong_later_is_refused_and_said_in_status(
    tmp_path: Path, server: FakeOpenAiServer
) -> None:
    embedder = Answering(lambda texts: [[1.0, 0.0, 0.0] for _ in texts], right=1)  # the probe's answer is right
    async with Klaw(tmp_path / "home", config=config(server), embedder=embedder, clock=ManualClock()) as agent:
        assert await agent.ask("x", "my sister lives in Trondheim") == "echo: my sister lives in Trondheim"
        for _ in range(1200):  # the queue's first try comes a moment after the turn
            if "the last try failed" in (status := await agent.ask("x", "/status")):
                break
            await asyncio.sleep(0.05)
        assert await agent.engine.store.vectors.count() == 0
    assert "the last try failed: WrongVectors: embedder= Answering.embed returned list: it must return" in status
