"""The durable embedding queue's table: jobs are born with their message, and retried, failed and counted."""

from __future__ import annotations

from datetime import timedelta

import pytest

from klaw.engine.clock import ManualClock
from klaw.store.protocol import Storage
from klaw.store.records import (
    MESSAGE_TARGET,
    ChatRef,
    EmbeddingJobCounts,
    EmbeddingJobStatus,
    MessageRecord,
    Role,
)
from tests.conftest import StoreOpener
from tests.store.raw import rows

CHAT = ChatRef("console", "me")


def text(content: str, role: Role = Role.USER) -> MessageRecord:
    return MessageRecord(CHAT, role, content)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def store(open_store: StoreOpener, clock: ManualClock) -> Storage:
    """Each backend's store, on the test's clock (the queue's times come from it)."""
    return await open_store(clock=clock.now)


async def test_append_with_embed_queues_a_job_due_now(store: Storage, clock: ManualClock) -> None:
    stored = await store.messages.append(text("remember the milk"), embed=True)
    [job] = await store.embedding_jobs.due(clock.now(), 10)
    assert (job.target, job.target_rowid, job.status, job.attempts) == (
        MESSAGE_TARGET,
        stored.rowid,
        EmbeddingJobStatus.PENDING,
        0,
    )
    assert job.next_attempt_at == clock.now() and job.created_at == clock.now() and job.last_error is None
    assert await store.embedding_jobs.next_due_at() == clock.now()


async def test_append_without_embed_queues_nothing(store: Storage, clock: ManualClock) -> None:
    await store.messages.append(text("hello"))
    assert await store.embedding_jobs.due(clock.now(), 10) == []
    assert await store.embedding_jobs.next_due_at() is None
    assert await store.embedding_jobs.counts() == EmbeddingJobCounts(0, 0)


async def test_appending_the_same_message_again_adds_no_second_job(store: Storage) -> None:
    record = text("idempotent")
    await store.messages.append(record, embed=True)
    await store.messages.append(record, embed=True)
    assert await store.embedding_jobs.counts() == EmbeddingJobCounts(pending=1, failed=0)


async def test_the_job_is_in_the_same_transaction_as_the_message(store: Storage) -> None:
    """If the job cannot be written, the message is not stored either (and the log replays it later)."""
    await rows(store, "ALTER TABLE embedding_jobs RENAME TO embedding_jobs_gone")
    record = text("never half-stored")
    with pytest.raises(Exception, match="embedding_jobs"):
        await store.messages.append(record, embed=True)
    assert await store.messages.get(record.id) is None


async def test_append_many_follows_each_records_flag(store: Storage, clock: ManualClock) -> None:
    records = [text("first"), text("second"), text("third")]
    stored = await store.messages.append_many(records, embed=[True, False, True])
    due = await store.embedding_jobs.due(clock.now(), 10)
    assert [job.target_rowid for job in due] == [stored[0].rowid, stored[2].rowid]
    with pytest.raises(ValueError, match="2 flags for 1 records"):
        await store.messages.append_many([text("x")], embed=[True, True])
    await store.messages.append_many([text("no flags")])
    assert (await store.embedding_jobs.counts()).pending == 2


async def test_due_is_oldest_first_limited_and_respects_next_attempt(store: Storage, clock: ManualClock) -> None:
    stored = [await store.messages.append(text(f"m{i}"), embed=True) for i in range(4)]
    first, second = await store.embedding_jobs.due(clock.now(), 2)
    assert [first.target_rowid, second.target_rowid] == [stored[0].rowid, stored[1].rowid]
    later = clock.now() + timedelta(seconds=4)
    await store.embedding_jobs.retry(first.id, "EmbedderError: down", later)
    assert [j.target_rowid for j in await store.embedding_jobs.due(clock.now(), 10)] == [s.rowid for s in stored[1:]]
    await store.embedding_jobs.complete([j.id for j in await store.embedding_jobs.due(clock.now(), 10)])
    assert await store.embedding_jobs.due(clock.now(), 10) == []
    assert await store.embedding_jobs.next_due_at() == later
    [retried] = await store.embedding_jobs.due(later, 10)
    assert (retried.attempts, retried.last_error, retried.next_attempt_at) == (1, "EmbedderError: down", later)


async def test_fail_counts_and_retry_failed_revives(store: Storage, clock: ManualClock) -> None:
    a = await store.messages.append(text("a"), embed=True)
    await store.messages.append(text("b"), embed=True)
    job_a, job_b = await store.embedding_jobs.due(clock.now(), 10)
    await store.embedding_jobs.retry(job_a.id, "X", clock.now())
    await store.embedding_jobs.fail(job_a.id, "EmbedderError: " + "x" * 1000)
    assert await store.embedding_jobs.counts() == EmbeddingJobCounts(pending=1, failed=1)
    assert [j.id for j in await store.embedding_jobs.due(clock.now(), 10)] == [job_b.id]
    (failed_error,) = await rows(store, "SELECT last_error, attempts FROM embedding_jobs WHERE id = ?", job_a.id)
    assert len(failed_error[0]) == 300 and failed_error[1] == 2
    await clock.advance(60)
    assert await store.embedding_jobs.retry_failed() == 1
    assert await store.embedding_jobs.retry_failed() == 0
    assert await store.embedding_jobs.counts() == EmbeddingJobCounts(pending=2, failed=0)
    revived = next(j for j in await store.embedding_jobs.due(clock.now(), 10) if j.target_rowid == a.rowid)
    assert (revived.attempts, revived.next_attempt_at) == (0, clock.now())


async def test_enqueue_messages_adds_skips_unknown_and_revives_failed(store: Storage, clock: ManualClock) -> None:
    plain = await store.messages.append(text("stored without a job"))
    queued = await store.messages.append(text("already queued"), embed=True)
    failed = await store.messages.append(text("gave up"), embed=True)
    job = next(j for j in await store.embedding_jobs.due(clock.now(), 10) if j.target_rowid == failed.rowid)
    await store.embedding_jobs.fail(job.id, "EmbedderError: down")
    added = await store.embedding_jobs.enqueue_messages([plain.rowid, queued.rowid, failed.rowid, 999_999, plain.rowid])
    assert added == 2  # plain added, failed revived; the pending one and the unknown rowid untouched
    assert await store.embedding_jobs.counts() == EmbeddingJobCounts(pending=3, failed=0)
    assert await store.embedding_jobs.enqueue_messages([]) == 0
