"""The summarizers' questions as SQL both backends ask alike (what is left to summarize, which segments
have something to fold) and the answers read from the rows; `summaries/sqlite/work.py` and
`summaries/postgres/work.py` run them, each with its own placeholder (`mark`) and connection. The rules
themselves are explained in `summaries/sqlite/work.py`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from klaw.store.records import ChatRef, ExchangeStatus, Segment, from_millis
from klaw.store.shared.rows import exchange_from_row
from klaw.store.summaries.records import ExchangeScan
from klaw.store.summaries.rows import EXCHANGE, SEGMENT

_FINISHED = f"('{ExchangeStatus.COMPLETED.value}', '{ExchangeStatus.TOOL_LIMIT.value}')"
SUMMARIZABLE = f"e.status IN {_FINISHED} AND EXISTS (SELECT 1 FROM messages f WHERE f.rowid = e.final_message_rowid)"
UNSUMMARIZED = "NOT EXISTS (SELECT 1 FROM summaries x WHERE x.exchange_id = e.id)"
# An exchange a scan returns: one to summarize, or one still open (rechecked by the next pass).
WANTED = f"(({SUMMARIZABLE} AND {UNSUMMARIZED}) OR e.status = '{ExchangeStatus.OPEN.value}')"
PENDING = f"SELECT count(*) FROM exchanges e WHERE {SUMMARIZABLE} AND {UNSUMMARIZED}"
NEWEST = "SELECT coalesce(max(id), 0) FROM exchanges"


def scan_result(rows: Sequence[tuple[Any, ...]], scanned_to: int) -> ExchangeScan:
    """A scan's exchanges (selected with `EXCHANGE_COLUMNS`), split into those to summarize and those open."""
    exchanges = sorted((exchange_from_row(row) for row in rows), key=lambda e: e.id)
    return ExchangeScan(
        to_summarize=[e for e in exchanges if e.status is not ExchangeStatus.OPEN],
        still_open=frozenset(e.id for e in exchanges if e.status is ExchangeStatus.OPEN),
        scanned_to=scanned_to,
    )


def segments_to_fold(
    rolling_every: int, rolling_chars: int | None, limit: int, mark: str = "?"
) -> tuple[str, tuple[Any, ...]]:
    """The segments whose summary has something to fold in: an ended segment with new exchange summaries
    or a rolling summary not yet final, an open one with `rolling_every` new summaries (or
    `rolling_chars` of new text). Rows: the segment's id, channel, chat id, start and end."""
    covered = "coalesce(sm.covers_exchange_id, 0)"
    new_count = (
        f"(SELECT count(*) FROM summaries x WHERE x.segment_id = s.id AND x.kind = '{EXCHANGE}'"
        f" AND x.exchange_id > {covered})"
    )
    new_chars = (
        f"(SELECT coalesce(sum(length(x.text)), 0) FROM summaries x WHERE x.segment_id = s.id"
        f" AND x.kind = '{EXCHANGE}' AND x.exchange_id > {covered})"
    )
    by_chars = f" OR {new_chars} >= {mark}" if rolling_chars is not None else ""
    sql = (
        "SELECT s.id, c.channel, c.chat_id, s.started_at, s.ended_at FROM segments s JOIN chats c ON c.id = s.chat"
        f" LEFT JOIN summaries sm ON sm.segment_id = s.id AND sm.kind = '{SEGMENT}'"
        f" WHERE (s.ended_at IS NOT NULL AND ({new_count} > 0 OR (sm.id IS NOT NULL AND NOT sm.final)))"
        f" OR (s.ended_at IS NULL AND ({new_count} >= {mark}{by_chars}))"
        f" ORDER BY s.id LIMIT {mark}"
    )
    return sql, (rolling_every, *(() if rolling_chars is None else (rolling_chars,)), limit)


def segment_of(row: tuple[Any, ...]) -> Segment:
    """A row of `segments_to_fold` as the segment it names."""
    return Segment(
        id=int(row[0]),
        chat=ChatRef(str(row[1]), str(row[2])),
        started_at=from_millis(int(row[3])),
        ended_at=None if row[4] is None else from_millis(int(row[4])),
    )
