"""What the summarizers should do next (the queries of `store/summaries/sqlite/work.py`, in PostgreSQL;
the SQL they share is `summaries/work_sql.py`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import replace

from klaw.store.postgres.connection import Connection, Row, fetch_all, fetch_value
from klaw.store.records import StoredMessage
from klaw.store.shared.rows import EXCHANGE_COLUMNS
from klaw.store.summaries.postgres.rows import load_summaries
from klaw.store.summaries.records import ExchangeScan, SegmentWork
from klaw.store.summaries.rows import EXCHANGE, SEGMENT
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


async def scan_exchanges(connection: Connection, after_id: int, recheck: Collection[int], limit: int) -> ExchangeScan:
    newest = int(await fetch_value(connection, NEWEST))
    rows = await fetch_all(
        connection,
        f"SELECT {EXCHANGE_COLUMNS} FROM exchanges e JOIN chats c ON c.id = e.chat"
        f" WHERE e.id > %s AND {WANTED} ORDER BY e.id LIMIT %s",
        (after_id, limit),
    )
    scanned_to = int(rows[-1][0]) if len(rows) == limit else max(newest, after_id)
    if recheck:
        rows += await fetch_all(
            connection,
            f"SELECT {EXCHANGE_COLUMNS} FROM exchanges e JOIN chats c ON c.id = e.chat"
            f" WHERE e.id = ANY(%s) AND e.id <= %s AND {WANTED} ORDER BY e.id",
            (sorted(recheck), after_id),
        )
    return scan_result(rows, scanned_to)


async def scan_with_messages(
    connection: Connection,
    after_id: int,
    recheck: Collection[int],
    limit: int,
    messages_of: Callable[[Connection, int], Awaitable[list[StoredMessage] | None]],
) -> ExchangeScan:
    """`scan_exchanges`, each exchange to summarize with its records (`messages_of`: the history's read)."""
    scan = await scan_exchanges(connection, after_id, recheck, limit)
    found = {e.id: await messages_of(connection, e.id) for e in scan.to_summarize}
    return replace(scan, messages={exchange_id: m for exchange_id, m in found.items() if m is not None})


async def pending_exchanges(connection: Connection) -> int:
    return int(await fetch_value(connection, PENDING))


async def segment_work(
    connection: Connection,
    *,
    rolling_every: int,
    skip_exchanges: Collection[int],
    limit: int,
    rolling_chars: int | None = None,
) -> list[SegmentWork]:
    rows = await fetch_all(connection, *segments_to_fold(rolling_every, rolling_chars, limit, "%s"))
    skipped = sorted(set(skip_exchanges))
    return [await _work(connection, row, skipped) for row in rows]


async def _work(connection: Connection, row: Row, skipped: list[int]) -> SegmentWork:
    segment = segment_of(row)
    segment_id = segment.id
    current = await load_summaries(connection, "s.segment_id = %s AND s.kind = %s", (segment_id, SEGMENT))
    summary = current[0] if current else None
    covered = (summary.covers_exchange_id or 0) if summary is not None else 0
    blocker = await fetch_value(
        connection,
        f"SELECT min(e.id) FROM exchanges e WHERE e.segment_id = %s AND e.id > %s AND {SUMMARIZABLE}"
        f" AND {UNSUMMARIZED} AND NOT (e.id = ANY(%s))",
        (segment_id, covered, skipped),
    )
    bound = " AND s.exchange_id < %s" if blocker is not None else ""
    new = await load_summaries(
        connection,
        f"s.segment_id = %s AND s.kind = %s AND s.exchange_id > %s{bound} ORDER BY s.exchange_id",
        (segment_id, EXCHANGE, covered, *(() if blocker is None else (int(blocker),))),
    )
    return SegmentWork(segment=segment, summary=summary, new=new, waiting=blocker is not None)
