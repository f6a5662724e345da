"""Summary records in the store: a summary record written in the middle of a later turn belongs to
no exchange, a record naming forgotten sources is not kept, and the one-time export logs summaries
written before summaries were logged (idempotent, nothing embedded again, kept by a reindex)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from klaw.engine.clock import ManualClock
from klaw.home import KlawHome
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.ingestion import Ingestion
from klaw.memory.reindex import reindex
from klaw.memory.summaries.summary_export import export_unlogged_summaries
from klaw.store.exchange_records import exchange_close_record, exchange_open_record
from klaw.store.records import ChatRef, Exchange, ExchangeStatus, MessageRecord, Role
from klaw.store.sqlite.store import SqliteStore
from klaw.store.summaries.log_records import exchange_summary_record
from tests.engine.harness import engine_config

ALICE = ChatRef("console", "alice")


async def logged_turn(ingestion: Ingestion, clock: ManualClock, question: str, answer: str) -> MessageRecord:
    """A whole turn through ingestion (log and store); returns its exchange_open record."""
    user = MessageRecord(ALICE, Role.USER, question, created_at=clock.now())
    await ingestion.accept(user)
    opened = exchange_open_record(ALICE, user.id, clock.now())
    await ingestion.accept(opened)
    final = MessageRecord(ALICE, Role.ASSISTANT, answer, created_at=clock.now())
    await ingestion.accept(final)
    await ingestion.accept(exchange_close_record(opened, ExchangeStatus.COMPLETED, final.id, clock.now()))
    await clock.advance(1.0)
    return opened


async def exchanges(store: SqliteStore) -> list[Exchange]:
    return await store.exchanges.for_segment((await store.segments.current(ALICE)).id)


async def test_a_summary_record_written_mid_turn_is_in_no_exchange_and_forgotten_sources_drop_it(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    store = await SqliteStore.open(tmp_path / "klaw.db", clock=clock.now)
    ingestion = Ingestion(ConversationLog(tmp_path / "conversations"), store)
    try:
        first = await logged_turn(ingestion, clock, "how do I brew green tea", "at 80 degrees")
        await ingestion.accept(MessageRecord(ALICE, Role.USER, "and black tea?", created_at=clock.now()))
        window = await store.messages.window((await store.segments.current(ALICE)).id, 1)
        opened = exchange_open_record(ALICE, window[0].record.id, clock.now())
        await ingestion.accept(opened)
        tea = (await exchanges(store))[0]
        sources = [m.record.id for m in await store.history.exchange_messages(tea.id) or []]
        record = exchange_summary_record(
            ALICE, "Asked about green tea.", exchange=first.id, sources=sources, model="m", at=clock.now()
        )
        await ingestion.accept(record)  # the summarizer writes while the next turn runs
        running = (await exchanges(store))[1]
        assert record.id not in {m.record.id for m in await store.history.exchange_messages(running.id) or []}
        stored = await store.summaries.exchange_summary(tea.id)
        assert stored is not None and stored.record_id == record.id
        # A record naming a source no longer stored is logged but never becomes a summary.
        orphan = exchange_summary_record(
            ALICE, "Retells a forgotten line.", exchange=first.id, sources=["gone"], model="m", at=clock.now()
        )
        assert not await store.summaries.foldable(orphan)
        await store.messages.append(orphan)
        kept = await store.summaries.exchange_summary(tea.id)
        assert kept is not None and kept.text == "Asked about green tea."
        assert [m.record.id for m in await store.history.summary_records(ALICE, [first.id])] == [
            record.id,
            orphan.id,
        ]
    finally:
        await store.aclose()


async def test_summaries_from_before_summaries_were_logged_are_exported_once_and_survive_reindex(
    tmp_path: Path,
) -> None:
    home = KlawHome(tmp_path / "home")
    home.conversations.mkdir(parents=True)
    clock = ManualClock()
    store = await SqliteStore.open(home.database_file("klaw.db"), clock=clock.now)
    ingestion = Ingestion(ConversationLog(home.conversations), store)
    try:
        await store.summaries.bind_embedder("fake-32", 32)
        await logged_turn(ingestion, clock, "how do I brew green tea", "at 80 degrees")
        tea = (await exchanges(store))[0]
        # An older klaw stored this summary in klaw.db only (and embedded it).
        legacy = await store.summaries.save_exchange_summary(tea, "Asked about green tea.", "m", clock.now())
        assert legacy is not None and legacy.record_id is None
        jobs_before = await store.embedding_jobs.due(clock.now() + timedelta(days=1), 100)
        assert await export_unlogged_summaries(ingestion, clock.now) == 1
        exported = await store.summaries.exchange_summary(tea.id)
        assert exported is not None and exported.record_id is not None and exported.id == legacy.id
        assert await store.embedding_jobs.due(clock.now() + timedelta(days=1), 100) == jobs_before  # not again
        assert await export_unlogged_summaries(ingestion, clock.now) == 0  # idempotent
    finally:
        await store.aclose()
    await reindex(home, engine_config("http://127.0.0.1:9/v1"))
    rebuilt = await SqliteStore.open(home.database_file("klaw.db"))
    try:
        texts = [s.text for s in await rebuilt.summaries.in_segment((await rebuilt.segments.current(ALICE)).id)]
        assert texts == ["Asked about green tea."]
    finally:
        await rebuilt.aclose()
