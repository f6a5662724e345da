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

from collections.abc import Callable, Collection
from dataclasses import replace

import apsw

from klaw.store.records import StoredMessage
from klaw.store.shared.rows import EXCHANGE_COLUMNS
from klaw.store.sqlite.query import fetch_all, fetch_value
from klaw.store.summaries.records import ExchangeScan, SegmentWork
from klaw.store.summaries.rows import EXCHANGE, SEGMENT
from klaw.store.summaries.sqlite.rows import load_summaries
from klaw.store.summaries.work_sql import (
    NEWEST,
    PENDING,
    SUMMARIZABLE,
    UNSUMMARIZED,
    WANTED,
    scan_result,
    segment_of,
    segments_to_fold,
)


def scan_exchanges(connection: apsw.Connection, after_id: int, recheck: Collection[int], limit: int) -> ExchangeScan:
    newest = int(fetch_value(connection, NEWEST))
    rows = fetch_all(
        connection,
        f"SELECT {EXCHANGE_COLUMNS} FROM exchanges e JOIN chats c ON c.id = e.chat"
        f" WHERE e.id > ? AND {WANTED} ORDER BY e.id LIMIT ?",
        (after_id, limit),
    )
    scanned_to = int(rows[-1][0]) if len(rows) == limit else max(newest, after_id)
    if recheck:
        marks = ",".join("?" * len(recheck))
        rows += fetch_all(
            connection,
            f"SELECT {EXCHANGE_COLUMNS} FROM exchanges e JOIN chats c ON c.id = e.chat"
            f" WHERE e.id IN ({marks}) AND e.id <= ? AND {WANTED} ORDER BY e.id",
            (*recheck, after_id),
        )
    return scan_result(rows, scanned_to)


def scan_with_messages(
    connection: apsw.Connection,
    after_id: int,
    recheck: Collection[int],
    limit: int,
    messages_of: Callable[[apsw.Connection, int], list[StoredMessage] | None],
) -> ExchangeScan:
    """`scan_exchanges`, each exchange to summarize with its records (`messages_of`: the history's read)."""
    scan = scan_exchanges(connection, after_id, recheck, limit)
    found = {e.id: messages_of(connection, e.id) for e in scan.to_summarize}
    return replace(scan, messages={exchange_id: m for exchange_id, m in found.items() if m is not None})


def pending_exchanges(connection: apsw.Connection) -> int:
    return int(fetch_value(connection, PENDING))


def segment_work(
    connection: apsw.Connection,
    *,
    rolling_every: int,
    skip_exchanges: Collection[int],
    limit: int,
    rolling_chars: int | None = None,
) -> list[SegmentWork]:
    rows = fetch_all(connection, *segments_to_fold(rolling_every, rolling_chars, limit))
    skipped = sorted(set(skip_exchanges))
    return [_work(connection, row, skipped) for row in rows]


def _work(connection: apsw.Connection, row: tuple[object, ...], skipped: list[int]) -> SegmentWork:
    segment = segment_of(row)
    current = load_summaries(connection, "s.segment_id = ? AND s.kind = ?", (segment.id, SEGMENT))
    summary = current[0] if current else None
    covered = (summary.covers_exchange_id or 0) if summary is not None else 0
    skip_clause = f" AND e.id NOT IN ({','.join('?' * len(skipped))})" if skipped else ""
    blocker = fetch_value(
        connection,
        f"SELECT min(e.id) FROM exchanges e WHERE e.segment_id = ? AND e.id > ? AND {SUMMARIZABLE}"
        f" AND {UNSUMMARIZED}{skip_clause}",
        (segment.id, covered, *skipped),
    )
    bound = " AND s.exchange_id < ?" if blocker is not None else ""
    new = load_summaries(
        connection,
        f"s.segment_id = ? AND s.kind = ? AND s.exchange_id > ?{bound} ORDER BY s.exchange_id",
        (segment.id, EXCHANGE, covered, *(() if blocker is None else (int(blocker),))),
    )
    return SegmentWork(segment=segment, summary=summary, new=new, waiting=blocker is not None)
