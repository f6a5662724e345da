"""`exchange_summary` / `segment_summary` records folded into `summaries` as they are appended.

Called by `SqliteMessages.append_in` inside the append's transaction, like the exchange and archival
folds: live ingestion, crash recovery and `klaw reindex` store the same summaries from the same
records, and a reindex needs no model call. The record names its exchange by the id of its
`exchange_open` record (a segment summary: the newest exchange it covers, which names its segment),
found here as the exchange fold finds it (chat, start, user message), the same in any database
built from the log.

A summary is stored only if its exchange and every record it was written from are still stored:
one written while they were being forgotten is dropped (the guarantee of commit f7817fc, now in
the fold, so a reindex keeps it too). Every summary record whose exchange is found gets a
`summary_records` row, kept or not, so `/forget` can name it (`summary_record_rowids`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Collection, Sequence
from typing import Protocol

import apsw

from klaw.store.records import MessageRecord, MessageType, StoredMessage
from klaw.store.sqlite.exchange_fold import opening, rowid_of
from klaw.store.sqlite.query import fetch_all, fetch_one, fetch_value
from klaw.store.sqlite.read_cache import TableGenerations
from klaw.store.summaries.log_records import SummaryRecord, summary_to_fold
from klaw.store.summaries.records import Summary, SummaryKind
from klaw.store.summaries.rows import SummaryWrite
from klaw.store.summaries.sqlite.rows import load_summaries
from klaw.store.summaries.sqlite.writes import write_exchange_summary, write_segment_summary

log = logging.getLogger(__name__)


def fold_summary_record(
    connection: apsw.Connection,
    record: MessageRecord,
    chat_key: int,
    rowid: int,
    created_at: int,
    now_millis: int,
    checked: tuple[int, int] | None = None,
) -> None:
    """Store the summary a summary record holds (no-op for other types). `checked`: the (exchange,
    segment) the writer's check before logging this very record found (`fold_target`), no message
    deleted since: that check is not made twice (decision 471)."""
    parsed = summary_to_fold(record)
    if parsed is None:
        return
    target = checked or exchange_of_open_record(connection, chat_key, parsed.exchange_open_id)
    if target is None:
        log.info("%s record %s names an exchange that is not stored; not kept", record.type.value, record.id)
        return
    exchange_id, segment_id = target
    is_exchange = parsed.kind is SummaryKind.EXCHANGE
    connection.execute(
        "INSERT OR REPLACE INTO summary_records (rowid, segment_id, exchange_id) VALUES (?, ?, ?)",
        (rowid, segment_id, exchange_id if is_exchange else None),
    )
    if checked is None and not records_exist(connection, chat_key, parsed.sources):
        log.info("%s record %s was written from records since forgotten; not kept", record.type.value, record.id)
        return
    write = SummaryWrite(chat_key, segment_id, parsed.text, parsed.model, created_at, now_millis, rowid)
    if is_exchange:
        write_exchange_summary(connection, write, exchange_id)
    else:
        write_segment_summary(
            connection,
            write,
            final=parsed.final,
            covers_exchange_id=exchange_id,
            exchanges_covered=parsed.exchanges_covered,
        )


def foldable(connection: apsw.Connection, chat_key: int, record: MessageRecord) -> bool:
    """Whether folding `record` now would store its summary (the writer checks before logging it)."""
    return fold_target(connection, chat_key, record) is not None


def fold_target(connection: apsw.Connection, chat_key: int, record: MessageRecord) -> tuple[int, int] | None:
    """The (exchange, segment) folding `record` now would store its summary for; None when it would not."""
    parsed = SummaryRecord.from_record(record)
    target = None if parsed is None else exchange_of_open_record(connection, chat_key, parsed.exchange_open_id)
    if parsed is None or target is None:
        return None
    return target if records_exist(connection, chat_key, parsed.sources) else None


class AppendIn(Protocol):
    """`SqliteMessages.append_in`, as the summary repository appends a summary record with it."""

    def __call__(
        self, connection: apsw.Connection, record: MessageRecord, *, summary_checked: tuple[int, int] | None = None
    ) -> StoredMessage: ...


class FoldChecks:
    """The writer's check of a summary record before it logs it (`fold_target`), kept for the append of
    that record that follows (under the same `Ingestion.exclusive`, memory/summaries/summary_log.py),
    so the fold does not make it again (decision 471). It holds while no message was deleted since:
    `messages_deleted` counts every delete of this connection (read_cache.py), the one way a source, the
    exchange's opening record or the exchange (deleted with its messages) goes."""

    def __init__(self, generations: TableGenerations) -> None:
        self._generations = generations
        self._kept: tuple[str, tuple[int, int], tuple[int, ...]] | None = None

    def _deletes(self) -> tuple[int, ...] | None:
        return self._generations.stamp(("messages_deleted",))

    def check(self, connection: apsw.Connection, chat_key: int, record: MessageRecord) -> bool:
        """`foldable`, its answer kept for `record`'s append (on the database thread, outside a transaction)."""
        self._generations.install(connection)  # once; what counts the deletes
        target, stamp = fold_target(connection, chat_key, record), self._deletes()
        self._kept = None if target is None or stamp is None else (record.id, target, stamp)
        return target is not None

    def take(self, record: MessageRecord) -> tuple[int, int] | None:
        """The kept (exchange, segment) of `record` while still true, else None (the fold checks)."""
        kept, self._kept = self._kept, None
        if kept is None or kept[0] != record.id or kept[2] != self._deletes():
            return None
        return kept[1]


