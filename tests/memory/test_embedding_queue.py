"""The durable embedding queue (MessageEmbeddingServiceTest, made durable;
docs/decisions/009-carried-over-requirements.md): jobs in, vectors out, retries with backoff on a manual
clock, failures kept visible, pending work surviving a restart.

Where the embedder must fail, hang or be watched, it is the real `openai` embedder over HTTP to the fake
OpenAI server, which answers, refuses (an HTTP error, an unserved model) or holds /v1/embeddings requests
as a test scripts it and records what it was sent. Its HTTP client makes no retries of its own
(`max_retries=0`) and would wait on the manual clock anyway, so the only backoff is the queue's."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest

from klaw.config import EmbedderConfig
from klaw.engine.clock import ManualClock
from klaw.llm.fake_server import FakeOpenAiServer, HangReply
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.embedder.fake import FakeEmbedder
from klaw.memory.embedder.openai_embedder import OpenAiEmbedder
from klaw.memory.embedding_queue import EmbeddingQueue, describe_error
from klaw.memory.ingestion import Ingestion
from klaw.store.records import ChatRef, EmbeddingJobCounts, MessageRecord, MessageType, Role, StoredMessage
from klaw.store.sqlite.store import SqliteStore

CHAT = ChatRef("console", "me")
MIN_TOKENS = 10
SECRET = "my locker combination is 31-17-4 and the spare key sits under the blue flower pot"
BACKOFF = [1, 2, 4, 8, 16, 32]
DIM = 32  # of FakeEmbedder and of the fake server's vectors alike
EMBEDDING_MODEL = "nomic-embed-text"


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


async def open_store(path: Path, clock: ManualClock, embedder_id: str = FakeEmbedder(DIM).model_id) -> SqliteStore:
    store = await SqliteStore.open(path, clock=clock.now)
    await store.vectors.bind_embedder(embedder_id, DIM)
    return store


@pytest.fixture
async def store(tmp_path: Path, clock: ManualClock) -> AsyncIterator[SqliteStore]:
    opened = await open_store(tmp_path / "klaw.db", clock)
    try:
        yield opened
    finally:
        await opened.aclose()


@dataclass
class Remote:
    """The fake OpenAI server and an `OpenAiEmbedder` that calls it."""

    server: FakeOpenAiServer
    embedder: OpenAiEmbedder

    def inputs(self) -> list[list[str]]:
        """The texts of every /v1/embeddings request the server received, request by request."""
        return [list(r.body["input"]) for r in self.server.requests if r.path == "/v1/embeddings"]


def remote_embedder(server: FakeOpenAiServer, clock: ManualClock) -> OpenAiEmbedder:
    """The openai embedder on `server`, without HTTP retries (the queue's backoff is what is tested), its
    waits on `clock`, and a timeout no test reaches (a held request ends only when it is released)."""
    config = EmbedderConfig(
        backend="openai", base_url=server.base_url, model=EMBEDDING_MODEL, dim=DIM, timeout_seconds=3600
    )
    return OpenAiEmbedder(config, env={}, sleep=clock.sleep, max_retries=0)


@pytest.fixture
async def remote(store: SqliteStore, clock: ManualClock) -> AsyncIterator[Remote]:
    """A running fake server and its embedder, with `store`'s (empty) vector index bound to that embedder."""
    async with FakeOpenAiServer(embedding_dim=DIM) as server:
        embedder = remote_embedder(server, clock)
        try:
            await store.vectors.bind_embedder(embedder.model_id, embedder.dim)
            yield Remote(server, embedder)
        finally:
            await embedder.aclose()


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


async def test_job_whose_message_is_gone_is_dropped(
    tmp_path: Path, store: SqliteStore, clock: ManualClock, remote: Remote
) -> None:
    stored = await ingestion(tmp_path, store).accept(said(SECRET))
    await store.db.run(lambda c: c.execute("DELETE FROM messages WHERE rowid = ?", (stored.rowid,)))
    assert await EmbeddingQueue(store, remote.embedder, clock, batch_size=8).run_until_idle() == 0
    assert remote.inputs() == []  # the server was not asked
    assert await store.embedding_jobs.counts() == EmbeddingJobCounts(0, 0)


async def test_batches_follow_batch_size_and_report_progress(
    tmp_path: Path, store: SqliteStore, clock: ManualClock, remote: Remote
) -> None:
    accept = ingestion(tmp_path, store).accept
    texts = [f"{SECRET} number {i}" for i in range(5)]
    for text in texts:
        await accept(said(text))
    seen: list[tuple[int, int]] = []
    queue = EmbeddingQueue(store, remote.embedder, clock, batch_size=2)
    assert await queue.run_until_idle(progress=lambda done, total: seen.append((done, total))) == 5
    assert remote.inputs() == [texts[0:2], texts[2:4], texts[4:5]]
    assert seen == [(2, 5), (4, 5), (5, 5)]
    assert await store.vectors.count() == 5


async def test_embedder_exception_is_logged_without_content_and_not_raised(
    tmp_path: Path, store: SqliteStore, clock: ManualClock, remote: Remote, caplog: pytest.LogCaptureFixture
) -> None:
    await ingestion(tmp_path, store).accept(said(SECRET))
    # A server whose error message quotes the input back, as some do for a text they cannot handle.
    remote.server.reply_error(500, message=f"cannot embed {SECRET!r}: tokenizer failed", endpoint="embeddings")
    queue = EmbeddingQueue(store, remote.embedder, clock, batch_size=8)
    with caplog.at_level(logging.WARNING):  # the queue's log and the HTTP client's
        assert await queue.run_until_idle() == 0
    assert remote.inputs() == [[SECRET]]
    assert "EmbedderError" in caplog.text and "1 item(s)" in caplog.text
    assert "locker" not in caplog.text and "31-17-4" not in caplog.text
    [job] = await store.embedding_jobs.due(clock.now() + timedelta(seconds=1), 10)
    assert job.last_error is not None and job.last_error.startswith("EmbedderError: the server failed (HTTP 500")
    assert "locker" not in job.last_error and "31-17-4" not in job.last_error  # kept for /status: no content
    assert await store.vectors.count() == 0


def test_last_error_keeps_the_reason_of_klaws_own_errors() -> None:
    from klaw.memory.embedder.protocol import EmbedderError

    assert (
        describe_error(EmbedderError("HTTP 503 from http://h/v1\nmore")) == "EmbedderError: HTTP 503 from http://h/v1"
    )
    assert describe_error(RuntimeError("anything at all")) == "RuntimeError"
    assert len(describe_error(EmbedderError("x" * 1000))) < 250


async def test_embedder_that_fails_twice_then_recovers(
    tmp_path: Path, store: SqliteStore, clock: ManualClock, remote: Remote
) -> None:
    stored = await ingestion(tmp_path, store).accept(said(SECRET))
    for _ in range(2):  # the server is overloaded twice, then answers
        remote.server.reply_error(503, message="The server is overloaded", endpoint="embeddings")
    queue = EmbeddingQueue(store, remote.embedder, clock, batch_size=8)
    assert await queue.run_until_idle() == 0
    assert await only_job_delay(store, clock) == (1, 1.0)
    await clock.advance(0.5)
    assert await queue.run_until_idle() == 0  # not due yet: the embedder is not asked
    assert len(remote.inputs()) == 1
    await clock.advance(0.5)
    assert await queue.run_until_idle() == 0
    assert await only_job_delay(store, clock) == (2, 2.0)
    [job] = await store.embedding_jobs.due(clock.now() + timedelta(seconds=2), 1)
    assert job.last_error is not None and job.last_error.startswith("EmbedderError: the server failed (HTTP 503")
    await clock.advance(2)
    assert await queue.run_until_idle() == 1
    assert remote.inputs() == [[SECRET]] * 3
    assert await vector_rowids(store) == {stored.rowid}
    assert await store.embedding_jobs.counts() == EmbeddingJobCounts(0, 0)


async def test_failure_after_the_32_second_retry_is_marked_failed_and_visible(
    tmp_path: Path, store: SqliteStore, clock: ManualClock, remote: Remote
) -> None:
    stored = await ingestion(tmp_path, store).accept(said(SECRET))
    # The server does not serve the embedding model (never pulled, or misspelt): every request is a 404.
    remote.server.known_models = ["llama3.2"]
    queue = EmbeddingQueue(store, remote.embedder, clock, batch_size=8)
    for attempt, delay in enumerate(BACKOFF, start=1):
        await queue.run_until_idle()
        assert await only_job_delay(store, clock) == (attempt, float(delay))
        await clock.advance(delay)
    await queue.run_until_idle()  # the 7th try, after the 32 s wait, fails too
    assert remote.inputs() == [[SECRET]] * 7
    assert await store.embedding_jobs.counts() == EmbeddingJobCounts(pending=0, failed=1)
    status = await queue.status()
    assert (status.pending, status.failed, status.embedded, status.running) == (0, 1, 0, False)
    assert await store.embedding_jobs.next_due_at() is None
    await clock.advance(3600)
    assert await queue.run_until_idle() == 0 and len(remote.inputs()) == 7  # failed jobs are not retried alone
    [messages] = await store.embedding_jobs.by_target()
    assert messages.last_error is not None and "HTTP 404" in messages.last_error

    remote.server.known_models = None  # the model is pulled
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
        embedder = remote_embedder(server, clock)
        try:
            await store.vectors.bind_embedder(embedder.model_id, embedder.dim)
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
    tmp_path: Path, store: SqliteStore, clock: ManualClock, remote: Remote
) -> None:
    accept = ingestion(tmp_path, store).accept
    for i in range(4):
        await accept(said(f"{SECRET} number {i}"))
    # The server is down for this one request (any batch would fail); halves of the batch would be answered.
    remote.server.reply_error(503, message="Service Unavailable", endpoint="embeddings")
    assert await EmbeddingQueue(store, remote.embedder, clock, batch_size=8).run_until_idle() == 0
    assert [len(batch) for batch in remote.inputs()] == [4]
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
    tmp_path: Path, store: SqliteStore, clock: ManualClock, remote: Remote
) -> None:
    queue = EmbeddingQueue(store, remote.embedder, clock, batch_size=8)
    accept = ingestion(tmp_path, store, queue).accept
    queue.start()
    try:
        async with asyncio.timeout(10):
            first = await accept(said(SECRET))
            await queue.wait_idle()
            assert await vector_rowids(store) == {first.rowid}

            remote.server.reply_error(503, message="The server is overloaded", endpoint="embeddings")
            second = await accept(said(f"{SECRET}, and the bike lock is 0420"))
            await queue.wait_idle()
            assert await only_job_delay(store, clock) == (1, 1.0)
            await clock.advance(1)  # the worker sleeps on the clock, not on wall time
            await queue.wait_idle()
            assert await vector_rowids(store) == {first.rowid, second.rowid}
            assert remote.inputs() == [[first.content], [second.content], [second.content]]
            status = await queue.status()
            assert (status.pending, status.failed, status.embedded, status.running) == (0, 0, 2, True)
    finally:
        await queue.aclose()
    assert not (await queue.status()).running


