"""`PostgresSummaries`: the summary repository on PostgreSQL (see `store/summaries/protocol.py`).

The same rules as `store/summaries/sqlite/repository.py`. Vectors live in `summary_vectors` (exact
KNN per chat and kind); a summary's vector goes with it (`ON DELETE CASCADE`) or when its text changes
(trigger), and vectors of another embedder are dropped and every embeddable summary queued again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import datetime

import numpy as np
import numpy.typing as npt

from klaw.store.postgres.chats import ChatKeys
from klaw.store.postgres.connection import Connection, PostgresDatabase, execute, fetch_all, fetch_one, fetch_value
from klaw.store.postgres.folds import delete_summaries_in
from klaw.store.postgres.vector_puts import PutPart, nothing_after, run_puts
from klaw.store.postgres.vectors import SUMMARY_VECTORS, bound_embedder, checked, query_vector, record_embedder
from klaw.store.protocol import LogFirst, StorageError
from klaw.store.records import ChatRef, Exchange, MessageRecord, StoredMessage, from_millis, to_millis
from klaw.store.shared.paid_jobs import PaidJobs
from klaw.store.shared.vector_binding import bound
from klaw.store.summaries.postgres.fold import foldable, folded_from, open_record_id
from klaw.store.summaries.postgres.rows import (
    EMBEDDABLE,
    load_summaries,
    load_summary,
    queue_summary_job,
    write_exchange_summary,
    write_segment_summary,
)
from klaw.store.summaries.postgres.work import pending_exchanges, scan_with_messages, segment_work
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


async def _queue_all(connection: Connection, now_millis: int) -> int:
    ids = [int(row[0]) for row in await fetch_all(connection, f"SELECT s.id FROM summaries s WHERE {EMBEDDABLE}")]
    for summary_id in ids:
        await queue_summary_job(connection, summary_id, now_millis)
    return len(ids)


class PostgresSummaries:
    def __init__(
        self,
        db: PostgresDatabase,
        chats: ChatKeys,
        clock: Callable[[], datetime],
        paid: PaidJobs,
        append_in: Callable[[Connection, MessageRecord], Awaitable[StoredMessage]],
        messages_of: Callable[[Connection, int], Awaitable[list[StoredMessage] | None]],
    ) -> None:
        self._append_in = append_in  # `PostgresMessages.append_in`: a summary record's row and its fold
        self._messages_of = messages_of  # `history.exchange_messages_in`: the scan brings each exchange's
        self._paid = paid  # `put_vectors` pays the summaries' embedding jobs (decision 229)
        self._db = db
        self._chats = chats
        self._clock = clock
        self._bound: tuple[str, int] | None = None

    async def bind_embedder(self, embedder_id: str, dim: int) -> int:
        now = to_millis(self._clock())
        queued = 0
        async with self._db.transaction() as connection:
            bound = await bound_embedder(connection, SUMMARY_VECTORS)
            if bound is not None and bound != (embedder_id, dim):
                # Another embedder's vectors: dropped, every embeddable summary queued again; the new
                # embedder is recorded with the first new vector (`put_vectors`), as in SQLite.
                await execute(connection, f"DELETE FROM {SUMMARY_VECTORS}")
                await execute(connection, "DELETE FROM index_meta WHERE table_name = %s", (SUMMARY_VECTORS,))
                queued = await _queue_all(connection, now)
        self._bound = (embedder_id, dim)
        return queued

    async def scan_exchanges(self, after_id: int, recheck: Collection[int], limit: int) -> ExchangeScan:
        async with self._db.connection() as connection:
            return await scan_with_messages(connection, after_id, sorted(set(recheck)), limit, self._messages_of)

    async def pending_exchanges(self) -> int:
        async with self._db.connection() as connection:
            return await pending_exchanges(connection)

    async def segment_work(
        self,
        *,
        rolling_every: int,
        skip_exchanges: Collection[int],
        limit: int,
        rolling_chars: int | None = None,
    ) -> list[SegmentWork]:
        async with self._db.connection() as connection:
            return await segment_work(
                connection,
                rolling_every=rolling_every,
                rolling_chars=rolling_chars,
                skip_exchanges=skip_exchanges,
                limit=limit,
            )

    async def save_exchange_summary(
        self, exchange: Exchange, text: str, model: str, at: datetime, *, sources: Sequence[int] = ()
    ) -> Summary | None:
        when, queued_at = to_millis(at), to_millis(self._clock())
        async with self._db.transaction() as connection:
            exists = await fetch_one(connection, "SELECT 1 FROM exchanges WHERE id = %s", (exchange.id,))
            if exists is None or not await _all_exist(connection, "messages", "rowid", sources):
                return None  # forgotten while the model was writing: nothing of it may stay
            chat_key = await self._chats.ensure(connection, exchange.chat)
            write = SummaryWrite(chat_key, exchange.segment_id, text, model, when, queued_at)
            summary_id = await write_exchange_summary(connection, write, exchange.id)
            return await _loaded(connection, summary_id)

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
        async with self._db.transaction() as connection:
            chat = await fetch_one(connection, "SELECT chat FROM segments WHERE id = %s", (segment_id,))
            if chat is None or not await _all_exist(connection, "summaries", "id", sources):
                return None
            summary_id = await write_segment_summary(
                connection,
                SummaryWrite(int(chat[0]), segment_id, text, model, when, queued_at),
                final=final,
                covers_exchange_id=covers_exchange_id,
                exchanges_covered=exchanges_covered,
            )
            return await _loaded(connection, summary_id)

    async def mark_final(self, summary_id: int, at: datetime) -> Summary | None:
        when, queued_at = to_millis(at), to_millis(self._clock())
        async with self._db.transaction() as connection:
            changed = await execute(
                connection,
                "UPDATE summaries SET final = true, updated_at = %s WHERE id = %s AND kind = %s",
                (when, summary_id, SEGMENT),
            )
            if not changed:
                return None
            await queue_summary_job(connection, summary_id, queued_at)
            return await load_summary(connection, summary_id)

    async def exchange_record_id(self, exchange_id: int) -> str | None:
        async with self._db.connection() as connection:
            return await open_record_id(connection, exchange_id)

    async def foldable(self, record: MessageRecord) -> bool:
        async with self._db.connection() as connection:
            chat_key = await self._chats.find(connection, record.chat)
            return chat_key is not None and await foldable(connection, chat_key, record)

    async def summary_record_to_log(self, exchange_id: int, build: Callable[[str], MessageRecord]) -> SummaryToLog:
        async with self._db.connection() as connection:
            opened = await open_record_id(connection, exchange_id)
            if opened is None:
                return SummaryToLog(opened=False, record=None)
            record = build(opened)
            chat_key = await self._chats.find(connection, record.chat)
            kept = chat_key is not None and await foldable(connection, chat_key, record)
        return SummaryToLog(opened=True, record=record if kept else None)

    async def append_record(
        self, record: MessageRecord, *, log_first: LogFirst | None = None
    ) -> tuple[StoredMessage, Summary | None]:
        if log_first is not None:  # none from ingestion: this store keeps the log (`log_records`)
            await asyncio.to_thread(log_first)

        async def insert(connection: Connection) -> tuple[StoredMessage, Summary | None]:
            stored = await self._append_in(connection, record)
            return stored, await folded_from(connection, stored.rowid)

        return await self._db.in_transaction(insert)

    async def unlogged(self, limit: int) -> list[Summary]:
        async with self._db.connection() as connection:
            return await load_summaries(
                connection, "s.record_rowid IS NULL ORDER BY s.kind = %s, s.id LIMIT %s", (SEGMENT, limit)
            )

    async def get(self, summary_id: int) -> Summary | None:
        async with self._db.connection() as connection:
            return await load_summary(connection, summary_id)

    async def segment_summary(self, segment_id: int) -> Summary | None:
        return await self._first("s.segment_id = %s AND s.kind = %s", (segment_id, SEGMENT))

    async def exchange_summary(self, exchange_id: int) -> Summary | None:
        return await self._first("s.exchange_id = %s", (exchange_id,))

    async def in_segment(self, segment_id: int) -> list[Summary]:
        async with self._db.connection() as connection:
            return await load_summaries(
                connection, "s.segment_id = %s ORDER BY s.kind = %s, s.exchange_id", (segment_id, EXCHANGE)
            )

    async def counts(self) -> SummaryCounts:
        async with self._db.connection() as connection:
            rows = await fetch_all(connection, "SELECT kind, final, count(*) FROM summaries GROUP BY kind, final")
            vectors = int(await fetch_value(connection, f"SELECT count(*) FROM {SUMMARY_VECTORS}"))
        by = {(str(kind), bool(final)): int(n) for kind, final, n in rows}
        return SummaryCounts(
            exchanges=sum(n for (kind, _), n in by.items() if kind == EXCHANGE),
            segments_final=by.get((SEGMENT, True), 0),
            segments_rolling=by.get((SEGMENT, False), 0),
            vectors=vectors,
        )

    async def texts(self, summary_ids: Sequence[int]) -> dict[int, str]:
        if not summary_ids:
            return {}
        async with self._db.connection() as connection:
            rows = await fetch_all(
                connection,
                f"SELECT s.id, s.text FROM summaries s WHERE s.id = ANY(%s) AND {EMBEDDABLE}",
                (list(summary_ids),),
            )
        return {int(row[0]): str(row[1]) for row in rows}

    async def put_vectors(self, vectors: Sequence[tuple[int, npt.NDArray[np.float32]]]) -> int:
        if not vectors:
            return 0
        return (await run_puts(self._db, self._paid, [self.put_part(vectors)]))[0]

    def put_part(self, vectors: Sequence[tuple[int, npt.NDArray[np.float32]]]) -> PutPart:
        """`put_vectors` as one part of a transaction storing several targets' vectors (vector_puts.py)."""
        embedder_id, dim = bound(self._bound, "summary")
        rows = checked(vectors, dim, "summary")

        async def insert(connection: Connection) -> tuple[int, Callable[[], None]]:
            added = 0
            if await bound_embedder(connection, SUMMARY_VECTORS) is None:
                await record_embedder(connection, SUMMARY_VECTORS, embedder_id, dim)
            for summary_id, vector in rows:
                added += await execute(
                    connection,
                    f"INSERT INTO {SUMMARY_VECTORS} (id, chat, kind, segment_id, embedding)"
                    f" SELECT s.id, s.chat, s.kind, s.segment_id, %s FROM summaries s WHERE s.id = %s AND {EMBEDDABLE}"
                    " ON CONFLICT (id) DO NOTHING",
                    (vector, summary_id),
                )
            return added, nothing_after

        return PutPart(SUMMARY_TARGET, [summary_id for summary_id, _ in rows], insert)

    async def has_past_segments(self, chat: ChatRef, *, exclude_segment_id: int | None) -> bool:
        sql = (
            "SELECT 1 FROM summaries WHERE chat = %s AND kind = %s AND final"
            " AND segment_id IS DISTINCT FROM %s::bigint LIMIT 1"
        )
        return bool(await self._chats.rows(self._db, chat, sql, lambda key: (key, SEGMENT, exclude_segment_id)))

    async def nearest_segments(
        self, chat: ChatRef, vector: npt.NDArray[np.float32], *, limit: int, exclude_segment_id: int | None
    ) -> list[SummaryHit]:
        if limit <= 0:
            return []
        sql = (
            f"SELECT v.id, v.embedding <=> %s AS distance FROM {SUMMARY_VECTORS} v WHERE v.chat = %s"
            " AND v.kind = %s AND v.segment_id IS DISTINCT FROM %s::bigint ORDER BY distance, v.id LIMIT %s"
        )
        found = await self._chats.rows(
            self._db, chat, sql, lambda key: (query_vector(vector), key, SEGMENT, exclude_segment_id, limit)
        )
        return await self._hits(found, "segments", "segment_id")

    async def nearest_exchanges(
        self, chat: ChatRef, vector: npt.NDArray[np.float32], *, segment_ids: Sequence[int], limit_per_segment: int
    ) -> list[SummaryHit]:
        wanted = list(dict.fromkeys(segment_ids))
        if not wanted or limit_per_segment <= 0:
            return []
        sql = (
            "SELECT ranked.id, ranked.distance FROM (SELECT v.id, v.embedding <=> %s AS distance,"
            " row_number() OVER (PARTITION BY v.segment_id ORDER BY v.embedding <=> %s, v.id) AS place"
            f" FROM {SUMMARY_VECTORS} v WHERE v.chat = %s AND v.kind = %s AND v.segment_id = ANY(%s)) AS ranked"
            " WHERE ranked.place <= %s ORDER BY ranked.distance, ranked.id"
        )
        query = query_vector(vector)
        found = await self._chats.rows(
            self._db, chat, sql, lambda key: (query, query, key, EXCHANGE, wanted, limit_per_segment)
        )
        return await self._hits(found, "exchanges", "exchange_id")

    async def _hits(self, found: list[tuple[object, ...]], table: str, key: str) -> list[SummaryHit]:
        if not found:
            return []
        async with self._db.connection() as connection:
            return await _hits(connection, found, table, key)

    async def reembed_all(self) -> int:
        now = to_millis(self._clock())
        async with self._db.transaction() as connection:
            await execute(connection, f"DELETE FROM {SUMMARY_VECTORS}")
            await execute(connection, "DELETE FROM index_meta WHERE table_name = %s", (SUMMARY_VECTORS,))
            return await _queue_all(connection, now)

    async def forget_exchanges(self, exchange_ids: Collection[int]) -> int:
        async with self._db.transaction() as connection:
            return await delete_summaries_in(connection, exchange_ids, ())

    async def forget_segments(self, segment_ids: Collection[int]) -> int:
        async with self._db.transaction() as connection:
            return await delete_summaries_in(connection, (), segment_ids)

    async def _first(self, where: str, params: Sequence[object]) -> Summary | None:
        async with self._db.connection() as connection:
            found = await load_summaries(connection, where, params)
        return found[0] if found else None


