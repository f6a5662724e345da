"""The summary repository on a real klaw.db (docs/decisions/009-carried-over-requirements.md: storage and
similarity search of exchange and segment summaries; summaries found for embedding, stored with their keys)."""

from __future__ import annotations

from datetime import timedelta
from typing import TypeVar

import apsw
import numpy as np
import pytest

from klaw.memory.embedder.fake import FakeEmbedder
from klaw.store.protocol import Storage
from klaw.store.records import ExchangeStatus
from klaw.store.sqlite.store import SqliteStore
from klaw.store.summaries.records import SUMMARY_TARGET, SummaryKind
from klaw.store.summaries.sqlite.repository import delete_summaries_in
from tests.memory.summary_helpers import ALICE, T0, Turns

DIM = 32
S = TypeVar("S", bound=Storage)
EMBEDDER = FakeEmbedder(DIM)


async def bound(store: S) -> S:
    await store.summaries.bind_embedder(EMBEDDER.model_id, DIM)
    return store


async def summary_jobs(store: Storage) -> list[int]:
    jobs = await store.embedding_jobs.due(T0 + timedelta(days=36500), 100)
    return sorted(job.target_rowid for job in jobs if job.target == SUMMARY_TARGET)


async def embed_all(store: Storage) -> int:
    ids = await summary_jobs(store)
    texts = await store.summaries.texts(ids)
    vectors = await EMBEDDER.embed([texts[i] for i in texts])
    return await store.summaries.put_vectors(list(zip(texts, vectors, strict=True)))


async def test_exchange_summary_is_stored_with_its_job_and_found_by_similarity(storage: Storage) -> None:
    await bound(storage)
    turns = Turns(storage)
    tea = await turns.turn("how do I brew green tea", "steep at 80 degrees for two minutes")
    bike = await turns.turn("my bike chain squeaks", "oil the chain and wipe it")
    first = await storage.summaries.save_exchange_summary(tea, "Asked how to brew green tea.", "fake/small", T0)
    second = await storage.summaries.save_exchange_summary(
        bike, "Asked about a squeaking bike chain.", "fake/small", T0
    )
    assert first is not None and second is not None
    assert (first.kind, first.exchange_id, first.segment_id, first.final) == (
        SummaryKind.EXCHANGE,
        tea.id,
        tea.segment_id,
        True,
    )
    assert await summary_jobs(storage) == [first.id, second.id]  # queued in the same transaction
    assert await embed_all(storage) == 2
    assert await embed_all(storage) == 0  # stored vectors are kept, not duplicated
    [query] = await EMBEDDER.embed(["green tea brew"])
    hits = await storage.summaries.nearest_exchanges(ALICE, query, segment_ids=[tea.segment_id], limit_per_segment=2)
    assert [hit.summary.id for hit in hits] == [first.id, second.id]
    assert hits[0].similarity > hits[1].similarity
    assert hits[0].started_at == tea.started_at and hits[1].started_at == bike.started_at
    assert await storage.summaries.exchange_summary(tea.id) == first


async def test_only_final_segment_summaries_are_embedded_and_a_new_text_drops_the_old_vector(
    storage: Storage,
) -> None:
    await bound(storage)
    turns = Turns(storage)
    tea = await turns.turn("green tea?", "80 degrees")
    rolling = await storage.summaries.save_segment_summary(
        tea.segment_id, "Talking about tea.", "m", final=False, covers_exchange_id=tea.id, exchanges_covered=1, at=T0
    )
    assert rolling is not None
    assert not rolling.embeddable and await summary_jobs(storage) == []
    assert await storage.summaries.texts([rolling.id]) == {}
    final = await storage.summaries.mark_final(rolling.id, T0)
    assert final is not None and final.final and await summary_jobs(storage) == [rolling.id]
    assert await embed_all(storage) == 1
    assert (await storage.summaries.counts()).vectors == 1
    again = await storage.summaries.save_segment_summary(
        tea.segment_id, "Tea, then coffee.", "m", final=True, covers_exchange_id=tea.id, exchanges_covered=1, at=T0
    )
    assert again is not None
    assert again.id == rolling.id and again.text == "Tea, then coffee."
    counts = await storage.summaries.counts()
    assert (counts.segments_final, counts.segments_rolling, counts.vectors) == (1, 0, 0)  # stale vector dropped
    assert await summary_jobs(storage) == [rolling.id]


async def test_nearest_segments_never_returns_the_excluded_segment(storage: Storage) -> None:
    await bound(storage)
    turns = Turns(storage)
    ids = []
    for topic in ("tea brewing", "tea brewing again"):
        exchange = await turns.turn(topic, "ok")
        summary = await storage.summaries.save_segment_summary(
            exchange.segment_id, topic, "m", final=True, covers_exchange_id=exchange.id, exchanges_covered=1, at=T0
        )
        assert summary is not None
        ids.append((exchange.segment_id, summary.id))
        await turns.new_segment()
    await embed_all(storage)
    [query] = await EMBEDDER.embed(["tea brewing"])
    hits = await storage.summaries.nearest_segments(ALICE, query, limit=5, exclude_segment_id=ids[0][0])
    assert [hit.summary.segment_id for hit in hits] == [ids[1][0]]
    assert (
        await storage.summaries.nearest_segments(
            ALICE.__class__("console", "nobody"), query, limit=5, exclude_segment_id=None
        )
        == []
    )


