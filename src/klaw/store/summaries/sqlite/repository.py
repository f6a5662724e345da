"""`SqliteSummaries`: the summary repository on klaw.db (see `store/summaries/protocol.py`).

Writes queue a summary's embedding in the same transaction as its text, so no crash leaves an
embeddable summary without its job; the queries deciding what to summarize live in
`work.py`, the vector table in `vectors.py`.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import apsw

from klaw.store.protocol import LogFirst, StorageError
from klaw.store.records import ChatRef, Exchange, MessageRecord, StoredMessage, to_millis
from klaw.store.shared.vector_binding import bound
from klaw.store.sqlite.chats import ChatKeys
from klaw.store.sqlite.connection import SqliteDatabase
from klaw.store.sqlite.job_ledger import JobLedger
from klaw.store.sqlite.query import fetch_all, fetch_one
from klaw.store.sqlite.read_cache import ReadCache, TableGenerations
from klaw.store.sqlite.vector_puts import PutPart, nothing_after, put_one
from klaw.store.sqlite.vector_tables import vector_blobs
from klaw.store.summaries.records import (
    SUMMARY_TARGET,
    ExchangeScan,
    SegmentWork,
    Summary,
    SummaryCounts,
    SummaryHit,
    SummaryToLog,
)
from klaw.store.summaries.rows import EXCHANGE, SEGMENT, SummaryWrite
from klaw.store.summaries.sqlite.fold import AppendIn, FoldChecks, foldable, folded_from, open_record_id
from klaw.store.summaries.sqlite.rows import EMBEDDABLE, load_summaries, load_summary, queue_summary_job
from klaw.store.summaries.sqlite.vectors import (
    bind_summary_vectors,
    insert_vectors,
    nearest_exchange_summaries,
    nearest_segment_summaries,
    query_array,
    rebuild_vectors,
    summary_hits,
    vector_count,
)
from klaw.store.summaries.sqlite.work import pending_exchanges, scan_with_messages, segment_work
from klaw.store.summaries.sqlite.writes import write_exchange_summary, write_segment_summary

if TYPE_CHECKING:  # numpy where a vector is touched: opening the store needs none (decision 437)
    import numpy as np
    import numpy.typing as npt


def delete_summaries_in(
    connection: apsw.Connection, exchange_ids: Collection[int], segment_ids: Collection[int]
) -> int:
    """Inside the caller's transaction, delete the summaries of these exchanges and the segment
    summaries of their segments (which retell them), and every summary of these segments; vectors go
    with them by trigger. Returns how many summaries were deleted."""
    deleted = 0
    exchanges = sorted(set(exchange_ids))
    if exchanges:
        marks = ",".join("?" * len(exchanges))
        connection.execute(
            f"DELETE FROM summaries WHERE kind = ? AND segment_id IN (SELECT segment_id FROM exchanges"
            f" WHERE id IN ({marks}))",
            (SEGMENT, *exchanges),
        )
        deleted += connection.changes()
        connection.execute(f"DELETE FROM summaries WHERE exchange_id IN ({marks})", exchanges)
        deleted += connection.changes()
    segments = sorted(set(segment_ids))
    if segments:
        connection.execute(f"DELETE FROM summaries WHERE segment_id IN ({','.join('?' * len(segments))})", segments)
        deleted += connection.changes()
    return int(deleted)


class SqliteSummaries:
    def __init__(
        self,
        db: SqliteDatabase,
        chats: ChatKeys,
        clock: Callable[[], datetime],
        generations: TableGenerations,
        ledger: JobLedger,
        append_in: AppendIn,
        messages_of: Callable[[apsw.Connection, int], list[StoredMessage] | None],
    ) -> None:
        self._db = db
        self._append_in = append_in  # `SqliteMessages.append_in`: a summary record's row and its fold
        self._messages_of = messages_of  # `history.exchange_messages_in`: the scan brings each exchange's
        self._ledger = ledger  # `put_vectors` pays the summaries' embedding jobs (job_ledger.py)
        self._checks = FoldChecks(generations)  # the log's check of a summary record kept for its fold (471)
        self._chats = chats
        self._clock = clock
        # What every turn reads of a segment's summaries, kept while no segment summary is written and
        # no message deleted (a summary names its record): read_cache.py, decision 197.
        watched = ("segment_summaries", "messages_deleted")
        self._segment_summaries: ReadCache[int, Summary | None] = ReadCache(db, generations, watched)
        self._past_segments: ReadCache[tuple[ChatRef, int | None], bool] = ReadCache(db, generations, watched)
        self._bound: tuple[str, int] | None = None  # (embedder id, dim) of bind_embedder

    async def bind_embedder(self, embedder_id: str, dim: int) -> int:
        now = to_millis(self._clock())
        queued = await self._db.run(lambda connection: bind_summary_vectors(connection, embedder_id, dim, now))
        self._bound = (embedder_id, dim)
        return queued

    # -- what to summarize -------------------------------------------------------------------------

    async def scan_exchanges(self, after_id: int, recheck: Collection[int], limit: int) -> ExchangeScan:
        ids = sorted(set(recheck))
        # On a read connection, beside the writes, as the exchanges' records were read (decision 216).
        return await self._db.read(lambda c: scan_with_messages(c, after_id, ids, limit, self._messages_of))

    async def pending_exchanges(self) -> int:
        return await self._db.run(pending_exchanges)

    async def segment_work(
        self,
        *,
        rolling_every: int,
        skip_exchanges: Collection[int],
        limit: int,
        rolling_chars: int | None = None,
    ) -> list[SegmentWork]:
        skipped = sorted(set(skip_exchanges))
        return await self._db.run(
            lambda connection: segment_work(
                connection,
                rolling_every=rolling_every,
                rolling_chars=rolling_chars,
                skip_exchanges=skipped,
                limit=limit,
            )
        )

    # -- writing -----------------------------------------------------------------------------------

    async def save_exchange_summary(
        self, exchange: Exchange, text: str, model: str, at: datetime, *, sources: Sequence[int] = ()
    ) -> Summary | None:
        when, queued_at = to_millis(at), to_millis(self._clock())
        rowids = sorted(set(sources))

        def write(connection: apsw.Connection) -> Summary | None:
            with connection:
                exists = fetch_one(connection, "SELECT 1 FROM exchanges WHERE id = ?", (exchange.id,))
                if exists is None or not _all_exist(connection, "messages", "rowid", rowids):
                    return None  # forgotten while the model was writing: nothing of it may stay
                chat_key = self._chats.ensure(connection, exchange.chat)
                write_ = SummaryWrite(chat_key, exchange.segment_id, text, model, when, queued_at)
                summary_id = write_exchange_summary(connection, write_, exchange.id)
            return _loaded(connection, summary_id)

        return await self._db.run(write)

    async def save_segment_summary(
        self,
        segment_id: int,
        text: str,
        model: str,
        *,
        final: bool,
        covers_exchange_id: int | None,
        exchanges_covered: int,
        at: datetime,
        sources: Sequence[int] = (),
    ) -> Summary | None:
        when, queued_at = to_millis(at), to_millis(self._clock())
        summary_ids = sorted(set(sources))

        def write(connection: apsw.Connection) -> Summary | None:
            with connection:
                chat = fetch_one(connection, "SELECT chat FROM segments WHERE id = ?", (segment_id,))
                if chat is None or not _all_exist(connection, "summaries", "id", summary_ids):
                    return None  # forgotten while the model was writing: nothing of it may stay
                summary_id = write_segment_summary(
                    connection,
                    SummaryWrite(int(chat[0]), segment_id, text, model, when, queued_at),
                    final=final,
                    covers_exchange_id=covers_exchange_id,
                    exchanges_covered=exchanges_covered,
                )
            return _loaded(connection, summary_id)

        return await self._db.run(write)

    async def mark_final(self, summary_id: int, at: datetime) -> Summary | None:
        when, queued_at = to_millis(at), to_millis(self._clock())

        def write(connection: apsw.Connection) -> Summary | None:
            with connection:
                connection.execute(
                    "UPDATE summaries SET final = 1, updated_at = ? WHERE id = ? AND kind = ?",
                    (when, summary_id, SEGMENT),
                )
                if not connection.changes():
                    return None
                queue_summary_job(connection, summary_id, queued_at)
            return load_summary(connection, summary_id)

        return await self._db.run(write)

    # -- the log's summary records -----------------------------------------------------------------

    async def exchange_record_id(self, exchange_id: int) -> str | None:
        return await self._db.run(lambda connection: open_record_id(connection, exchange_id))

    async def foldable(self, record: MessageRecord) -> bool:
        def query(connection: apsw.Connection) -> bool:
            chat_key = self._chats.find(connection, record.chat)
            return chat_key is not None and foldable(connection, chat_key, record)

        return await self._db.run(query)

    async def summary_record_to_log(self, exchange_id: int, build: Callable[[str], MessageRecord]) -> SummaryToLog:
        def query(connection: apsw.Connection) -> SummaryToLog:
            opened = open_record_id(connection, exchange_id)
            if opened is None:
                return SummaryToLog(opened=False, record=None)
            record = build(opened)
            chat_key = self._chats.find(connection, record.chat)
            kept = chat_key is not None and self._checks.check(connection, chat_key, record)
            return SummaryToLog(opened=True, record=record if kept else None)

        return await self._db.run(query)

    async def append_record(
        self, record: MessageRecord, *, log_first: LogFirst | None = None
    ) -> tuple[StoredMessage, Summary | None]:
        def insert(connection: apsw.Connection) -> tuple[StoredMessage, Summary | None]:
            stored = self._append_in(connection, record, summary_checked=self._checks.take(record))
            return stored, folded_from(connection, stored.rowid)

        return await (self._db.run(insert) if log_first is None else self._db.run_after(log_first, insert))

    async def unlogged(self, limit: int) -> list[Summary]:
        return await self._db.run(
            lambda connection: load_summaries(
                connection, "s.record_rowid IS NULL ORDER BY s.kind = ?, s.id LIMIT ?", (SEGMENT, limit)
            )
        )

    # -- reading -----------------------------------------------------------------------------------

    async def get(self, summary_id: int) -> Summary | None:
        return await self._db.run(lambda connection: load_summary(connection, summary_id))

    async def segment_summary(self, segment_id: int) -> Summary | None:
        def query(connection: apsw.Connection) -> Summary | None:
            found = load_summaries(connection, "s.segment_id = ? AND s.kind = ?", (segment_id, SEGMENT))
            return found[0] if found else None

        return await self._segment_summaries.get(segment_id, lambda: self._db.run(query))

    async def exchange_summary(self, exchange_id: int) -> Summary | None:
        return await self._first("s.exchange_id = ?", (exchange_id,))

    async def in_segment(self, segment_id: int) -> list[Summary]:
        return await self._db.run(
            lambda connection: load_summaries(
                connection, "s.segment_id = ? ORDER BY s.kind = ?, s.exchange_id", (segment_id, EXCHANGE)
            )
        )

    async def counts(self) -> SummaryCounts:
        def query(connection: apsw.Connection) -> SummaryCounts:
            rows = fetch_all(connection, "SELECT kind, final, count(*) FROM summaries GROUP BY kind, final")
            by = {(str(kind), bool(final)): int(n) for kind, final, n in rows}
            return SummaryCounts(
                exchanges=sum(n for (kind, _), n in by.items() if kind == EXCHANGE),
                segments_final=by.get((SEGMENT, True), 0),
                segments_rolling=by.get((SEGMENT, False), 0),
                vectors=vector_count(connection),
            )

        return await self._db.run(query)

    # -- vectors -----------------------------------------------------------------------------------

    async def texts(self, summary_ids: Sequence[int]) -> dict[int, str]:
        if not summary_ids:
            return {}
        wanted = list(summary_ids)

        def query(connection: apsw.Connection) -> dict[int, str]:
            marks = ",".join("?" * len(wanted))
            rows = fetch_all(
                connection, f"SELECT s.id, s.text FROM summaries s WHERE s.id IN ({marks}) AND {EMBEDDABLE}", wanted
            )
            return {int(row[0]): str(row[1]) for row in rows}

        return await self._db.run(query)

    async def put_vectors(self, vectors: Sequence[tuple[int, npt.NDArray[np.float32]]]) -> int:
        return 0 if not vectors else await put_one(self._db, self._ledger, self.put_part(vectors))

    def put_part(self, vectors: Sequence[tuple[int, npt.NDArray[np.float32]]]) -> PutPart:
        """`put_vectors` as one part of a transaction storing several targets' vectors (vector_puts.py)."""
        embedder_id, dim = bound(self._bound, "summary")
        blobs = vector_blobs(vectors, dim, "summary")

        def insert(connection: apsw.Connection) -> tuple[int, Callable[[], None]]:
            return insert_vectors(connection, blobs, embedder_id, dim), nothing_after

        return PutPart(SUMMARY_TARGET, [summary_id for summary_id, _ in blobs], insert)

    async def has_past_segments(self, chat: ChatRef, *, exclude_segment_id: int | None) -> bool:
        def query(connection: apsw.Connection) -> bool:
            chat_key = self._chats.find(connection, chat)
            if chat_key is None:
                return False
            row = fetch_one(
                connection,
                "SELECT 1 FROM summaries WHERE chat = ? AND kind = ? AND final = 1 AND segment_id IS NOT ? LIMIT 1",
                (chat_key, SEGMENT, exclude_segment_id),
            )
            return row is not None

        return await self._past_segments.get((chat, exclude_segment_id), lambda: self._db.run(query))

    async def nearest_segments(
        self, chat: ChatRef, vector: npt.NDArray[np.float32], *, limit: int, exclude_segment_id: int | None
    ) -> list[SummaryHit]:
        query_vector = query_array(vector)

        def query(connection: apsw.Connection) -> list[SummaryHit]:
            chat_key = self._chats.find(connection, chat)
            if chat_key is None:
                return []
            found = nearest_segment_summaries(connection, chat_key, query_vector, limit, exclude_segment_id)
            return summary_hits(connection, found, "segments", "segment_id")

        return await self._db.run(query)

    async def nearest_exchanges(
        self, chat: ChatRef, vector: npt.NDArray[np.float32], *, segment_ids: Sequence[int], limit_per_segment: int
    ) -> list[SummaryHit]:
        query_vector = query_array(vector)
        wanted = list(dict.fromkeys(segment_ids))

        def query(connection: apsw.Connection) -> list[SummaryHit]:
            chat_key = self._chats.find(connection, chat)
            if chat_key is None:
                return []
            found = [
                hit
                for segment_id in wanted
                for hit in nearest_exchange_summaries(connection, chat_key, segment_id, query_vector, limit_per_segment)
            ]
            hits = summary_hits(connection, found, "exchanges", "exchange_id")
            return sorted(hits, key=lambda hit: -hit.similarity)

        return await self._db.run(query)

    async def reembed_all(self) -> int:
        now = to_millis(self._clock())
        return await self._db.run(lambda connection: rebuild_vectors(connection, now))

    # -- privacy -----------------------------------------------------------------------------------

    async def forget_exchanges(self, exchange_ids: Collection[int]) -> int:
        ids = sorted(set(exchange_ids))
        return await self._db.run(lambda connection: _in_transaction(connection, ids, ()))

    async def forget_segments(self, segment_ids: Collection[int]) -> int:
        ids = sorted(set(segment_ids))
        return await self._db.run(lambda connection: _in_transaction(connection, (), ids))

    # -- helpers -----------------------------------------------------------------------------------

    async def _first(self, where: str, params: Sequence[object]) -> Summary | None:
        found = await self._db.run(lambda connection: load_summaries(connection, where, params))
        return found[0] if found else None


def _in_transaction(connection: apsw.Connection, exchanges: Collection[int], segments: Collection[int]) -> int:
    with connection:
        deleted = delete_summaries_in(connection, exchanges, segments)
    return deleted


def _all_exist(connection: apsw.Connection, table: str, column: str, ids: Sequence[int]) -> bool:
    if not ids:
        return True
    marks = ",".join("?" * len(ids))
    row = fetch_one(connection, f"SELECT count(*) FROM {table} WHERE {column} IN ({marks})", ids)
    return row is not None and int(row[0]) == len(ids)


def _loaded(connection: apsw.Connection, summary_id: int) -> Summary:
    summary = load_summary(connection, summary_id)
    if summary is None:
        raise StorageError(f"summary {summary_id} is missing")
    return summary