async def test_closing_with_jobs_pending_and_reopening_embeds_them(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "klaw.db"
    async with FakeOpenAiServer(embedding_dim=DIM) as server:
        arrived = asyncio.Event()

        async def note_arrival() -> None:
            arrived.set()

        # The first /v1/embeddings request gets no answer until the server closes: the engine stops meanwhile.
        server.reply(HangReply(), endpoint="embeddings", before=note_arrival)
        stuck = remote_embedder(server, clock)
        store = await open_store(path, clock, stuck.model_id)
        queue = EmbeddingQueue(store, stuck, clock, batch_size=8)
        accept = ingestion(tmp_path, store, queue).accept
        queue.start()
        stored: list[StoredMessage] = [await accept(said(f"{SECRET} ({i})")) for i in range(3)]
        async with asyncio.timeout(10):
            await arrived.wait()  # the worker is inside embed(), waiting for the server, when the engine stops
        await queue.aclose()
        await stuck.aclose()
        await store.aclose()

        reopened = await open_store(path, clock, stuck.model_id)
        embedder = remote_embedder(server, clock)
        try:
            assert await reopened.embedding_jobs.counts() == EmbeddingJobCounts(pending=3, failed=0)
            assert await reopened.vectors.count() == 0
            resumed = EmbeddingQueue(reopened, embedder, clock, batch_size=8)
            resumed.start()  # no notify needed: start looks for what an earlier run left
            async with asyncio.timeout(10):
                await resumed.wait_idle()
            await resumed.aclose()
            assert await vector_rowids(reopened) == {s.rowid for s in stored}
            assert await reopened.embedding_jobs.counts() == EmbeddingJobCounts(0, 0)
            requests = [r.body["input"] for r in server.requests if r.path == "/v1/embeddings"]
            assert len(requests) == 2 and sorted(requests[-1]) == sorted(s.content for s in stored)
        finally:
            await embedder.aclose()
            await reopened.aclose()
