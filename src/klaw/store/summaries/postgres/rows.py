"""`summaries` rows ⇄ `Summary`, writing one summary with its embedding job, in the caller's transaction.

The rules are SQLite's (`store/summaries/sqlite/rows.py` and `writes.py`): one summary per exchange,
one per segment (a later one replaces it: rolling), and an embeddable summary gets its job in the same
transaction, queued only when its text or finality changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from klaw.store.postgres.connection import Connection, Row, clean_text, execute, fetch_all, fetch_one
from klaw.store.protocol import StorageError
from klaw.store.records import ChatRef, EmbeddingJobStatus, from_millis
from klaw.store.summaries.records import SUMMARY_TARGET, Summary, SummaryKind

SUMMARY_COLUMNS = (
    "s.id, s.kind, c.channel, c.chat_id, s.segment_id, s.exchange_id, s.text, s.model, s.final,"
    " s.covers_exchange_id, s.exchanges_covered, s.created_at, s.updated_at, r.id"
)
SUMMARY_FROM = "summaries s JOIN chats c ON c.id = s.chat LEFT JOIN messages r ON r.rowid = s.record_rowid"
EMBEDDABLE = f"(s.kind = '{SummaryKind.EXCHANGE.value}' OR s.final)"
EXCHANGE = SummaryKind.EXCHANGE.value
SEGMENT = SummaryKind.SEGMENT.value


def summary_from_row(row: Row) -> Summary:
    return Summary(
        id=int(row[0]),
        kind=SummaryKind(row[1]),
        chat=ChatRef(row[2], row[3]),
        segment_id=int(row[4]),
        exchange_id=None if row[5] is None else int(row[5]),
        text=str(row[6]),
        model=str(row[7]),
        final=bool(row[8]),
        covers_exchange_id=None if row[9] is None else int(row[9]),
        exchanges_covered=int(row[10]),
        created_at=from_millis(int(row[11])),
        updated_at=from_millis(int(row[12])),
        record_id=None if row[13] is None else str(row[13]),
    )


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
        "INSERT INTO embedding_jobs (target, target_rowid, status, attempts, next_attempt_at, created_at)"
        " VALUES (%s, %s, %s, 0, %s, %s) ON CONFLICT (target, target_rowid) DO UPDATE SET status = excluded.status,"
        " attempts = 0, next_attempt_at = excluded.next_attempt_at, last_error = NULL",
        (SUMMARY_TARGET, summary_id, EmbeddingJobStatus.PENDING.value, now_millis, now_millis),
    )


@dataclass(frozen=True, slots=True)
class SummaryWrite:
    """One summary to store; times in UTC milliseconds; `record_rowid` is its log record's row."""

    chat_key: int
    segment_id: int
    text: str
    model: str
    at: int
    queued_at: int
    record_rowid: int | None = None


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
