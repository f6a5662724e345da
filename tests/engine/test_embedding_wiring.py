"""Embedding wired into the engine (spec 000 MessageProcessorEmbeddingTest, made durable): the user's message
and the final reply are queued as they are saved, tool calls and results are not, the reply never waits
for the embedder, failures show in /status, and a restart finishes what the last run left."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from klaw.config import EmbedderConfig
from klaw.engine import runtime
from klaw.store.records import EmbeddingJobCounts, MessageType, StoredMessage
from tests.engine.harness import CHAT, Harness, running_engine
from tests.memory.stub_embedders import StubEmbedder

QUESTION = "please remember that my sister's birthday party is on the fourteenth at the lake house"


def use_embedder(monkeypatch: pytest.MonkeyPatch, embedder: StubEmbedder) -> None:
    def create(_config: EmbedderConfig) -> StubEmbedder:
        return embedder

    monkeypatch.setattr(runtime, "create_embedder", create)


async def stored_messages(h: Harness) -> list[StoredMessage]:
    segment = await h.engine.store.segments.current(CHAT)
    return await h.engine.store.messages.window(segment.id, 20)


async def vector_rowids(h: Harness) -> set[int]:
    return await h.engine.store.db.run(lambda c: {row[0] for row in c.execute("SELECT rowid FROM vec_messages")})


async def caught_up(h: Harness) -> None:
    async with asyncio.timeout(10):
        await h.engine.embedding_queue.wait_idle()


async def test_reply_is_delivered_while_the_embedder_is_blocked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stuck = StubEmbedder(blocked=True)
    use_embedder(monkeypatch, stuck)
    async with running_engine(tmp_path) as h:
        reply = await h.turn(QUESTION)
        assert reply.text == f"echo: {QUESTION}"
        async with asyncio.timeout(10):
            await stuck.entered.wait()  # the worker took the user's message and is stuck in embed()
        assert await h.engine.store.vectors.count() == 0
        assert (await h.engine.embedding_queue.status()).pending == 2  # the user's message and the reply

        stuck.gate.set()
        await caught_up(h)
        user, answer = await stored_messages(h)
        assert await vector_rowids(h) == {user.rowid, answer.rowid}
        assert await h.engine.store.embedding_jobs.counts() == EmbeddingJobCounts(0, 0)


async def test_final_reply_is_embedded_but_tool_calls_and_results_are_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = StubEmbedder()
    use_embedder(monkeypatch, embedder)
    async with running_engine(tmp_path, autoRag={"minMessageTokens": 1}) as h:
        h.server.reply_tool_calls(
            [("current_time", {"timezone": "UTC"})], content="Let me look at the clock before I answer you"
        )
        h.server.reply_text("It is nine in the morning, a fine time for coffee")
        await h.turn("what time is it where the server runs?")
        await caught_up(h)
        messages = await stored_messages(h)
        assert [m.record.type for m in messages] == [
            MessageType.TEXT,
            MessageType.TOOL_CALL,
            MessageType.TOOL_RESULT,
            MessageType.TEXT,
        ]
        assert await vector_rowids(h) == {messages[0].rowid, messages[3].rowid}
        embedded = [text for batch in embedder.batches for text in batch]
        assert sorted(embedded) == sorted([messages[0].content, messages[3].content])


async def test_permanent_failures_show_in_status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = StubEmbedder(failures=1000)
    use_embedder(monkeypatch, broken)
    async with running_engine(tmp_path) as h:
        status = (await h.engine.submit(CHAT, "/status")).command_reply
        assert status is not None and "Embedding queue: 0 pending, 0 failed" in status
        await h.turn(QUESTION)
        await caught_up(h)
        assert (await h.engine.embedding_queue.status()).pending == 2
        for _ in range(20):  # each step makes every pending job due (the longest wait is 32 s)
            if (await h.engine.store.embedding_jobs.counts()).failed == 2:
                break
            await h.clock.advance(32)
            await caught_up(h)
        assert await h.engine.store.embedding_jobs.counts() == EmbeddingJobCounts(pending=0, failed=2)
        assert len(broken.batches) >= 7  # the first try and six retries each
        status = (await h.engine.submit(CHAT, "/status")).command_reply
        assert status is not None and "Embedding queue: 0 pending, 2 failed" in status


async def test_restart_embeds_what_the_last_run_left_pending(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stuck = StubEmbedder(blocked=True)
    use_embedder(monkeypatch, stuck)
    async with running_engine(tmp_path) as h:
        await h.turn(QUESTION)
        async with asyncio.timeout(10):
            await stuck.entered.wait()
    # shut down with the embedder stuck: both jobs stay in embedding_jobs

    use_embedder(monkeypatch, StubEmbedder())
    async with running_engine(tmp_path) as h:
        # The new engine's manual clock starts again at 09:00, behind the reply's job (due at the end
        # of the first run's debounce); a real clock has moved on by the time an engine restarts.
        await h.clock.advance(2)
        await caught_up(h)
        user, answer = await stored_messages(h)
        assert await vector_rowids(h) == {user.rowid, answer.rowid}
        assert await h.engine.store.embedding_jobs.counts() == EmbeddingJobCounts(0, 0)