async def test_scan_finds_finished_exchanges_once_and_rechecks_open_ones(storage: Storage) -> None:
    turns = Turns(storage)
    done = await turns.turn("question one", "answer one")
    failed = await turns.turn("question two", None, ExchangeStatus.FAILED)
    opened = await turns.open_turn("question three")
    scan = await storage.summaries.scan_exchanges(0, (), 50)
    assert [e.id for e in scan.to_summarize] == [done.id]
    assert failed.id not in scan.still_open and len(scan.still_open) == 1
    assert scan.scanned_to >= max(scan.still_open)
    later = await storage.summaries.scan_exchanges(scan.scanned_to, scan.still_open, 50)
    assert later.to_summarize == [] and later.still_open == scan.still_open
    closed = await turns.close(opened, "answer three")
    after = await storage.summaries.scan_exchanges(later.scanned_to, later.still_open, 50)
    assert [e.id for e in after.to_summarize] == [closed.id] and after.still_open == frozenset()
    assert await storage.summaries.pending_exchanges() == 2
    page = await storage.summaries.scan_exchanges(0, (), 1)
    assert [e.id for e in page.to_summarize] == [done.id] and page.scanned_to == done.id


async def test_which_of_many_segments_are_still_open_is_one_answer(storage: Storage) -> None:
    turns = Turns(storage)
    first = (await turns.turn("question one", "answer one")).segment_id
    second = await turns.new_segment()
    assert await storage.segments.open_among([first, second, second + 99]) == {second}  # closed, open, gone
    assert await storage.segments.open_among([]) == set()


async def test_an_open_segment_is_rolled_by_the_characters_of_its_new_exchange_summaries(storage: Storage) -> None:
    turns = Turns(storage)
    for i in range(2):
        exchange = await turns.turn(f"question {i}", f"answer {i}")
        await storage.summaries.save_exchange_summary(exchange, "x" * 100, "m", T0)
    assert await storage.summaries.segment_work(rolling_every=5, skip_exchanges=(), limit=10) == []
    [work] = await storage.summaries.segment_work(rolling_every=5, rolling_chars=200, skip_exchanges=(), limit=10)
    assert len(work.new) == 2 and not work.closed
    assert await storage.summaries.segment_work(rolling_every=5, rolling_chars=201, skip_exchanges=(), limit=10) == []


async def test_segment_work_folds_contiguously_and_waits_for_a_missing_exchange_summary(storage: Storage) -> None:
    turns = Turns(storage)
    one, two, three = [await turns.turn(f"question {i}", f"answer {i}") for i in range(3)]
    for exchange in (one, three):
        await storage.summaries.save_exchange_summary(exchange, f"summary {exchange.id}", "m", T0)
    [work] = await storage.summaries.segment_work(rolling_every=1, skip_exchanges=(), limit=10)
    assert [s.exchange_id for s in work.new] == [one.id] and work.waiting and not work.closed
    [skipping] = await storage.summaries.segment_work(rolling_every=1, skip_exchanges=[two.id], limit=10)
    assert [s.exchange_id for s in skipping.new] == [one.id, three.id] and not skipping.waiting
    assert await storage.summaries.segment_work(rolling_every=3, skip_exchanges=(), limit=10) == []
    await storage.summaries.save_segment_summary(
        one.segment_id, "rolled", "m", final=False, covers_exchange_id=three.id, exchanges_covered=2, at=T0
    )
    await turns.new_segment()
    [closed] = await storage.summaries.segment_work(rolling_every=5, skip_exchanges=(), limit=10)
    assert closed.closed and closed.summary is not None and closed.new == [] and not closed.waiting


async def test_another_embedder_rebuilds_summary_vectors_instead_of_refusing(storage: Storage) -> None:
    await bound(storage)
    exchange = await Turns(storage).turn("tea", "green")
    await storage.summaries.save_exchange_summary(exchange, "About tea.", "m", T0)
    await embed_all(storage)
    assert await storage.summaries.bind_embedder("other-model", 16) == 1
    assert (await storage.summaries.counts()).vectors == 0
    vector = np.full(16, 0.25, dtype=np.float32)
    [job] = await summary_jobs(storage)
    assert await storage.summaries.put_vectors([(job, vector)]) == 1
    assert await storage.summaries.reembed_all() == 1 and (await storage.summaries.counts()).vectors == 0


