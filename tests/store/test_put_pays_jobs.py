"""A vector put pays the embedding jobs of what it stores, in its own transaction (decision 229), and the
queue's batch end (`complete`, an empty `claim`, `next_due_at`) still answers exactly what the table
holds, on both backends."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from klaw.engine.clock import ManualClock
from klaw.home import KlawHome
from klaw.memory.embedder.fake import FakeEmbedder
from klaw.store.archival_records import memory_saved_record
from klaw.store.protocol import Storage
from klaw.store.records import MESSAGE_TARGET, ChatRef, EmbeddingJobCounts, MessageRecord, Role
from tests.conftest import StoreOpener
from tests.memory.archive_helpers import ME, ScriptedChat

CHAT = ChatRef("console", "me")
DIM = 8


def text(content: str) -> MessageRecord:
    return MessageRecord(CHAT, Role.USER, content)


def unit(*values: float) -> np.ndarray:
    vector = np.zeros(DIM, dtype=np.float32)
    vector[: len(values)] = values
    return vector / np.linalg.norm(vector)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


async def test_a_put_and_its_jobs_are_one_commit_so_a_crash_after_it_embeds_nothing_again(
    open_store: StoreOpener, clock: ManualClock
) -> None:
    store = await open_store(clock=clock.now)
    first = await store.messages.append(text("the garden needs water"), embed=True)
    second = await store.messages.append(text("dinner at eight"), embed=True)
    await store.vectors.bind_embedder("fake-8", DIM)
    claimed = await store.embedding_jobs.claim(clock.now(), 10, timedelta(minutes=5))
    assert [job.target_rowid for job in claimed] == [first.rowid, second.rowid]
    await store.vectors.put([(first.rowid, unit(1, 0))])
    await store.aclose()  # the engine gone before the queue's `complete` (as kill -9 right after the commit)

    reopened = await open_store(clock=clock.now)
    assert await reopened.vectors.count() == 1
    assert await reopened.embedding_jobs.counts() == EmbeddingJobCounts(pending=1, failed=0)
    await clock.advance(600)  # past the claim's hold (PostgreSQL)
    again = await reopened.embedding_jobs.claim(clock.now(), 10, timedelta(minutes=5))
    assert [(job.target, job.target_rowid) for job in again] == [(MESSAGE_TARGET, second.rowid)]


async def test_a_batch_end_answers_what_the_table_holds_after_later_writes(
    open_store: StoreOpener, clock: ManualClock
) -> None:
    store = await open_store(clock=clock.now)
    await store.vectors.bind_embedder("fake-8", DIM)
    first = await store.messages.append(text("the garden needs water"), embed=True)
    [job] = await store.embedding_jobs.claim(clock.now(), 10, timedelta(minutes=5))
    await store.vectors.put([(first.rowid, unit(1, 0))])
    await store.embedding_jobs.complete([job.id])
    assert await store.embedding_jobs.claim(clock.now(), 10, timedelta(minutes=5)) == []
    assert await store.embedding_jobs.next_due_at() is None

    # A message queued after the batch: due at once, claimed, and its `complete` still deletes it.
    second = await store.messages.append(text("dinner at eight"), embed=True)
    assert await store.embedding_jobs.next_due_at() == clock.now()
    [later] = await store.embedding_jobs.claim(clock.now(), 10, timedelta(minutes=5))
    assert later.target_rowid == second.rowid
    # A job retried later moves the next due time with it.
    retry_at = clock.now() + timedelta(minutes=3)
    await store.embedding_jobs.retry(later.id, "EmbedderError: busy", retry_at)
    assert await store.embedding_jobs.next_due_at() == retry_at
    assert await store.embedding_jobs.claim(clock.now(), 10, timedelta(minutes=5)) == []
    await clock.advance(240)
    [due] = await store.embedding_jobs.claim(clock.now(), 10, timedelta(minutes=5))
    await store.embedding_jobs.complete([due.id])  # gave up on without a vector: deleted all the same
    assert await store.embedding_jobs.counts() == EmbeddingJobCounts(pending=0, failed=0)
    assert await store.vectors.count() == 1


async def test_a_memory_put_pays_its_job_too(home: KlawHome, open_store: StoreOpener) -> None:
    store: Storage = await open_store()
    embedder = FakeEmbedder(dim=DIM)
    await store.memory_chunks.bind_embedder(embedder.model_id, embedder.dim)
    chat = ScriptedChat(home, store)
    saved = await chat.accept(memory_saved_record(ME, "the bike lock code is 4711", chat.tick()))
    assert (await store.embedding_jobs.counts()).pending == 1
    vectors = await embedder.embed(["the bike lock code is 4711"])
    assert await store.memory_chunks.put([(saved.rowid, vectors[0])]) == 1
    assert await store.embedding_jobs.counts() == EmbeddingJobCounts(pending=0, failed=0)
