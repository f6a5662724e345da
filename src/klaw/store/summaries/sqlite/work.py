"""What the summarizers should do next, as SQL: exchanges without a summary, segments to fold.

An exchange is *summarizable* when it ended with a final reply that is still stored (completed, or
cut at the tool-call limit with its message); failed turns have no answer to summarize and open ones
are in progress (or were abandoned by a crash: they stay open, see `exchange_records.py`).

The exchange scan is incremental: the summarizer keeps the highest id it has looked at and passes
the open exchanges it saw back in `recheck`, so a pass reads only new rows instead of the whole
table. Segment folds are contiguous: a segment summary folds in exchange summaries in exchange order
and stops before the first summarizable exchange whose own summary is not written yet, so a late
exchange summary is never skipped over.
"""

from __future__ import annotations

from collections.abc import Collection

import apsw

from klaw.store.records import ChatRef, ExchangeStatus, Segment, from_millis
from klaw.store.shared.rows import EXCHANGE_COLUMNS, exchange_from_row
from klaw.store.sqlite.query import fetch_all, fetch_value
from klaw.store.summaries.records import ExchangeScan, SegmentWork
from klaw.store.summaries.rows import EXCHANGE, SEGMENT
from klaw.store.summaries.sqlite.rows import load_summaries

_FINISHED = f"('{ExchangeStatus.COMPLETED.value}', '{ExchangeStatus.TOOL_LIMIT.value}')"
SUMMARIZABLE = f"e.status IN {_FINISHED} AND EXISTS (SELECT 1 FROM messages f WHERE f.rowid = e.final_message_rowid)"
_UNSUMMARIZED = "NOT EXISTS (SELECT 1 FROM summaries x WHERE x.exchange_id = e.id)"
_OPEN = f"e.status = '{ExchangeStatus.OPEN.value}'"


def scan_exchanges(connection: apsw.Connection, after_id: int, recheck: Collection[int], limit: int) -> ExchangeScan:
    newest = int(fetch_value(connection, "SELECT coalesce(max(id), 0) FROM exchanges"))
    wanted = f"(({SUMMARIZABLE} AND {_UNSUMMARIZED}) OR {_OPEN})"
    rows = fetch_all(
        connection,
        f"SELECT {EXCHANGE_COLUMNS} FROM exchanges e JOIN chats c ON c.id = e.chat"
        f" WHERE e.id > ? AND {wanted} ORDER BY e.id LIMIT ?",
        (after_id, limit),
    )
    scanned_to = int(rows[-1][0]) if len(rows) == limit else max(newest, after_id)
    if recheck:
        marks = ",".join("?" * len(recheck))
        rows += fetch_all(
            connection,
            f"SELECT {EXCHANGE_COLUMNS} FROM exchanges e JOIN chats c ON c.id = e.chat"
            f" WHERE e.id IN ({marks}) AND e.id <= ? AND {wanted} ORDER BY e.id",
            (*recheck, after_id),
        )
    exchanges = sorted((exchange_from_row(row) for row in rows), key=lambda e: e.id)
    return ExchangeScan(
        to_summarize=[e for e in exchanges if e.status is not ExchangeStatus.OPEN],
        still_open=frozenset(e.id for e in exchanges if e.status is ExchangeStatus.OPEN),
        scanned_to=scanned_to,
    )


def pending_exchanges(connection: apsw.Connection) -> int:
    return int(fetch_value(connection, f"SELECT count(*) FROM exchanges e WHERE {SUMMARIZABLE} AND {_UNSUMMARIZED}"))


def segment_work(
    connection: apsw.Connection,
    *,
    rolling_every: int,
    skip_exchanges: Collection[int],
    limit: int,
    rolling_chars: int | None = None,
) -> list[SegmentWork]:
    covered = "coalesce(sm.covers_exchange_id, 0)"
    new_count = (
        f"(SELECT count(*) FROM summaries x WHERE x.segment_id = s.id AND x.kind = '{EXCHANGE}'"
        f" AND x.exchange_id > {covered})"
    )
    new_chars = (
        f"(SELECT coalesce(sum(length(x.text)), 0) FROM summaries x WHERE x.segment_id = s.id"
        f" AND x.kind = '{EXCHANGE}' AND x.exchange_id > {covered})"
    )
    by_chars = f" OR {new_chars} >= ?" if rolling_chars is not None else ""
    rows = fetch_all(
        connection,
        "SELECT s.id, c.channel, c.chat_id, s.started_at, s.ended_at FROM segments s JOIN chats c ON c.id = s.chat"
        f" LEFT JOIN summaries sm ON sm.segment_id = s.id AND sm.kind = '{SEGMENT}'"
        f" WHERE (s.ended_at IS NOT NULL AND ({new_count} > 0 OR (sm.id IS NOT NULL AND sm.final = 0)))"
        f" OR (s.ended_at IS NULL AND ({new_count} >= ?{by_chars}))"
        " ORDER BY s.id LIMIT ?",
        (rolling_every, *(() if rolling_chars is None else (rolling_chars,)), limit),
    )
    skipped = sorted(set(skip_exchanges))
    return [_work(connection, row, skipped) for row in rows]


def _work(connection: apsw.Connection, row: tuple[object, ...], skipped: list[int]) -> SegmentWork:
    segment_id = int(str(row[0]))
    segment = Segment(
        id=segment_id,
        chat=ChatRef(str(row[1]), str(row[2])),
        started_at=from_millis(int(str(row[3]))),
        ended_at=None if row[4] is None else from_millis(int(str(row[4]))),
    )
    current = load_summaries(connection, "s.segment_id = ? AND s.kind = ?", (segment_id, SEGMENT))
    summary = current[0] if current else None
    covered = (summary.covers_exchange_id or 0) if summary is not None else 0
    skip_clause = f" AND e.id NOT IN ({','.join('?' * len(skipped))})" if skipped else ""
    blocker = fetch_value(
        connection,
        f"SELECT min(e.id) FROM exchanges e WHERE e.segment_id = ? AND e.id > ? AND {SUMMARIZABLE}"
        f" AND {_UNSUMMARIZED}{skip_clause}",
        (segment_id, covered, *skipped),
    )
    bound = " AND s.exchange_id < ?" if blocker is not None else ""
    new = load_summaries(
        connection,
        f"s.segment_id = ? AND s.kind = ? AND s.exchange_id > ?{bound} ORDER BY s.exchange_id",
        (segment_id, EXCHANGE, covered, *(() if blocker is None else (int(blocker),))),
    )
    return SegmentWork(segment=segment, summary=summary, new=new, waiting=blocker is not None)