def exchange_of_open_record(connection: apsw.Connection, chat_key: int, open_id: str) -> tuple[int, int] | None:
    """(exchange id, segment id) of the exchange an `exchange_open` record of the chat opened."""
    opened = opening(connection, chat_key, open_id)
    if opened is None:
        return None
    row = fetch_one(
        connection,
        "SELECT id, segment_id FROM exchanges WHERE chat = ? AND started_at = ? AND user_message_rowid IS ?"
        " ORDER BY id DESC LIMIT 1",
        (chat_key, opened.started_at, rowid_of(connection, opened.user_message_id)),
    )
    return None if row is None else (int(row[0]), int(row[1]))


def open_record_id(connection: apsw.Connection, exchange_id: int) -> str | None:
    """The id of the `exchange_open` record that opened the exchange (None: not stored, e.g. an
    exchange from before exchanges were logged)."""
    value = fetch_value(
        connection,
        "SELECT m.id FROM exchanges e JOIN messages m ON m.chat = e.chat AND m.type = ? AND m.created_at = e.started_at"
        " WHERE e.id = ? AND json_extract(m.metadata, '$.user_message_id')"
        " IS (SELECT id FROM messages WHERE rowid = e.user_message_rowid) ORDER BY m.rowid DESC LIMIT 1",
        (MessageType.EXCHANGE_OPEN.value, exchange_id),
    )
    return None if value is None else str(value)


# The ids of the summaries a summary record can have been folded into (`?1`: the record's rowid): its
# exchange's (an exchange summary) or its segment's (a segment summary), each one entry of an index.
FOLDED_INTO = (
    "SELECT x.id FROM summary_records r JOIN summaries x ON x.exchange_id = r.exchange_id WHERE r.rowid = ?1"
    " UNION ALL SELECT x.id FROM summary_records r JOIN summaries x ON x.segment_id = r.segment_id"
    " AND x.kind = 'segment' WHERE r.rowid = ?1 AND r.exchange_id IS NULL"
)


def folded_from(connection: apsw.Connection, rowid: int) -> Summary | None:
    """The summary the fold stored from the summary record at `rowid` (None: it kept nothing), found
    through the record's `summary_records` row as the one summary it can be (`FOLDED_INTO`), not among
    every summary of its segment: a segment holds a summary for each of its exchanges, and checking each
    one's record cost the database thread ~16 ms a summary at 100k stored messages (decision 459)."""
    found = load_summaries(connection, f"s.record_rowid = ?1 AND s.id IN ({FOLDED_INTO})", (rowid,))
    return found[0] if found else None


def records_exist(connection: apsw.Connection, chat_key: int, ids: Sequence[str]) -> bool:
    wanted = sorted(set(ids))
    if not wanted:
        return True
    # Each id looked up in the id index; `+chat` keeps the planner off the chat's index, which it takes
    # on a database without statistics (before the first `PRAGMA optimize`) and reads every message of
    # the chat with (64 ms a summary at 100k messages).
    found = fetch_value(
        connection,
        "SELECT count(*) FROM messages WHERE +chat = ? AND id IN (SELECT value FROM json_each(?))",
        (chat_key, json.dumps(wanted)),
    )
    return int(found or 0) == len(wanted)


def summary_record_rowids(connection: apsw.Connection, exchange_ids: Collection[int]) -> list[int]:
    """The summary records that retell these exchanges: their exchange summaries and every segment
    summary (each rolling version) of their segments, as `delete_summaries_in` deletes them."""
    wanted = json.dumps(sorted(set(exchange_ids)))
    rows = fetch_all(
        connection,
        "SELECT rowid FROM summary_records WHERE exchange_id IN (SELECT value FROM json_each(?))"
        " OR (exchange_id IS NULL AND segment_id IN"
        " (SELECT segment_id FROM exchanges WHERE id IN (SELECT value FROM json_each(?))))"
        " ORDER BY rowid",
        (wanted, wanted),
    )
    return [int(row[0]) for row in rows]