async def test_forgetting_removes_summaries_of_exchanges_their_segments_and_vectors(storage: Storage) -> None:
    await bound(storage)
    turns = Turns(storage)
    tea, bike = await turns.turn("tea", "green"), await turns.turn("bike", "oil")
    for exchange in (tea, bike):
        await storage.summaries.save_exchange_summary(exchange, f"about {exchange.id}", "m", T0)
    await storage.summaries.save_segment_summary(
        tea.segment_id, "tea and bike", "m", final=True, covers_exchange_id=bike.id, exchanges_covered=2, at=T0
    )
    await embed_all(storage)
    assert await storage.summaries.forget_exchanges([tea.id]) == 2
    remaining = await storage.summaries.in_segment(tea.segment_id)
    assert [s.exchange_id for s in remaining] == [bike.id]
    assert (await storage.summaries.counts()).vectors == 1
    assert await storage.summaries.forget_segments([tea.segment_id]) == 1
    assert (await storage.summaries.counts()).vectors == 0


async def test_deleting_an_exchange_cascades_to_its_summary_and_vector(store: SqliteStore) -> None:
    await bound(store)
    exchange = await Turns(store).turn("tea", "green")
    await store.summaries.save_exchange_summary(exchange, "About tea.", "m", T0)
    await embed_all(store)

    def delete(connection: object) -> int:
        import apsw

        assert isinstance(connection, apsw.Connection)
        with connection:
            connection.execute("DELETE FROM exchanges WHERE id = ?", (exchange.id,))
            deleted = delete_summaries_in(connection, [], [])
        return deleted

    await store.db.run(delete)
    counts = await store.summaries.counts()
    assert (counts.exchanges, counts.vectors) == (0, 0)


async def test_exchange_search_gives_the_same_answer_by_point_lookups_and_by_knn(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    await bound(storage)
    turns = Turns(storage)
    for topic in ("green tea brewing", "bike chain oil", "green tea cups", "tax forms"):
        exchange = await turns.turn(topic, "ok")
        await storage.summaries.save_exchange_summary(exchange, f"Asked about {topic}.", "m", T0)
    await embed_all(storage)
    [query] = await EMBEDDER.embed(["green tea"])
    segment = exchange.segment_id
    by_lookup = await storage.summaries.nearest_exchanges(ALICE, query, segment_ids=[segment], limit_per_segment=3)
    monkeypatch.setattr("klaw.store.summaries.sqlite.vectors.POINT_LOOKUP_MAX", 1)
    by_knn = await storage.summaries.nearest_exchanges(ALICE, query, segment_ids=[segment], limit_per_segment=3)
    assert {h.summary.id for h in by_lookup} == {h.summary.id for h in by_knn}  # ties may swap places
    assert [h.similarity for h in by_lookup] == pytest.approx([h.similarity for h in by_knn], abs=1e-5)
    assert by_lookup[0].summary.text.startswith("Asked about green tea")


async def test_limits_above_sqlite_vecs_knn_cap_still_find_every_summary(
    storage: Storage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`/rag set rag_conversation_limit 5000` is valid (limits need only be > 0), but sqlite-vec refuses
    a KNN with k over 4096: retrieval then failed on every turn, and its fail-safe hid it."""
    await bound(storage)
    turns = Turns(storage)
    tea = await turns.turn("green tea", "80 degrees")
    await storage.summaries.save_exchange_summary(tea, "Asked about green tea.", "m", T0)
    await storage.summaries.save_segment_summary(
        tea.segment_id, "About tea.", "m", final=True, covers_exchange_id=tea.id, exchanges_covered=1, at=T0
    )
    await turns.new_segment()
    await embed_all(storage)
    [query] = await EMBEDDER.embed(["green tea"])
    segments = await storage.summaries.nearest_segments(ALICE, query, limit=5000, exclude_segment_id=None)
    assert [hit.summary.segment_id for hit in segments] == [tea.segment_id]
    monkeypatch.setattr("klaw.store.summaries.sqlite.vectors.POINT_LOOKUP_MAX", 0)  # the KNN path, not lookups
    exchanges = await storage.summaries.nearest_exchanges(
        ALICE, query, segment_ids=[tea.segment_id], limit_per_segment=5000
    )
    assert [hit.summary.exchange_id for hit in exchanges] == [tea.id]


async def test_nothing_is_stored_from_what_was_forgotten_while_the_model_wrote(store: SqliteStore) -> None:
    turns = Turns(store)
    tea = await turns.turn("tea", "green")
    messages = await store.history.exchange_messages(tea.id)
    assert messages
    sources = [m.rowid for m in messages]

    def forget_reply(connection: apsw.Connection) -> None:
        with connection:
            connection.execute("DELETE FROM messages WHERE rowid = ?", (sources[-1],))

    rolled = await store.summaries.save_exchange_summary(tea, "About tea.", "m", T0, sources=sources)
    assert rolled is not None
    await store.db.run(forget_reply)
    assert await store.summaries.save_exchange_summary(tea, "About tea, again.", "m", T0, sources=sources) is None
    assert (await store.summaries.exchange_summary(tea.id)) == rolled  # unchanged

    await store.summaries.forget_exchanges([tea.id])
    assert (
        await store.summaries.save_segment_summary(
            tea.segment_id,
            "retells tea",
            "m",
            final=True,
            covers_exchange_id=tea.id,
            exchanges_covered=1,
            at=T0,
            sources=[rolled.id],
        )
        is None
    )
    assert await store.summaries.segment_summary(tea.segment_id) is None
