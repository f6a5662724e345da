"""Loading summaries and writing one with its embedding job, in the caller's transaction (the row
mapping is `summaries/rows.py`).

The rules are SQLite's (`store/summaries/sqlite/rows.py` and `writes.py`): one summary per exchange,
one per segment (a later one replaces it: rolling), and an embeddable summary gets its job in the same
transaction, queued only when its text or finality changed.
"""

from __future__ import annotations

from collections.abc import Sequence

from klaw.store.postgres.connection import Connection, Row, clean_text, execute, fetch_all, fetch_one
from klaw.store.protocol import StorageError
from klaw.store.records import EmbeddingJobStatus
from klaw.store.shared.statements import PG_REQUEUE_JOB
from klaw.store.summaries.records import SUMMARY_TARGET, Summary, SummaryKind
from klaw.store.summaries.rows import EXCHANGE, SEGMENT, SUMMARY_COLUMNS, SUMMARY_FROM, SummaryWrite, summary_from_row

EMBEDDABLE = f"(s.kind = '{SummaryKind.EXCHANGE.value}' OR s.final)"


async def load_summaries(connection: Connection, where: str, params: Sequence[object] = ()) -> list[Summary]:
    rows = await fetch_all(connection, f"SELECT {SUMMARY_COLUMNS} FROM {SUMMARY_FROM} WHERE {where}", params)
    return [summary_from_row(row) for row in rows]


async def load_summary(connection: Connection, summary_id: int) -> Summary | None:
    found = await load_summaries(connection, "s.id = %s", (summary_id,))
    return found[0] if found else None


async def queue_summary_job(connection: Connection, summary_id: int, now_millis: int) -> None:
    """Queue (or queue again, due now) the summary's embedding."""
    await execute(
        connection,
        PG_REQUEUE_JOB,
        (SUMMARY_TARGET, summary_id, EmbeddingJobStatus.PENDING.value, now_millis, now_millis),
    )


async def write_exchange_summary(connection: Connection, write: SummaryWrite, exchange_id: int) -> int:
    previous = await fetch_one(connection, "SELECT text FROM summaries WHERE exchange_id = %s", (exchange_id,))
    text = clean_text(write.text)
    row = await fetch_one(
        connection,
        "INSERT INTO summaries (kind, chat, segment_id, exchange_id, text, model, final, covers_exchange_id,"
        " exchanges_covered, created_at, updated_at, record_rowid) VALUES (%s, %s, %s, %s, %s, %s, true, %s, 1, %s,"
        " %s, %s) ON CONFLICT (exchange_id) WHERE exchange_id IS NOT NULL DO UPDATE SET text = excluded.text,"
        " model = excluded.model, updated_at = excluded.updated_at, record_rowid = excluded.record_rowid"
        " RETURNING id",
        (
            EXCHANGE,
            write.chat_key,
            write.segment_id,
            exchange_id,
            text,
            write.model,
            exchange_id,
            write.at,
            write.at,
            write.record_rowid,
        ),
    )
    summary_id = _returned(row)
    if previous is None or previous[0] != text:
        await queue_summary_job(connection, summary_id, write.queued_at)
    return summary_id


async def write_segment_summary(
    connection: Connection, write: SummaryWrite, *, final: bool, covers_exchange_id: int | None, exchanges_covered: int
) -> int:
    previous = await fetch_one(
        connection, "SELECT text, final FROM summaries WHERE segment_id = %s AND kind = %s", (write.segment_id, SEGMENT)
    )
    text = clean_text(write.text)
    row = await fetch_one(
        connection,
        "INSERT INTO summaries (kind, chat, segment_id, exchange_id, text, model, final, covers_exchange_id,"
        " exchanges_covered, created_at, updated_at, record_rowid) VALUES (%s, %s, %s, NULL, %s, %s, %s, %s, %s, %s,"
        " %s, %s) ON CONFLICT (segment_id) WHERE kind = 'segment' DO UPDATE SET text = excluded.text,"
        " model = excluded.model, final = excluded.final, covers_exchange_id = excluded.covers_exchange_id,"
        " exchanges_covered = excluded.exchanges_covered, updated_at = excluded.updated_at,"
        " record_rowid = excluded.record_rowid RETURNING id",
        (
            SEGMENT,
            write.chat_key,
            write.segment_id,
            text,
            write.model,
            final,
            covers_exchange_id,
            exchanges_covered,
            write.at,
            write.at,
            write.record_rowid,
        ),
    )
    summary_id = _returned(row)
    unchanged = previous is not None and previous[0] == text and bool(previous[1])
    if final and not unchanged:
        await queue_summary_job(connection, summary_id, write.queued_at)
    return summary_id


def _returned(row: Row | None) -> int:
    if row is None:
        raise StorageError("the summary just written is missing")
    return int(row[0])
