"""`exchange_summary` / `segment_summary` records folded into `summaries` as they are appended (the
rules of `store/summaries/sqlite/fold.py`): stored only if their exchange and every record they were
written from are still stored; each gets a `summary_records` row so `/forget` can name it."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from klaw.store.postgres.connection import Connection, execute, fetch_one, fetch_value
from klaw.store.postgres.folds import opening, rowid_of
from klaw.store.records import MessageRecord, MessageType
from klaw.store.summaries.log_records import SummaryRecord, summary_to_fold
from klaw.store.summaries.postgres.rows import load_summaries, write_exchange_summary, write_segment_summary
from klaw.store.summaries.records import Summary, SummaryKind
from klaw.store.summaries.rows import SummaryWrite

log = logging.getLogger(__name__)


async def fold_summary_record(
    connection: Connection, record: MessageRecord, chat_key: int, rowid: int, created_at: int, now_millis: int
) -> None:
    parsed = summary_to_fold(record)
    if parsed is None:
        return
    target = await exchange_of_open_record(connection, chat_key, parsed.exchange_open_id)
    if target is None:
        log.info("%s record %s names an exchange that is not stored; not kept", record.type.value, record.id)
        return
    exchange_id, segment_id = target
    is_exchange = parsed.kind is SummaryKind.EXCHANGE
    await execute(
        connection,
        "INSERT INTO summary_records (rowid, segment_id, exchange_id) VALUES (%s, %s, %s) ON CONFLICT (rowid)"
        " DO UPDATE SET segment_id = excluded.segment_id, exchange_id = excluded.exchange_id",
        (rowid, segment_id, exchange_id if is_exchange else None),
    )
    if not await records_exist(connection, chat_key, parsed.sources):
        log.info("%s record %s was written from records since forgotten; not kept", record.type.value, record.id)
        return
    write = SummaryWrite(chat_key, segment_id, parsed.text, parsed.model, created_at, now_millis, rowid)
    if is_exchange:
        await write_exchange_summary(connection, write, exchange_id)
    else:
        await write_segment_summary(
            connection,
            write,
            final=parsed.final,
            covers_exchange_id=exchange_id,
            exchanges_covered=parsed.exchanges_covered,
        )


async def foldable(connection: Connection, chat_key: int, record: MessageRecord) -> bool:
    parsed = SummaryRecord.from_record(record)
    if parsed is None or await exchange_of_open_record(connection, chat_key, parsed.exchange_open_id) is None:
        return False
    return await records_exist(connection, chat_key, parsed.sources)


async def exchange_of_open_record(connection: Connection, chat_key: int, open_id: str) -> tuple[int, int] | None:
    opened = await opening(connection, chat_key, open_id)
    if opened is None:
        return None
    row = await fetch_one(
        connection,
        "SELECT id, segment_id FROM exchanges WHERE chat = %s AND started_at = %s"
        " AND user_message_rowid IS NOT DISTINCT FROM %s::bigint ORDER BY id DESC LIMIT 1",
        (chat_key, opened.started_at, await rowid_of(connection, opened.user_message_id)),
    )
    return None if row is None else (int(row[0]), int(row[1]))


async def open_record_id(connection: Connection, exchange_id: int) -> str | None:
    value = await fetch_value(
        connection,
        "SELECT m.id FROM exchanges e JOIN messages m ON m.chat = e.chat"
        f" AND m.type = '{MessageType.EXCHANGE_OPEN.value}' AND m.created_at = e.started_at WHERE e.id = %s"
        " AND (m.metadata::json ->> 'user_message_id')"
        " IS NOT DISTINCT FROM (SELECT id FROM messages WHERE rowid = e.user_message_rowid)"
        " ORDER BY m.rowid DESC LIMIT 1",
        (exchange_id,),  # the type written in the statement, not bound (decision 427)
    )
    return None if value is None else str(value)


# The ids of the summaries a summary record can have been folded into (the record's rowid, thrice): its
# exchange's or its segment's, as in SQLite (`summaries/sqlite/fold.py`, decision 459).
FOLDED_INTO = (
    "SELECT x.id FROM summary_records r JOIN summaries x ON x.exchange_id = r.exchange_id WHERE r.rowid = %s"
    " UNION ALL SELECT x.id FROM summary_records r JOIN summaries x ON x.segment_id = r.segment_id"
    " AND x.kind = 'segment' WHERE r.rowid = %s AND r.exchange_id IS NULL"
)


async def folded_from(connection: Connection, rowid: int) -> Summary | None:
    """The summary the fold stored from the summary record at `rowid` (None: it kept nothing), found
    through the record's `summary_records` row as the one summary it can be (`FOLDED_INTO`), not among
    every summary of its segment (one an exchange)."""
    found = await load_summaries(connection, f"s.record_rowid = %s AND s.id IN ({FOLDED_INTO})", (rowid,) * 3)
    return found[0] if found else None


async def records_exist(connection: Connection, chat_key: int, ids: Sequence[str]) -> bool:
    wanted = sorted(set(ids))
    if not wanted:
        return True
    found = await fetch_value(
        connection, "SELECT count(*) FROM messages WHERE chat = %s AND id = ANY(%s)", (chat_key, wanted)
    )
    return int(found or 0) == len(wanted)
