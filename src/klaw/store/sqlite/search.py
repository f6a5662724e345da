"""Full-text (FTS5 bm25) and vector (sqlite-vec KNN) search over a chat's messages.

KNN scans the chat's int8 copy in `ChatVectorCache` off the database thread (so full text can run
meanwhile) for a shortlist, then rescores the shortlist with the exact float vectors read from
`vec_messages` by rowid (a small chat's kept in memory with its copy instead: decision 350): hits and
distances are those of exact float search (decision 145). The searches' reads run on read
connections beside the writes (`read_pool.py`, decision 216), and a chat's int8 copy, once in
memory, is found without a round trip (loading it is the database thread's). A chat too large for
the cache falls back to sqlite-vec, which filters by the vec0 partition key (chat) and metadata
columns (segment, time) with `k = ?`. Messages are fetched in a second query: joining a
CTE into a vec0 query would re-run the KNN per row.

Full text ranks by bm25 over three columns (migrations 0004 and 0011): the message's own words, and
at `full_text.CONTEXT_WEIGHT` the words of the conversation messages before and after it, so a
reply is found by the words of what it answers and a question by the words of its answer. 0.2 was
the best of 0.1–0.3 for the message before on LoCoMo dev (R@5 within 0.6 points across them); more
lets the neighbours' matches crowd out the message's own. How matches are ranked within a scope
quickly: `full_text.py`.

`neighbours` gives hybrid search the conversation messages around its candidates (see
`klaw.memory.neighbour_scores`): two `(segment_id, rowid)` index range scans per candidate.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import apsw

from klaw.config import FullTextTokenizer
from klaw.store.protocol import RowsFor
from klaw.store.records import ChatRef, SearchHit, StoredMessage, WordCounts, to_millis
from klaw.store.shared.record_kinds import conversation_sql
from klaw.store.shared.rows import MESSAGE_COLUMNS, message_from_row
from klaw.store.shared.search_scope import MESSAGE_SCOPE, ScopeColumns, scope_sql, segments_compared
from klaw.store.sqlite.chats import ChatKeys
from klaw.store.sqlite.connection import SqliteDatabase
from klaw.store.sqlite.fts_query import count_expression, matchable, search_terms, search_words
from klaw.store.sqlite.full_text import (
    Rowids,
    common_terms,
    excluding,
    match_terms,
    ranked_matches,
    scope_rowids,
    scoped_count,
    scoped_substring_count,
    substring_matches,
)
from klaw.store.sqlite.query import fetch_all, fetch_value
from klaw.store.sqlite.term_counts import TermCounts
from klaw.store.sqlite.vector_cache import ChatVectorCache
from klaw.store.sqlite.vector_floats import FloatFile
from klaw.store.sqlite.vectors import MESSAGE_VECTORS, vector_table_exists

if TYPE_CHECKING:  # numpy where a vector is touched: opening the store needs none (decision 437)
    import numpy as np
    import numpy.typing as npt


class SqliteSearch:
    def __init__(
        self,
        db: SqliteDatabase,
        chats: ChatKeys,
        cache: ChatVectorCache,
        tokenizer: FullTextTokenizer = "porter",
        floats: FloatFile | None = None,
    ) -> None:
        self._db = db
        self._floats = floats  # the rescore's float rows beside klaw.db (vector_floats.py)
        self._tokenizer = tokenizer
        self._chats = chats
        self._cache = cache
        self._term_counts = threading.local()  # a `TermCounts` per read thread (term_counts.py)

    async def full_text(
        self,
        chat: ChatRef,
        text: str,
        *,
        limit: int,
        segment_id: int | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        before_segment_id: int | None = None,
        exclude: Collection[int] = (),
    ) -> list[SearchHit]:
        terms = search_terms(text, self._tokenizer)
        left_out = frozenset(exclude)
        indexed = [term for term in terms if matchable(term, self._tokenizer)]
        if not terms or limit <= 0:
            return []

        def query(connection: apsw.Connection) -> list[SearchHit]:
            chat_key = self._chats.find(connection, chat)
            if chat_key is None:
                return []
            where, params = excluding(
                *scope_sql(MESSAGE_SCOPE, chat_key, segment_id, since, until, before_segment_id=before_segment_id),
                left_out,
            )
            if not indexed:  # only terms a trigram index cannot answer ("旺财"): looked up by substring
                rows = substring_matches(connection, terms, where, params, limit)
            else:
                phrases = match_terms(connection, indexed, self._memo())
                common = common_terms(connection, phrases, self._memo())
                bounds = scope_rowids(connection, chat_key, segment_id, before_segment_id)
                rows = ranked_matches(connection, phrases, where, params, bounds, limit, left_out, common)
            return [SearchHit(message_from_row(row), float(row[10])) for row in rows]

        return await self._db.read(query, chat)  # the chat's size sets its cost (decision 533)

    def _memo(self) -> TermCounts:
        """This thread's term-count memo."""
        memo: TermCounts | None = getattr(self._term_counts, "memo", None)
        if memo is None:
            memo = self._term_counts.memo = TermCounts()
        return memo

    async def nearest(
        self,
        chat: ChatRef,
        vector: npt.NDArray[np.float32],
        *,
        limit: int,
        segment_id: int | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        before_segment_id: int | None = None,
        exclude: Collection[int] = (),
    ) -> list[SearchHit]:
        import numpy as np

        from klaw.store.shared.vector_matrix import MatrixView, VectorScope, merge_nearest
        from klaw.store.shared.vector_quant import shortlist

        if limit <= 0:
            return []
        left_out = frozenset(exclude)
        # sqlite-vec (a chat too large to cache) ranks `limit + len(exclude)` hits, whose first `limit`
        # others are the answer. The int8 copy leaves `exclude` out of its shortlist instead (the scope
        # carries it), so the rescore reads only rows that can be answered (decision 231).
        wanted = limit + len(left_out)
        query_vector = np.ascontiguousarray(vector, dtype=np.float32)
        blob = query_vector.tobytes()
        scope = VectorScope(
            segment_id,
            None if since is None else to_millis(since),
            None if until is None else to_millis(until),
            before_segment_id,
            left_out,
        )

        def locate(connection: apsw.Connection) -> MatrixView | list[tuple[int, float]]:
            """The cached matrix to search, or (too large to cache) sqlite-vec's answer."""
            chat_key = self._chats.find(connection, chat)
            if chat_key is None or not vector_table_exists(connection, MESSAGE_VECTORS):
                return []
            view = self._cache.view(connection, MESSAGE_VECTORS, chat_key, len(query_vector))
            if view is not None:
                return view
            where, params = scope_sql(
                _VECTOR_SCOPE, chat_key, segment_id, since, until, before_segment_id=before_segment_id
            )
            return [
                (int(rowid), float(distance))
                for rowid, distance in fetch_all(
                    connection,
                    f"SELECT rowid, distance FROM {MESSAGE_VECTORS} WHERE embedding MATCH ? AND k = ?"
                    f" AND {where} ORDER BY distance",
                    (blob, wanted, *params),
                )
            ]

        # A chat whose copy is in memory needs no round trip to find it (decision 216).
        chat_key = self._chats.cached(chat)
        cached = None if chat_key is None else self._cache.cached_view(chat_key, len(query_vector))
        located = cached if cached is not None else await self._db.run(locate)
        count = shortlist(limit)
        view: MatrixView | None = None  # scanned on the read connection's thread, with the rescore
        candidates: list[tuple[int, float]] | None = None  # the shortlist of a split scan, to rescore
        answer: list[tuple[int, float]] = []  # sqlite-vec's (rowid, distance), exact already
        if isinstance(located, MatrixView):
            parts = located.split(self._cache.search_threads)
            if len(parts) == 1:
                view = located  # one hop for the event loop instead of two
            else:  # a large chat: its parts scanned side by side off the database thread
                answers = await asyncio.gather(
                    *(asyncio.to_thread(part.nearest, query_vector, count, scope) for part in parts)
                )
                candidates = merge_nearest(list(answers), count)
        else:
            answer = located
        if view is None and not candidates and not answer:
            return []

        def query(connection: apsw.Connection) -> list[SearchHit]:
            shortlisted = candidates
            exact = None if view is None else view.exact_nearest(query_vector, count, scope, limit)
            if view is not None and exact is None:
                shortlisted = view.nearest(query_vector, count, scope)
            if exact is not None:  # a small chat: rescored from its float rows in memory (decision 350)
                ranked = exact
            elif shortlisted is None:
                ranked = answer
            else:
                ranked = _rescored(connection, query_vector, shortlisted, limit, self._floats)
            return _hits(connection, [(rowid, d) for rowid, d in ranked if rowid not in left_out], limit)

        return await self._db.read(query, chat)

    async def word_counts(
        self,
        chat: ChatRef,
        text: str,
        *,
        max_share: float,
        min_cap: int,
        segment_id: int | None = None,
        until: datetime | None = None,
        exclude: Sequence[int] = (),
        before_segment_id: int | None = None,
    ) -> WordCounts:
        words = search_words(text)
        left_out = json.dumps(sorted(set(exclude)))

        def query(connection: apsw.Connection) -> WordCounts:
            chat_key = self._chats.find(connection, chat)
            if chat_key is None:
                return WordCounts(0, dict.fromkeys(words, 0))
            where, params = scope_sql(
                MESSAGE_SCOPE, chat_key, segment_id, None, until, before_segment_id=before_segment_id
            )
            where = f"{where} AND {_CONVERSATION} AND m.rowid NOT IN (SELECT value FROM json_each(?))"
            params.append(left_out)
            segments = segments_compared(segment_id, before_segment_id) if until is None else None
            size = _scope_size(connection, where, params, chat_key, segments, left_out)
            cap = max(min_cap, int(max_share * size))
            bounds = scope_rowids(connection, chat_key, segment_id, before_segment_id) if words else None
            counts = {word: self._count(connection, word, where, params, bounds, cap) for word in words}
            return WordCounts(size, counts)

        return await self._db.read(query, chat)

    def _count(
        self, connection: apsw.Connection, word: str, where: str, params: list[Any], bounds: Rowids | None, cap: int
    ) -> int:
        expression = count_expression(word, self._tokenizer)
        if expression is None:  # too short for a trigram index
            return scoped_substring_count(connection, word, where, params, cap)
        return scoped_count(connection, expression, where, params, bounds, cap)

    async def neighbours(self, messages: Sequence[StoredMessage], span: int) -> dict[int, list[tuple[int, int]]]:
        if span <= 0 or not messages:
            return {}
        wanted = json.dumps(sorted({(m.rowid, m.segment_id) for m in messages}))
        return await self._db.read(
            lambda connection: _neighbour_rowids(connection, span, wanted), messages[0].record.chat
        )

    async def neighbours_with_rows(
        self,
        messages: Sequence[StoredMessage],
        span: int,
        *,
        exclude: Collection[int] = (),
        keep: RowsFor = None,
    ) -> tuple[dict[int, list[tuple[int, int]]], list[StoredMessage]]:
        if span <= 0 or not messages:
            return {}, []
        wanted = json.dumps(sorted({(m.rowid, m.segment_id) for m in messages}))
        known = {m.rowid for m in messages} | set(exclude)

        def query(connection: apsw.Connection) -> tuple[dict[int, list[tuple[int, int]]], list[StoredMessage]]:
            found = _neighbour_rowids(connection, span, wanted)
            named = {rowid for near in found.values() for rowid, _ in near} - known
            chosen = None if keep is None else keep(found)
            others = sorted(named if chosen is None else named.intersection(chosen))
            marks = ",".join("?" * len(others))
            rows = fetch_all(connection, f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.rowid IN ({marks})", others)
            return found, [message_from_row(row) for row in rows]

        return await self._db.read(query, messages[0].record.chat)


def _neighbour_rowids(connection: apsw.Connection, span: int, wanted: str) -> dict[int, list[tuple[int, int]]]:
    """Rowid → (neighbour rowid, distance) for the JSON list of (rowid, segment) pairs `wanted`: all
    messages in one statement (a third of the time of one per message)."""
    found: dict[int, list[tuple[int, int]]] = {}
    for rowid, before, after in fetch_all(connection, _NEIGHBOURS, (span, wanted)):
        nearest_first = (sorted(_rowids(before), reverse=True), sorted(_rowids(after)))
        found[int(rowid)] = [(r, d) for side in nearest_first for d, r in enumerate(side, start=1)]
    return found


_VECTOR_SCOPE = ScopeColumns("chat_key", "segment_id", "created_at")  # vec_messages' columns
# `MessageRecord.is_conversation` in SQL. Blank messages are not excluded here (hybrid search does
# when it loads them): trimming every row's text costs more than the whole lookup.
_CONVERSATION = conversation_sql()
# Per (rowid, segment) pair of the JSON list ?2: the nearest ?1 conversation rowids before and after
# it, each side comma-separated (in no promised order: sorted by the caller).
_NEIGHBOURS = (
    "SELECT j.value ->> 0,"
    " (SELECT group_concat(r) FROM (SELECT m.rowid AS r FROM messages m WHERE m.segment_id = j.value ->> 1"
    f" AND m.rowid < j.value ->> 0 AND {_CONVERSATION} ORDER BY m.rowid DESC LIMIT ?1)),"
    " (SELECT group_concat(r) FROM (SELECT m.rowid AS r FROM messages m WHERE m.segment_id = j.value ->> 1"
    f" AND m.rowid > j.value ->> 0 AND {_CONVERSATION} ORDER BY m.rowid ASC LIMIT ?1))"
    " FROM json_each(?2) j"
)


def _rescored(
    connection: apsw.Connection,
    query: npt.NDArray[np.float32],
    shortlisted: list[tuple[int, float]],
    limit: int,
    floats: FloatFile | None,
) -> list[tuple[int, float]]:
    """The `limit` nearest of the int8 shortlist (rowid, approximate distance) by exact float distance.
    Each row from the float file beside klaw.db where it holds the row the int8 copy was made from
    (vector_floats.py, decision 534), else from `vec_messages` (one point lookup per rowid through
    json_each; an IN list would scan vec0). A rowid without a vector (forgotten since the view was
    taken) is left out. The rows are joined in shortlist order either way: the same bytes in the same
    order make the same products."""
    from klaw.store.shared.vector_quant import exact_distances

    rowids = [rowid for rowid, _ in shortlisted]
    found: list[bytes | None] = [None] * len(rowids)
    if floats is not None:
        found = floats.read(rowids, [d for _, d in shortlisted], query)
    missing = [rowid for rowid, row in zip(rowids, found, strict=True) if row is None]
    if missing:
        sql = f"SELECT v.rowid, v.embedding FROM json_each(?) AS j JOIN {MESSAGE_VECTORS} AS v ON v.rowid = j.value"
        read = {int(r): bytes(blob) for r, blob in fetch_all(connection, sql, (json.dumps(missing),))}
        found = [read.get(rowid) if row is None else row for rowid, row in zip(rowids, found, strict=True)]
    rows = [(rowid, row) for rowid, row in zip(rowids, found, strict=True) if row is not None]
    return exact_distances(query, rows, limit)


def _hits(connection: apsw.Connection, ranked: list[tuple[int, float]], limit: int) -> list[SearchHit]:
    """The first `limit` of `ranked` (rowid, distance) as hits, in that order. A rowid deleted since the
    view was taken has no row: it is dropped, and the next one read in its place."""
    hits: list[SearchHit] = []
    start = 0
    while start < len(ranked) and len(hits) < limit:
        part = ranked[start : start + limit - len(hits)]
        start += len(part)
        marks = ",".join("?" * len(part))
        rows = fetch_all(
            connection, f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.rowid IN ({marks})", [r for r, _ in part]
        )
        by_rowid = {row[0]: message_from_row(row) for row in rows}
        hits += [SearchHit(by_rowid[rowid], distance) for rowid, distance in part if rowid in by_rowid]
    return hits


def _rowids(joined: object) -> list[int]:
    return [int(part) for part in str(joined).split(",")] if joined else []


def _scope_size(
    connection: apsw.Connection,
    where: str,
    params: list[Any],
    chat_key: int,
    segments: tuple[str, int] | None,
    left_out: str,
) -> int:
    """The conversation messages `where` selects. When it is whole segments (`segments_compared`, no
    time range), their counts are kept by triggers (migration 0006): those counts less the excluded rowids
    they hold is a row per segment and a few lookups, where counting reads every row (~70 ms at 100k
    messages)."""
    if segments is None:
        return int(fetch_value(connection, f"SELECT count(*) FROM messages m WHERE {where}", params))
    compared, segment = segments
    kept = fetch_value(
        connection,
        f"SELECT coalesce(sum(conversation_messages), 0) FROM segments WHERE chat = ? AND id {compared}",
        (chat_key, segment),
    )
    excluded = fetch_value(
        connection,
        f"SELECT count(*) FROM json_each(?) AS j CROSS JOIN messages m ON m.rowid = j.value"
        f" WHERE m.chat = ? AND m.segment_id {compared} AND {_CONVERSATION}",
        (left_out, chat_key, segment),
    )
    return max(int(kept or 0) - int(excluded), 0)
