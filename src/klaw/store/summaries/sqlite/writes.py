"""Writing one summary row with its embedding job, inside the caller's transaction.

Shared by the fold of the log's summary records (`fold.py`, the engine's path) and the
repository's direct writes (benchmarks and store tests build summaries without a log), so both
keep the same rules: one summary per exchange, one per segment (a later one replaces it: rolling),
and an embeddable summary gets its job in the same transaction. A job is queued only when the
text or the finality changed: folding the same record again (recovery, the one-time export of
older summaries) never re-embeds.
"""

from __future__ import annotations

import apsw

from klaw.store.protocol import StorageError
from klaw.store.sqlite.query import fetch_one
from klaw.store.summaries.rows import EXCHANGE, SEGMENT, SummaryWrite
from klaw.store.summaries.sqlite.rows import queue_summary_job


def write_exchange_summary(connection: apsw.Connection, write: SummaryWrite, exchange_id: int) -> int:
    """Store (or replace) the exchange's summary; returns its id."""
    previous = fetch_one(connection, "SELECT text FROM summaries WHERE exchange_id = ?", (exchange_id,))
    connection.execute(
        "INSERT INTO summaries (kind, chat, segment_id, exchange_id, text, model, final, covers_exchange_id,"
        " exchanges_covered, created_at, updated_at, record_rowid) VALUES (?, ?, ?, ?, ?, ?, 1, ?, 1, ?, ?, ?)"
        " ON CONFLICT (exchange_id) WHERE exchange_id IS NOT NULL DO UPDATE SET text = excluded.text,"
        " model = excluded.model, updated_at = excluded.updated_at, record_rowid = excluded.record_rowid",
        (
            EXCHANGE,
            write.chat_key,
            write.segment_id,
            exchange_id,
            write.text,
            write.model,
            exchange_id,
            write.at,
            write.at,
            write.record_rowid,
        ),
    )
    summary_id = _id_of(connection, "exchange_id = ?", exchange_id)
    if previous is None or previous[0] != write.text:
        queue_summary_job(connection, summary_id, write.queued_at)
    return summary_id


def write_segment_summary(
    connection: apsw.Connection,
    write: SummaryWrite,
    *,
    final: bool,
    covers_exchange_id: int | None,
    exchanges_covered: int,
) -> int:
    """Store (or roll forward) the segment's summary; a final one is queued for embedding."""
    previous = fetch_one(
        connection, "SELECT text, final FROM summaries WHERE segment_id = ? AND kind = ?", (write.segment_id, SEGMENT)
    )
    params: tuple[object, ...] = (SEGMENT, write.chat_key, write.segment_id, write.text, write.model, int(final))
    params += (covers_exchange_id, exchanges_covered, write.at, write.at, write.record_rowid)
    connection.execute(
        "INSERT INTO summaries (kind, chat, segment_id, exchange_id, text, model, final, covers_exchange_id,"
        " exchanges_covered, created_at, updated_at, record_rowid) VALUES (?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (segment_id) WHERE kind = 'segment' DO UPDATE SET text = excluded.text,"
        " model = excluded.model, final = excluded.final, covers_exchange_id = excluded.covers_exchange_id,"
        " exchanges_covered = excluded.exchanges_covered, updated_at = excluded.updated_at,"
        " record_rowid = excluded.record_rowid",
        params,
    )
    summary_id = _id_of(connection, "segment_id = ? AND kind = 'segment'", write.segment_id)
    unchanged = previous is not None and previous[0] == write.text and bool(previous[1])
    if final and not unchanged:
        queue_summary_job(connection, summary_id, write.queued_at)
    return summary_id


def _id_of(connection: apsw.Connection, where: str, value: int) -> int:
    row = fetch_one(connection, f"SELECT id FROM summaries WHERE {where}", (value,))
    if row is None:
        raise StorageError("the summary just written is missing")
    return int(row[0])
