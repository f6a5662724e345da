"""`summaries` rows ⇄ `Summary` and one summary to write, alike for both backends (each keeps its own
SQL for the writes: `summaries/sqlite/`, `summaries/postgres/`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from klaw.store.records import ChatRef, from_millis
from klaw.store.summaries.records import Summary, SummaryKind

SUMMARY_COLUMNS = (
    "s.id, s.kind, c.channel, c.chat_id, s.segment_id, s.exchange_id, s.text, s.model, s.final,"
    " s.covers_exchange_id, s.exchanges_covered, s.created_at, s.updated_at, r.id"
)
SUMMARY_FROM = "summaries s JOIN chats c ON c.id = s.chat LEFT JOIN messages r ON r.rowid = s.record_rowid"
EXCHANGE = SummaryKind.EXCHANGE.value
SEGMENT = SummaryKind.SEGMENT.value


def summary_from_row(row: tuple[Any, ...]) -> Summary:
    """A row selected with `SUMMARY_COLUMNS` from `SUMMARY_FROM`."""
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
