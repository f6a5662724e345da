"""Embedding wired into the engine (MessageProcessorEmbeddingTest, made durable;
docs/decisions/009-carried-over-requirements.md): the user's message and the final reply are queued as they
are saved, tool calls and results are not, the reply never waits for the embedder, failures show in /status,
and a restart finishes what the last run left.

The engine embeds through its `openai` backend over real HTTP to the fake OpenAI server, which holds,
hangs or refuses /v1/embeddings requests as a test scripts it. What is checked is what the queue writes to
storage (jobs, vectors by rowid), so these tests read the store directly, not the library's read API."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from klaw.llm.fake_server import FakeOpenAiServer, HangReply
from klaw.store.records import EmbeddingJobCounts, MessageType, StoredMessage
from klaw.store.sqlite.store import SqliteStore
from tests.engine.harness import CHAT, Harness, running_engine

QUESTION = "please remember that my sister's birthday party is on the fourteenth at the lake house"
EMBEDDING_MODEL = "nomic-embed-text"
# The fake server's vectors are 16 numbers long; no baseUrl: the harness points it at the fake server. A
# held request never times out during a test, so only a release (or a shutdown) ends it.
REMOTE_EMBEDDER: dict[str, Any] = {"backend": "openai", "model": EMBEDDING_MODEL, "dim": 16, "timeoutSeconds": 3600}


def held_request(server: FakeOpenAiServer) -> tuple[asyncio.Event, asyncio.Event]:
    """Script the next /v1/embeddings request to wait until `release` is set; `arrived` is set when it is in."""
    arrived, release = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        arrived.set()
        await release.wait()

    server.reply_embeddings(before=hold)
    return arrived, release


def hung_request(server: FakeOpenAiServer) -> asyncio.Event:
    """Script the next /v1/embeddings request to get no answer until the server closes; the event is set
    when it is in."""
    arrived = asyncio.Event()

    async def note_arrival() -> None:
        arrived.set()

    server.reply(HangReply(), endpoint="embeddings", before=note_arrival)
    return arrived


def embedding_inputs(server: FakeOpenAiServer) -> list[list[str]]:
    """The texts of every /v1/embeddings request the server received, request by request."""
    return [list(r.body["input"]) for r in server.requests if r.path == "/v1/embeddings"]


async def stored_messages(h: Harness) -> list[StoredMessage]:
    segment = await h.engine.store.segments.current(CHAT)
    return await h.engine.store.messages.window(segment.id, 20)


async def vector_rowids(h: Harness) -> set[int]:
    store = h.engine.store
    assert isinstance(store, SqliteStore)
    return await store.db.run(lambda c: {int(row[0]) for row in c.execute("SELECT rowid FROM vec_messages")})


async def caught_up(h: Harness) -> None:
    async with asyncio.timeout(10):
        await h.engine.embedding_queue.wait_idle()


async def test_reply_is_delivered_while_the_embedder_is_blocked(tmp_path: Path) -> None:
    async with running_engine(tmp_path, embedder=REMOTE_EMBEDDER) as h:
        arrived, release = held_request(h.server)
        async with asyncio.timeout(10):  # a turn that waited for the held embedding would never end
            reply = await h.turn(QUESTION)
        assert reply.text == f"echo: {QUESTION}"
        async with asyncio.timeout(10):
            await arrived.wait()  # the worker sent the user's message and waits for the server's answer
        assert embedding_inputs(h.server) == [[QUESTION]]
        assert await h.engine.store.vectors.count() == 0
        assert (await h.engine.embedding_queue.status()).pending == 2  # the user's message and the reply

        release.set()
        await caught_up(h)
        user, answer = await stored_messages(h)
        assert await vector_rowids(h) == {user.rowid, answer.rowid}
        assert await h.engine.store.embedding_jobs.counts() == EmbeddingJobCounts(0, 0)


async def test_final_reply_is_embedded_but_tool_calls_and_results_are_not(tmp_path: Path) -> None:
    async with running_engine(tmp_path, autoRag={"minMessageTokens": 1}, embedder=REMOTE_EMBEDDER) as h:
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
        embedded = [text for batch in embedding_inputs(h.server) for text in batch]
        assert sorted(embedded) == sorted([messages[0].content, messages[3].content])


async def test_permanent_failures_show_in_status(tmp_path: Path) -> None:
    async with running_engine(tmp_path, embedder=REMOTE_EMBEDDER) as h:
        # The server has the chat models but not the embedding model (never pulled, or misspelt): every
        # embedding request is a 404, which no retry can change, so the HTTP client fails it at once.
        h.server.known_models = [h.engine.config.models[m].provider_model_name(m) for m in h.engine.config.models]
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
        assert len(embedding_inputs(h.server)) >= 7  # the first try and six retries each
        [messages] = await h.engine.store.embedding_jobs.by_target()
        assert messages.last_error is not None and "HTTP 404" in messages.last_error
        status = (await h.engine.submit(CHAT, "/status")).command_reply
        assert status is not None and "Embedding queue: 0 pending, 2 failed" in status


async def test_restart_embeds_what_the_last_run_left_pending(tmp_path: Path) -> None:
    async with running_engine(tmp_path, embedder=REMOTE_EMBEDDER) as h:
        arrived = hung_request(h.server)
        await h.turn(QUESTION)
        async with asyncio.timeout(10):
            await arrived.wait()
    # shut down while the server had not answered: both jobs stay in embedding_jobs

    async with running_engine(tmp_path, embedder=REMOTE_EMBEDDER) as h:
        # The new engine's manual clock starts again at 09:00, behind the reply's job (due at the end
        # of the first run's debounce); a real clock has moved on by the time an engine restarts.
        await h.clock.advance(2)
        await caught_up(h)
        user, answer = await stored_messages(h)
        assert await vector_rowids(h) == {user.rowid, answer.rowid}
        assert await h.engine.store.embedding_jobs.counts() == EmbeddingJobCounts(0, 0)


async def test_http_retries_wait_on_the_engine_clock(tmp_path: Path) -> None:
    async with running_engine(tmp_path, embedder=REMOTE_EMBEDDER) as h:
        # The server is busy and asks to be retried in 25 s: the embedder's HTTP client waits them on the
        # engine's clock, which only this test moves (a real 25 s wait would outlast every timeout here).
        h.server.reply_error(429, message="slow down", retry_after=25, endpoint="embeddings")
        await h.turn(QUESTION)
        async with asyncio.timeout(10):
            await h.clock.wait_for_sleeper(25)
        assert await h.engine.store.vectors.count() == 0
        await h.clock.advance(25)
        await caught_up(h)
        user, answer = await stored_messages(h)
        assert await vector_rowids(h) == {user.rowid, answer.rowid}
        # The same batch, sent again after the wait (the reply's own may go between them: the queue takes
        # it once the turn has ended, decision 426).
        inputs = embedding_inputs(h.server)
        assert inputs.count(inputs[0]) == 2, inputs
        assert await h.engine.store.embedding_jobs.counts() == EmbeddingJobCounts(0, 0)
