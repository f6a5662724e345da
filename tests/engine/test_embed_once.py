"""A person's message is embedded once when the embedder gives a query and a stored text the same vector
(docs/decisions/202-embed-once.md): the turn's query (auto-RAG) and the embedding queue's vector of the
stored message are one computation. An embedder with a query form of its own (e5's prefixes) still gets
both calls, each in its own form.

The engine runs through the library API (`Klaw`) with an embedder passed in as any caller's would be:
the fake hashed embedder, counting the texts it is asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from klaw import FunctionModel, Klaw, ManualClock
from klaw.llm.function_model import AgentInfo
from klaw.llm.messages import ChatMessage
from klaw.memory.auto_rag import HEADER
from klaw.memory.embedder.fake import FakeEmbedder
from klaw.memory.embedder.protocol import Vectors, WrappedEmbedder
from klaw.store.records import ChatRef

EARLIER = "the spare key to the boathouse is under the blue flowerpot by the door"
SMALL_TALK = ["we watched a film about sailing yesterday evening", "the weather turned cold and windy again"]
QUESTION = "where did we leave the spare key to the boathouse again?"
CONFIG = {
    "embedder": {"backend": "fake", "dim": 32},
    "summarizer": {"enabled": False},
    "context": {"slidingWindow": 2},
    "autoRag": {"minMessageTokens": 1},
}


class CountingEmbedder(WrappedEmbedder):
    """The fake embedder, counting every text it embeds; `embed` is the only form (MiniLM's kind)."""

    def __init__(self) -> None:
        super().__init__(FakeEmbedder(dim=32))
        self.stored: list[str] = []

    async def embed(self, texts: Sequence[str]) -> Vectors:
        self.stored.extend(texts)
        return await self._inner.embed(texts)


class PrefixedEmbedder(CountingEmbedder):
    """An e5-like embedder: queries in a form of their own ("query: "), so a query's vector is not a
    stored text's."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    async def embed_queries(self, texts: Sequence[str]) -> Vectors:
        self.queries.extend(texts)
        return await self._inner.embed([f"query: {text}" for text in texts])


async def converse(home: Path, embedder: CountingEmbedder) -> list[ChatMessage]:
    """Four turns on a 2-message window, the last asking about the first; the last turn's messages."""
    seen: list[list[ChatMessage]] = []

    def model(messages: Sequence[ChatMessage], info: AgentInfo) -> str:
        seen.append(list(messages))
        return "noted"

    async with Klaw(home, config=CONFIG, model=FunctionModel(model), embedder=embedder, clock=ManualClock()) as agent:
        for text in [EARLIER, *SMALL_TALK, QUESTION]:
            await agent.ask("alice", text)
        await agent.engine.embedding_queue.wait_idle()
        assert await agent.engine.store.vectors.count() == 8  # every message and reply has its vector
        # The question's stored vector is its stored form (not e5's query form), whoever computed it.
        stored_form = (await FakeEmbedder(dim=32).embed([QUESTION]))[0]
        nearest = await agent.engine.store.search.nearest(ChatRef("library", "alice"), stored_form, limit=1)
    assert nearest[0].message.content == QUESTION
    assert np.isclose(nearest[0].score, 0.0, atol=1e-5)
    return seen[-1]


async def test_a_message_is_embedded_once_for_its_query_and_its_storage(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    last = await converse(tmp_path / "home", embedder)
    recalled = "\n".join(m.content or "" for m in last if HEADER in (m.content or ""))
    assert EARLIER in recalled  # auto-RAG searched with the question's vector
    assert embedder.stored.count(QUESTION) == 1  # ... which the queue stored without asking again
    assert all(embedder.stored.count(text) == 1 for text in [EARLIER, *SMALL_TALK])


async def test_an_embedder_with_a_query_form_embeds_the_message_in_both_forms(tmp_path: Path) -> None:
    embedder = PrefixedEmbedder()
    last = await converse(tmp_path / "home", embedder)
    assert any(HEADER in (m.content or "") for m in last)
    assert embedder.queries.count(QUESTION) == 1
    assert embedder.stored.count(QUESTION) == 1  # the stored form, computed apart
