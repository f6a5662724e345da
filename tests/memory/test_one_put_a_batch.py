"""A batch of embedding jobs of several targets (a turn's message and reply, its exchange's summary) is
embedded in one call and stored in one call to the store, one transaction (decision 471), on both
backends: the vectors are there and searchable at once (the in-memory copies told after the commit),
the jobs are paid; and a target whose vectors cannot go in does not keep the others' out."""

from __future__ import annotations

from collections.abc import Sequence

from klaw.engine.clock import ManualClock
from klaw.memory.embedder.fake import FakeEmbedder
from klaw.memory.embedder.protocol import Vectors
from klaw.memory.embedding_queue import EmbeddingQueue
from klaw.store.exchange_records import exchange_close_record
from klaw.store.protocol import Storage
from klaw.store.records import EmbeddingJobCounts, ExchangeStatus, MessageRecord, Role
from klaw.store.summaries.records import SUMMARY_TARGET
from tests.conftest import StoreOpener
from tests.memory.summary_helpers import ALICE, T0, Turns

DIM = 32


class CountingEmbedder(FakeEmbedder):
    """The fake embedder, its calls' texts kept."""

    def __init__(self) -> None:
        super().__init__(DIM)
        self.calls: list[list[str]] = []

    async def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls.append(list(texts))
        return await super().embed(texts)


async def a_turn_summarized(store: Storage) -> tuple[int, int]:
    """A finished turn whose question and reply are queued for embedding, and its exchange summary
    (queued too); returns the question's and the reply's rowids."""
    turns = Turns(store)
    opened = await turns.open_turn("where do the tomatoes go this spring")
    question = await store.messages.get(opened.metadata["user_message_id"] if opened.metadata else "")
    assert question is not None
    reply = await store.messages.append(
        MessageRecord(ALICE, Role.ASSISTANT, "the tomatoes go by the south wall", created_at=turns.now()), embed=True
    )
    await store.embedding_jobs.enqueue_messages([question.rowid])
    await store.messages.append(exchange_close_record(opened, ExchangeStatus.COMPLETED, reply.record.id, turns.now()))
    exchange = await turns.latest()
    assert await store.summaries.save_exchange_summary(exchange, "Tomatoes by the south wall.", "m", T0) is not None
    return question.rowid, reply.rowid


async def test_a_turns_vectors_of_two_targets_are_one_embedder_call_and_stored_together(
    open_store: StoreOpener,
) -> None:
    clock = ManualClock()
    store = await open_store(clock=clock.now)
    embedder = CountingEmbedder()
    await store.vectors.bind_embedder(embedder.model_id, DIM)
    await store.summaries.bind_embedder(embedder.model_id, DIM)
    question, reply = await a_turn_summarized(store)
    probe = (await embedder.embed(["tomatoes south wall"]))[0]
    embedder.calls.clear()
    assert await store.search.nearest(ALICE, probe, limit=5) == []  # the chat's copy is in memory, empty

    queue = EmbeddingQueue(store, embedder, clock, batch_size=16)
    assert await queue.run_until_idle() == 3
    assert len(embedder.calls) == 1 and len(embedder.calls[0]) == 3  # was one call a target
    assert await store.vectors.count() == 2
    assert (await store.summaries.counts()).vectors == 1
    assert await store.embedding_jobs.counts() == EmbeddingJobCounts(pending=0, failed=0)
    found = await store.search.nearest(ALICE, probe, limit=5)  # the copy told after the commit
    assert sorted(hit.message.rowid for hit in found) == sorted([question, reply])
    assert (await queue.status()).last_error is None


async def test_a_target_that_cannot_take_its_vectors_leaves_the_others_stored(open_store: StoreOpener) -> None:
    clock = ManualClock()
    store = await open_store(clock=clock.now)
    embedder = CountingEmbedder()
    await store.vectors.bind_embedder(embedder.model_id, DIM)  # the summaries' vectors never bound
    await a_turn_summarized(store)

    queue = EmbeddingQueue(store, embedder, clock, batch_size=16)
    assert await queue.run_until_idle() == 2
    assert len(embedder.calls) == 1  # embedded together; stored each alone once the joint put was refused
    assert await store.vectors.count() == 2
    assert [(row.target, row.pending, row.failed) for row in await store.embedding_jobs.by_target()] == [
        (SUMMARY_TARGET, 1, 0)
    ]
    assert (await queue.status()).last_error == (
        "StorageError: bind_embedder must be called before summary vectors are stored"
    )
