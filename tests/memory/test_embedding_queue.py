"""The durable embedding queue (spec 001 MessageEmbeddingServiceTest, made durable): jobs in, vectors out,
retries with backoff on a manual clock, failures kept visible, pending work surviving a restart."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from klaw.config import EmbedderConfig
from klaw.engine.clock import ManualClock
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.embedder.fake import FakeEmbedder
from klaw.memory.embedder.openai_embedder import OpenAiEmbedder
from klaw.memory.embedding_queue import EmbeddingQueue, describe_error
from klaw.memory.ingestion import Ingestion
from klaw.store.records import ChatRef, EmbeddingJobCounts, MessageRecord, MessageType, Role, StoredMessage
from klaw.store.sqlite.store import SqliteStore
from tests.memory.stub_embedders import DIM, StubEmbedder

CHAT = ChatRef("console", "me")
MIN_TOKENS = 10
SECRET = "my locker combination is 31-17-4 and the spare key sits under the blue flower pot"
BACKOFF = [1, 2, 4, 8, 16, 32]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


async def open_store(path: Path, clock: ManualClock) -> SqliteStore:
    store = await SqliteStore.open(path, clock=clock.now)
    await store.vectors.bind_embedder(FakeEmbedder(DIM).model_id, DIM)
    return store


@pytest.fixture
async def store(tmp_path: Path, clock: ManualClock) -> AsyncIterator[SqliteStore]:
    opened = await open_store(tmp_path / "klaw.db", clock)
    try:
        yield opened
    finally:
        await opened.aclose()


def ingestion(tmp_path: Path, store: SqliteStore, queue: EmbeddingQueue | None = None) -> Ingestion:
    return Ingestion(
        ConversationLog(tmp_path / "conversations"),
        store,
        min_embed_tokens=MIN_TOKENS,
        on_embedding_queued=None if queue is None else queue.notify,
    )


def said(text: str, role: Role = Role.USER, message_type: MessageType = MessageType.TEXT) -> MessageRecord:
    return MessageRecord(CHAT, role, text, type=message_type)


async def vector_rowids(store: SqliteStore) -> set[int]:
    return await store.db.run(lambda c: {row[0] for row in c.execute("SELECT rowid FROM vec_messages")})


async def only_job_delay(store: SqliteStore, clock: ManualClock) -> tuple[int, float]:
    """(attempts, seconds until the next attempt) of the single pending job."""
    [job] = await store.embedding_jobs.due(clock.now() + timedelta(days=1), 10)
    return job.attempts, (job.next_attempt_at - clock.now()).total_seconds()


async def test_not_eligible_messages_get_no_job(tmp_path: Path, store: SqliteStore) -> None:
    accept = ingestion(tmp_path, store).accept
    await accept(said("thanks, ok"))  # below minMessageTokens
    await accept(said(SECRET, Role.ASSISTANT, MessageType.TOOL_CALL))
    await accept(said(SECRET, Role.TOOL, MessageType.TOOL_RESULT))
    await accept(said("", Role.SYSTEM, MessageType.SESSION_BREAK))
    assert await store.embedding_jobs.counts() == EmbeddingJobCounts(0, 0)
    queue = EmbeddingQueue(store, FakeEmbedder(DIM), ManualClock(), batch_size=8)
    assert await queue.run_until_idle() == 0
    assert await store.vectors.count() == 0


async def test_user_message_and_assistant_text_get_vectors(tmp_path: Path, store: SqliteStore) -> None:
    accept = ingestion(tmp_path, store).accept
    user = await accept(said(SECRET))
    reply = await accept(said("Noted: the spare key is under the blue flower pot, combination kept", Role.ASSISTANT))
    queue = EmbeddingQueue(store, FakeEmbedder(DIM), ManualClock(), batch_size=8)
    assert await queue.run_until_idle() == 2
    assert await vector_rowids(store) == {user.rowid, reply.rowid}
    assert await store.embedding_jobs.counts() == EmbeddingJobCounts(0, 0)
    assert (await queue.status()).embedded == 2


async def test_recovery_queues_the_messages_it_replays(tmp_path: Path, clock: ManualClock) -> None:
    log = ConversationLog(tmp_path / "conversations")
    await log.append(said(SECRET))  # logged, then the process died before the database insert
    store = await open_store(tmp_path / "klaw.db", clock)
    try:
        woken: list[bool] = []
        recovering = Ingestion(log, store, min_embed_tokens=MIN_TOKENS, on_embedding_queued=lambda: woken.append(True))
        assert await recovering.recover() == 1
        assert woken == [True]
        assert await EmbeddingQueue(store, FakeEmbedder(DIM), clock, batch_size=8).run_until_idle() == 1
    finally:
        await store.aclose()


async def test_duplicate_job_or_existing_vector_is_harmless(tmp_path: Path, store: SqliteStore) -> None:
    stored = await ingestion(tmp_path, store).accept(said(SECRET))
    queue = EmbeddingQueue(store, FakeEmbedder(DIM), ManualClock(), batch_size=8)
    await queue.run_until_idle()
    assert await store.embedding_jobs.enqueue_messages([stored.rowid]) == 1  # e.g. a reindex queues it again
    assert await queue.run_until_idle() == 1
    assert await vector_rowids(store) == {stored.rowid}
    assert await store.embedding_jobs.counts() == EmbeddingJobCounts(0, 0)


async def test_job_whose_message_is_gone_is_dropped(tmp_path: Path, store: SqliteStore) -> None:
    stored = await ingestion(tmp_path, store).accept(said(SECRET))
    await store.db.run(lambda c: c.execute("DELETE FROM messages WHERE rowid = ?", (stored.rowid,)))
    embedder = StubEmbedder()
    assert await EmbeddingQueue(store, embedder, ManualClock(), batch_size=8).run_until_idle() == 0
    assert embedder.batches == []
    assert await store.embedding_jobs.counts() == EmbeddingJobCounts(0, 0)


async def test_batches_follow_batch_size_and_report_progress(tmp_path: Path, store: SqliteStore) -> None:
    accept = ingestion(tmp_path, store).accept
    for i in range(5):
        await accept(said(f"{SECRET} number {i}"))
    embedder = StubEmbedder()
    seen: list[tuple[int, int]] = []
    queue = EmbeddingQueue(store, embedder, ManualClock(), batch_size=2)
    assert await queue.run_until_idle(progress=lambda done, total: seen.append((done, total))) == 5
    assert [len(batch) for batch in embedder.batches] == [2, 2, 1]
    assert seen == [(2, 5), (4, 5), (5, 5)]


async def test_embedder_exception_is_logged_without_content_and_not_raised(
    tmp_path: Path, store: SqliteStore, clock: ManualClock, caplog: pytest.LogCaptureFixture
) -> None:
    await ingestion(tmp_path, store).accept(said(SECRET))
    leaky = StubEmbedder(failures=1, error=ValueError(f"cannot embed {SECRET!r}"))
    queue = EmbeddingQueue(store, leaky, clock, batch_size=8)
    with caplog.at_level(logging.WARNING, logger="klaw.memory.embedding_queue"):
        assert await queue.run_until_idle() == 0
    assert "ValueError" in caplog.text and "1 item(s)" in caplog.text
    assert "locker" not in caplog.text and "31-17-4" not in caplog.text
    [job] = await store.embedding_jobs.due(clock.now() + timedelta(seconds=1), 10)
    assert job.last_error == "ValueError"  # a foreign exception's text might quote content: class only
    assert await store.vectors.count() == 0


def test_last_error_keeps_the_reason_of_klaws_own_errors() -> None:
    from klaw.memory.embedder.protocol import EmbedderError

    assert (
        describe_error(EmbedderError("HTTP 503 from http://h/v1\nmore")) == "EmbedderError: HTTP 503 from http://h/v1"
    )
    assert describe_error(RuntimeError("anything at all")) == "RuntimeError"
    assert len(describe_error(EmbedderError("x" * 1000))) < 250


async def test_embedder_that_fails_twice_then_recovers(tmp_path: Path, store: SqliteStore, clock: ManualClock) -> None:
    stored = await ingestion(tmp_path, store).accept(said(SECRET))
    flaky = StubEmbedder(failures=2)
    queue = EmbeddingQueue(store, flaky, clock, batch_size=8)
    assert await queue.run_until_idle() == 0
    assert await only_job_delay(store, clock) == (1, 1.0)
    await clock.advance(0.5)
    assert await queue.run_until_idle() == 0  # not due yet: the embedder is not asked
    assert len(flaky.batches) == 1
    await clock.advance(0.5)
    assert await queue.run_until_idle() == 0
    assert await only_job_delay(store, clock) == (2, 2.0)
    [job] = await store.embedding_jobs.due(clock.now() + timedelta(seconds=2), 1)
    assert job.last_error is not None and job.last_error.startswith("EmbedderError: the embedding server")
    await clock.advance(2)
    assert await queue.run_until_idle() == 1
    assert await vector_rowids(store) == {stored.rowid}
    assert await store.embedding_jobs.counts() == EmbeddingJobCounts(0, 0)


async def test_failure_after_the_32_second_retry_is_marked_failed_and_visible(
    tmp_path: Path, store: SqliteStore, clock: ManualClock
) -> None:
    stored = await ingestion(tmp_path, store).accept(said(SECRET))
    broken = StubEmbedder(failures=1000)
    queue = EmbeddingQueue(store, broken, clock, batch_size=8)
    for attempt, delay in enumerate(BACKOFF, start=1):
        await queue.run_until_idle()
        assert await only_job_delay(store, clock) == (attempt, float(delay))
        await clock.advance(delay)
    await queue.run_until_idle()  # the 7th try, after the 32 s wait, fails too
    assert len(broken.batches) == 7
    assert await store.embedding_jobs.counts() == EmbeddingJobCounts(pending=0, failed=1)
    status = await queue.status()
    assert (status.pending, status.failed, status.embedded, status.running) == (0, 1, 0, False)
    assert await store.embedding_jobs.next_due_at() is None
    await clock.advance(3600)
    assert await queue.run_until_idle() == 0 and len(broken.batches) == 7  # failed jobs are not retried alone

    broken.failures = 0
    assert await store.embedding_jobs.retry_failed() == 1
    assert await queue.run_until_idle() == 1
    assert await vector_rowids(store) == {stored.rowid}
    assert await store.embedding_jobs.counts() == EmbeddingJobCounts(0, 0)


async def test_a_text_the_endpoint_rejects_does_not_hold_back_its_batch(
    tmp_path: Path, store: SqliteStore, clock: ManualClock
) -> None:
    accept = ingestion(tmp_path, store).accept
    stored = [await accept(said(f"{SECRET} number {i}")) for i in range(2)]
    too_long = await accept(said("a pasted document " * 300))  # third of nine jobs, with eight good ones
    stored += [too_long] + [await accept(said(f"{SECRET} number {i}")) for i in range(2, 8)]
    async with FakeOpenAiServer(embedding_dim=DIM, max_input_tokens=500) as server:
        config = EmbedderConfig(backend="openai", base_url=server.base_url, model="nomic-embed-text", dim=DIM)
        embedder = OpenAiEmbedder(config, env={})
        try:
            queue = EmbeddingQueue(store, embedder, clock, batch_size=9)
            assert await queue.run_until_idle() == 8
            calls = [r for r in server.requests if r.path == "/v1/embeddings"]
            # 9 -> 4 (holds it) + 5; 4 -> 2 + 2 (holds it); 2 -> 1 (it) + 1: seven calls, not one per text
            assert [len(r.body["input"]) for r in calls] == [9, 4, 2, 2, 1, 1, 5]
            assert await vector_rowids(store) == {m.rowid for m in stored} - {too_long.rowid}
            [job] = await store.embedding_jobs.due(clock.now() + timedelta(days=1), 10)
            assert (job.target_rowid, job.attempts) == (too_long.rowid, 1)
            assert job.last_error is not None and "HTTP 400" in job.last_error
        finally:
            await embedder.aclose()


async def test_an_outage_fails_the_batch_whole_without_splitting(
    tmp_path: Path, store: SqliteStore, clock: ManualClock
) -> None:
    accept = ingestion(tmp_path, store).accept
    for i in range(4):
        await accept(said(f"{SECRET} number {i}"))
    down = StubEmbedder(failures=1)  # the server cannot be reached: any batch would fail
    assert await EmbeddingQueue(store, down, clock, batch_size=8).run_until_idle() == 0
    assert [len(batch) for batch in down.batches] == [4]
    jobs = await store.embedding_jobs.due(clock.now() + timedelta(seconds=1), 10)
    assert [job.attempts for job in jobs] == [1, 1, 1, 1]


async def test_unknown_target_is_marked_failed_not_looped_on(store: SqliteStore, clock: ManualClock) -> None:
    await store.db.run(
        lambda c: c.execute(
            "INSERT INTO embedding_jobs (target, target_rowid, next_attempt_at, created_at) VALUES ('nowhere', 1, 0, 0)"
        )
    )
    assert await EmbeddingQueue(store, FakeEmbedder(DIM), clock, batch_size=8).run_until_idle() == 0
    assert await store.embedding_jobs.counts() == EmbeddingJobCounts(pending=0, failed=1)


async def test_worker_wakes_on_notify_and_again_after_backoff(
    tmp_path: Path, store: SqliteStore, clock: ManualClock
) -> None:
    embedder = StubEmbedder()
    queue = EmbeddingQueue(store, embedder, clock, batch_size=8)
    accept = ingestion(tmp_path, store, queue).accept
    queue.start()
    try:
        async with asyncio.timeout(10):
            first = await accept(said(SECRET))
            await queue.wait_idle()
            assert await vector_rowids(store) == {first.rowid}

            embedder.failures = 1
            second = await accept(said(f"{SECRET}, and the bike lock is 0420"))
            await queue.wait_idle()
            assert await only_job_delay(store, clock) == (1, 1.0)
            await clock.advance(1)  # the worker sleeps on the clock, not on wall time
            await queue.wait_idle()
            assert await vector_rowids(store) == {first.rowid, second.rowid}
            status = await queue.status()
            assert (status.pending, status.failed, status.embedded, status.running) == (0, 0, 2, True)
    finally:
        await queue.aclose()
    assert not (await queue.status()).running


async def test_closing_with_jobs_pending_and_reopening_embeds_them(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "klaw.db"
    store = await open_store(path, clock)
    stuck = StubEmbedder(blocked=True)
    queue = EmbeddingQueue(store, stuck, clock, batch_size=8)
    accept = ingestion(tmp_path, store, queue).accept
    queue.start()
    stored: list[StoredMessage] = [await accept(said(f"{SECRET} ({i})")) for i in range(3)]
    async with asyncio.timeout(10):
        await stuck.entered.wait()  # the worker is inside embed() when the engine stops
    await queue.aclose()
    await store.aclose()

    reopened = await open_store(path, clock)
    try:
        assert await reopened.embedding_jobs.counts() == EmbeddingJobCounts(pending=3, failed=0)
        assert await reopened.vectors.count() == 0
        resumed = EmbeddingQueue(reopened, FakeEmbedder(DIM), clock, batch_size=8)
        resumed.start()  # no notify needed: start looks for what an earlier run left
        async with asyncio.timeout(10):
            await resumed.wait_idle()
        await resumed.aclose()
        assert await vector_rowids(reopened) == {s.rowid for s in stored}
        assert await reopened.embedding_jobs.counts() == EmbeddingJobCounts(0, 0)
    finally:
        await reopened.aclose()
