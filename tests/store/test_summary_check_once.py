"""A summary record's check before it is logged is not made again by its fold (decision 471), and a
message deleted between the two still keeps the summary out.

The summary log asks `summary_record_to_log` (its exchange's opening record, the exchange, every source
still stored) before the record's line is written, then appends it; the fold repeated those reads. The
cost is counted in SQLite virtual-machine instructions (apsw's progress handler), which do not depend
on the machine or its load.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import apsw

from klaw.store.records import MessageRecord, Role
from klaw.store.sqlite.store import SqliteStore
from klaw.store.summaries.log_records import exchange_summary_record
from klaw.store.summaries.records import SummaryKind
from tests.store.test_exchange_lookup_cost import CHAT, STEP, T0, exchange_records


async def _summarized_chat(store: SqliteStore) -> tuple[int, list[MessageRecord]]:
    """A chat of 20 finished turns; the last one's exchange id, and its records with a note after it
    (a source no exchange names, which a test may delete)."""
    records: list[MessageRecord] = []
    for n in range(20):
        records += exchange_records(CHAT, n, T0 + timedelta(seconds=n))
    note = MessageRecord(CHAT, Role.USER, "a note", created_at=T0 + timedelta(minutes=1))
    await store.messages.append_many([*records, note])
    latest = await store.history.latest_exchange_id(CHAT)
    assert latest is not None
    return latest, [*records[-4:], note]


def _summary(opened: str, turn: list[MessageRecord]) -> MessageRecord:
    sources = [turn[0].id, turn[2].id, turn[4].id]
    return exchange_summary_record(
        CHAT, "They asked about the garden.", exchange=opened, sources=sources, model="fake", at=T0 + timedelta(days=1)
    )


async def append_steps(tmp_path: Path, *, checked_first: bool) -> int:
    """Instructions SQLite runs to append the last exchange's summary record (`append_record`), with or
    without the summary log's check of the same record just before it."""
    store = await SqliteStore.open(tmp_path / f"klaw-{checked_first}.db")
    try:
        latest, turn = await _summarized_chat(store)
        found = await store.summaries.summary_record_to_log(latest, lambda opened: _summary(opened, turn))
        assert found.opened and found.record is not None
        if not checked_first:  # the same record, its check forgotten by a check of another exchange's
            await store.summaries.summary_record_to_log(latest - 1, lambda opened: _summary(opened, turn))
        steps = 0

        def count() -> bool:
            nonlocal steps
            steps += STEP
            return False

        await store.db.run(lambda connection: connection.set_progress_handler(count, STEP))
        _, stored = await store.summaries.append_record(found.record)
        assert stored is not None and (stored.kind, stored.record_id) == (SummaryKind.EXCHANGE, found.record.id)
        return steps
    finally:
        await store.aclose()


async def test_the_fold_does_not_repeat_the_check_made_before_the_log(tmp_path: Path) -> None:
    unchecked = await append_steps(tmp_path, checked_first=False)
    checked = await append_steps(tmp_path, checked_first=True)
    # The exchange found again from its opening record and the sources looked up: ~a tenth of the append.
    assert checked < 0.95 * unchecked, (checked, unchecked)


async def test_a_source_deleted_after_the_check_keeps_the_summary_out(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "klaw.db")
    try:
        latest, turn = await _summarized_chat(store)
        found = await store.summaries.summary_record_to_log(latest, lambda opened: _summary(opened, turn))
        assert found.record is not None
        note = await store.messages.get(turn[4].id)
        assert note is not None

        def delete(connection: apsw.Connection) -> None:  # as a forget's fold deletes a message
            connection.execute("DELETE FROM messages WHERE rowid = ?", (note.rowid,))

        await store.db.run(delete)
        _, stored = await store.summaries.append_record(found.record)
        assert stored is None
        assert await store.summaries.exchange_summary(latest) is None
    finally:
        await store.aclose()
