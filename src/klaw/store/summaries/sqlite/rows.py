"""`summaries` rows ⇄ `Summary`, and queueing a summary's embedding inside the caller's transaction."""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from klaw.store.records import ChatRef, EmbeddingJobStatus, from_millis
from klaw.store.sqlite.query import Row, fetch_all
from klaw.store.summaries.records import SUMMARY_TARGET, Summary, SummaryKind

SUMMARY_COLUMNS = (
    "s.id, s.kind, c.channel, c.chat_id, s.segment_id, s.exchange_id, s.text, s.model, s.final,"
    " s.covers_exchange_id, s.exchanges_covered, s.created_at, s.updated_at, r.id"
)
SUMMARY_FROM = "summaries s JOIN chats c ON c.id = s.chat LEFT JOIN messages r ON r.rowid = s.record_rowid"
# The condition a summary needs to get a vector (see `Summary.embeddable`), on alias `s`.
EMBEDDABLE = f"(s.kind = '{SummaryKind.EXCHANGE.value}' OR s.final = 1)"


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


def load_summaries(connection: apsw.Connection, where: str, params: Sequence[object] = ()) -> list[Summary]:
    rows = fetch_all(connection, f"SELECT {SUMMARY_COLUMNS} FROM {SUMMARY_FROM} WHERE {where}", params)
    return [summary_from_row(row) for row in rows]


def load_summary(connection: apsw.Connection, summary_id: int) -> Summary | None:
    found = load_summaries(connection, "s.id = ?", (summary_id,))
    return found[0] if found else None


def queue_summary_job(connection: apsw.Connection, summary_id: int, now_millis: int) -> None:
    """Queue (or queue again, due now) the summary's embedding; call inside the write's transaction."""
    connection.execute(
        "INSERT INTO embedding_jobs (target, target_rowid, status, attempts, next_attempt_at, created_at)"
        " VALUES (?, ?, ?, 0, ?, ?) ON CONFLICT (target, target_rowid) DO UPDATE SET status = excluded.status,"
        " attempts = 0, next_attempt_at = excluded.next_attempt_at, last_error = NULL",
        (SUMMARY_TARGET, summary_id, EmbeddingJobStatus.PENDING.value, now_millis, now_millis),
    )
