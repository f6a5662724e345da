"""What the summarizers should do next (the queries of `store/summaries/sqlite/work.py`, in PostgreSQL)."""

from __future__ import annotations

from collections.abc import Collection

from klaw.store.postgres.connection import Connection, Row, fetch_all, fetch_value
from klaw.store.records import ChatRef, ExchangeStatus, Segment, from_millis
from klaw.store.shared.rows import EXCHANGE_COLUMNS, exchange_from_row
from klaw.store.summaries.postgres.rows import load_summaries
from klaw.store.summaries.records import ExchangeScan, SegmentWork
from klaw.store.summaries.rows import EXCHANGE, SEGMENT

_FINISHED = f"('{ExchangeStatus.COMPLETED.value}', '{ExchangeStatus.TOOL_LIMIT.value}')"
SUMMARIZABLE = f"e.status IN {_FINISHED} AND EXISTS (SELECT 1 FROM messages f WHERE f.rowid = e.final_message_rowid)"
_UNSUMMARIZED = "NOT EXISTS (SELECT 1 FROM summaries x WHERE x.exchange_id = e.id)"
_OPEN = f"e.status = '{ExchangeStatus.OPEN.value}'"


async def scan_exchanges(connection: Connection, after_id: int, recheck: Collection[int], limit: int) -> ExchangeScan:
    newest = int(await fetch_value(connection, "SELECT coalesce(max(id), 0) FROM exchanges"))
    wanted = f"(({SUMMARIZABLE} AND {_UNSUMMARIZED}) OR {_OPEN})"
    rows = await fetch_all(
        connection,
        f"SELECT {EXCHANGE_COLUMNS} FROM exchanges e JOIN chats c ON c.id = e.chat"
        f" WHERE e.id > %s AND {wanted} ORDER BY e.id LIMIT %s",
        (after_id, limit),
    )
    scanned_to = int(rows[-1][0]) if len(rows) == limit else max(newest, after_id)
    if recheck:
        rows += await fetch_all(
            connection,
            f"SELECT {EXCHANGE_COLUMNS} FROM exchanges e JOIN chats c ON c.id = e.chat"
            f" WHERE e.id = ANY(%s) AND e.id <= %s AND {wanted} ORDER BY e.id",
            (sorted(recheck), after_id),
        )
    exchanges = sorted((exchange_from_row(row) for row in rows), key=lambda e: e.id)
    return ExchangeScan(
        to_summarize=[e for e in exchanges if e.status is not ExchangeStatus.OPEN],
        still_open=frozenset(e.id for e in exchanges if e.status is ExchangeStatus.OPEN),
        scanned_to=scanned_to,
    )


async def pending_exchanges(connection: Connection) -> int:
    return int(
        await fetch_value(connection, f"SELECT count(*) FROM exchanges e WHERE {SUMMARIZABLE} AND {_UNSUMMARIZED}")
    )


async def segment_work(
    connection: Connection,
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
    by_chars = f" OR {new_chars} >= %s" if rolling_chars is not None else ""
    rows = await fetch_all(
        connection,
        "SELECT s.id, c.channel, c.chat_id, s.started_at, s.ended_at FROM segments s JOIN chats c ON c.id = s.chat"
        f" LEFT JOIN summaries sm ON sm.segment_id = s.id AND sm.kind = '{SEGMENT}'"
        f" WHERE (s.ended_at IS NOT NULL AND ({new_count} > 0 OR (sm.id IS NOT NULL AND NOT sm.final)))"
        f" OR (s.ended_at IS NULL AND ({new_count} >= %s{by_chars}))"
        " ORDER BY s.id LIMIT %s",
        (rolling_every, *(() if rolling_chars is None else (rolling_chars,)), limit),
    )
    skipped = sorted(set(skip_exchanges))
    return [await _work(connection, row, skipped) for row in rows]


async def _work(connection: Connection, row: Row, skipped: list[int]) -> SegmentWork:
    segment_id = int(row[0])
    segment = Segment(
        id=segment_id,
        chat=ChatRef(str(row[1]), str(row[2])),
        started_at=from_millis(int(row[3])),
        ended_at=None if row[4] is None else from_millis(int(row[4])),
    )
    current = await load_summaries(connection, "s.segment_id = %s AND s.kind = %s", (segment_id, SEGMENT))
    summary = current[0] if current else None
    covered = (summary.covers_exchange_id or 0) if summary is not None else 0
    blocker = await fetch_value(
        connection,
        f"SELECT min(e.id) FROM exchanges e WHERE e.segment_id = %s AND e.id > %s AND {SUMMARIZABLE}"
        f" AND {_UNSUMMARIZED} AND NOT (e.id = ANY(%s))",
        (segment_id, covered, skipped),
    )
    bound = " AND s.exchange_id < %s" if blocker is not None else ""
    new = await load_summaries(
        connection,
        f"s.segment_id = %s AND s.kind = %s AND s.exchange_id > %s{bound} ORDER BY s.exchange_id",
        (segment_id, EXCHANGE, covered, *(() if blocker is None else (int(blocker),))),
    )
    return SegmentWork(segment=segment, summary=summary, new=new, waiting=blocker is not None)