async def _hits(connection: Connection, found: list[tuple[object, ...]], table: str, key: str) -> list[SummaryHit]:
    if not found:
        return []
    ids = [int(str(row[0])) for row in found]
    by_id = {s.id: s for s in await load_summaries(connection, "s.id = ANY(%s)", (ids,))}
    starts = {
        int(row[0]): from_millis(int(row[1]))
        for row in await fetch_all(
            connection,
            f"SELECT s.id, t.started_at FROM summaries s JOIN {table} t ON t.id = s.{key} WHERE s.id = ANY(%s)",
            (ids,),
        )
    }
    return [
        SummaryHit(by_id[i], 1.0 - float(str(distance)), starts.get(i))
        for i, distance in ((int(str(row[0])), row[1]) for row in found)
        if i in by_id
    ]


async def _all_exist(connection: Connection, table: str, column: str, ids: Sequence[int]) -> bool:
    wanted = sorted(set(ids))
    if not wanted:
        return True
    found = await fetch_value(connection, f"SELECT count(*) FROM {table} WHERE {column} = ANY(%s)", (wanted,))
    return int(found or 0) == len(wanted)


async def _loaded(connection: Connection, summary_id: int) -> Summary:
    summary = await load_summary(connection, summary_id)
    if summary is None:
        raise StorageError(f"summary {summary_id} is missing")
    return summary
