"""Full-text and vector search over a chat's messages in PostgreSQL.

Full text: `messages.search`, a generated tsvector (GIN index) of the message's own words at weight A
and the previous and next conversation messages' words at weight C. What a person typed becomes
search words (`fts_query.search_words`, shared with SQLite: stop words dropped, at most 32), each
turned into a tsquery by `plainto_tsquery` from a bound parameter, so no character can be query
syntax; the words are OR-ed and the matches ranked by FTS5's bm25 (`bm25.py`). Scores are negated
(lower is better), as the protocol's bm25 scores are.

Vectors: this engine's int8 copy of the chat scanned, its shortlist rescored in the server
(`vector_search.py`, decision 221); without a current copy, exact cosine KNN over the chat's rows in
the server (docs/decisions/130-postgres-backend.md).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from klaw.store.postgres.bm25 import Terms, ranked_sql, search_terms
from klaw.store.postgres.bm25_pruned import common_words, pruned_sql
from klaw.store.postgres.chats import ChatKeys
from klaw.store.postgres.connection import Connection, PostgresDatabase, fetch_all, fetch_value
from klaw.store.postgres.vector_cache import PostgresVectorCache
from klaw.store.postgres.vector_search import cached_nearest
from klaw.store.postgres.vectors import MESSAGE_VECTORS, query_vector
from klaw.store.protocol import RowsFor
from klaw.store.records import ChatRef, SearchHit, StoredMessage, WordCounts, to_millis
from klaw.store.shared.record_kinds import conversation_sql
from klaw.store.shared.rows import MESSAGE_COLUMNS, message_from_row
from klaw.store.shared.search_scope import MESSAGE_SCOPE, ScopeColumns, scope_sql, segments_compared
from klaw.store.shared.vector_matrix import VectorScope
from klaw.store.sqlite.fts_query import search_words

_CONVERSATION = conversation_sql()
_VECTOR_SCOPE = ScopeColumns("v.chat", "v.segment_id", "v.created_at")  # message_vectors' columns


def word_query(word: str) -> str:
    """SQL for one word's tsquery, its text a bound parameter (`plainto_tsquery` reads no syntax)."""
    del word
    return "plainto_tsquery('english', %s)"


def own_words_query() -> str:
    """SQL for one word's tsquery matching a message's own words only (weight A). The word is `\\w+`
    (letters, digits, underscore: no quote can end the literal); it is quoted as a tsquery lexeme."""
    return "to_tsquery('english', '''' || %s || ''':A')"


class PostgresSearch:
    def __init__(self, db: PostgresDatabase, chats: ChatKeys, cache: PostgresVectorCache | None = None) -> None:
        self._db = db
        self._chats = chats
        self._cache = cache if cache is not None else PostgresVectorCache(0)

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
        words = search_words(text)
        if not words or limit <= 0:
            return []
        left_out = frozenset(exclude)
        async with self._db.connection() as connection:
            chat_key = await self._chats.find(connection, chat)
            if chat_key is None:
                return []
            where, params = scope_sql(
                MESSAGE_SCOPE, chat_key, segment_id, since, until, "%s", before_segment_id=before_segment_id
            )
            terms = await search_terms(connection, words)
            rows = await _best_matches(connection, terms, where, params, limit + len(left_out))
        return _without(rows, left_out, limit)

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
        if limit <= 0:
            return []
        query = query_vector(vector)
        left_out = frozenset(exclude)
        async with self._db.connection() as connection:
            chat_key = await self._chats.find(connection, chat)
            if chat_key is None:
                return []
            where, params = scope_sql(
                _VECTOR_SCOPE, chat_key, segment_id, since, until, "%s", before_segment_id=before_segment_id
            )
        located = await self._cache.view(self._db, chat_key, len(query))
        if located is not None:
            scope = VectorScope(
                segment_id,
                None if since is None else to_millis(since),
                None if until is None else to_millis(until),
                before_segment_id,
                left_out,  # no shortlist place for them: the rescore reads only rows that can be answered
            )
            found = await cached_nearest(self._db, self._cache, located, chat_key, query, limit, scope, (where, params))
            if found is not None:
                return _without(found, left_out, limit)
        async with self._db.connection() as connection:  # no copy, or a stale one: the server's exact scan
            rows = await fetch_all(
                connection,
                f"SELECT {MESSAGE_COLUMNS}, n.distance FROM (SELECT v.rowid, v.embedding <=> %s AS distance"
                f" FROM {MESSAGE_VECTORS} v WHERE {where} ORDER BY distance, v.rowid LIMIT %s) AS n"
                " JOIN messages m ON m.rowid = n.rowid ORDER BY n.distance, m.rowid",
                (query, *params, limit + len(left_out)),
            )
        return _without(rows, left_out, limit)

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
        left_out = sorted(set(exclude))
        async with self._db.connection() as connection:
            chat_key = await self._chats.find(connection, chat)
            if chat_key is None:
                return WordCounts(0, dict.fromkeys(words, 0))
            where, params = scope_sql(
                MESSAGE_SCOPE, chat_key, segment_id, None, until, "%s", before_segment_id=before_segment_id
            )
            where = f"{where} AND {_CONVERSATION} AND NOT (m.rowid = ANY(%s))"
            params.append(left_out)
            segments = segments_compared(segment_id, before_segment_id, "%s") if until is None else None
            size = await _scope_size(connection, where, params, chat_key, segments, left_out)
            cap = max(min_cap, int(max_share * size))
            counts = {}
            for word in words:
                counts[word] = int(
                    await fetch_value(
                        connection,
                        f"SELECT count(*) FROM (SELECT 1 FROM messages m WHERE m.search @@ {own_words_query()}"
                        f" AND {where} LIMIT %s) AS held",
                        (word, *params, cap + 1),
                    )
                )
        return WordCounts(size, counts)

    async def neighbours(self, messages: Sequence[StoredMessage], span: int) -> dict[int, list[tuple[int, int]]]:
        if span <= 0 or not messages:
            return {}
        async with self._db.connection() as connection:
            return await _neighbour_rowids(connection, messages, span)

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
        known = {m.rowid for m in messages} | set(exclude)
        async with self._db.connection() as connection:
            found = await _neighbour_rowids(connection, messages, span)
            named = {rowid for near in found.values() for rowid, _ in near} - known
            chosen = None if keep is None else keep(found)
            others = sorted(named if chosen is None else named.intersection(chosen))
            rows = await fetch_all(
                connection, f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.rowid = ANY(%s)", (others,)
            )
        return found, [message_from_row(row) for row in rows]


async def _neighbour_rowids(
    connection: Connection, messages: Sequence[StoredMessage], span: int
) -> dict[int, list[tuple[int, int]]]:
    pairs = sorted({(m.rowid, m.segment_id) for m in messages})
    side = (
        "(SELECT array_agg(x.rowid) FROM (SELECT m.rowid FROM messages m WHERE m.segment_id = j.s"
        f" AND m.rowid {{op}} j.r AND {_CONVERSATION} ORDER BY m.rowid {{order}} LIMIT %s) AS x)"
    )
    rows = await fetch_all(
        connection,
        f"SELECT j.r, {side.format(op='<', order='DESC')}, {side.format(op='>', order='ASC')}"
        " FROM unnest(%s::bigint[], %s::bigint[]) AS j(r, s)",
        (span, span, [p[0] for p in pairs], [p[1] for p in pairs]),
    )
    found: dict[int, list[tuple[int, int]]] = {}
    for rowid, before, after in rows:
        nearest_first = (sorted(before or [], reverse=True), sorted(after or []))
        found[int(rowid)] = [(int(r), d) for side_ in nearest_first for d, r in enumerate(side_, start=1)]
    return found


def _without(rows: list[tuple[Any, ...]], exclude: frozenset[int], limit: int) -> list[SearchHit]:
    """The first `limit` rows (ranked `limit + len(exclude)` deep) whose rowid is not in `exclude`, as hits."""
    return [SearchHit(message_from_row(row), float(row[10])) for row in rows if row[0] not in exclude][:limit]


async def _best_matches(
    connection: Connection, terms: Terms, where: str, params: list[Any], limit: int
) -> list[tuple[Any, ...]]:
    """The best `limit` matches: of the candidates (`bm25_pruned.py`) when they fill `limit` places,
    else of every match."""
    common = common_words(terms)
    if common is not None:
        sql, sql_params = pruned_sql(terms, common, where, params, limit)
        rows = await fetch_all(connection, sql, sql_params, prepare=False)
        if len(rows) == limit:
            return rows
    sql, sql_params = ranked_sql(terms, where, params, limit)
    # Planned for its words each time (decision 427): a generic plan cannot tell a word of a few rows from
    # one of thousands (at 100,000 messages, 9 ms a search where the plan for the words took 3).
    return await fetch_all(connection, sql, sql_params, prepare=False)


async def _scope_size(
    connection: Connection,
    where: str,
    params: list[Any],
    chat_key: int,
    segments: tuple[str, int] | None,
    left_out: list[int],
) -> int:
    """The conversation messages `where` selects; whole segments' counts (no time range) are kept by trigger."""
    if segments is None:
        return int(await fetch_value(connection, f"SELECT count(*) FROM messages m WHERE {where}", params))
    compared, segment = segments
    kept = await fetch_value(
        connection,
        f"SELECT coalesce(sum(conversation_messages), 0) FROM segments WHERE chat = %s AND id {compared}",
        (chat_key, segment),
    )
    excluded = await fetch_value(
        connection,
        f"SELECT count(*) FROM messages m WHERE m.rowid = ANY(%s) AND m.chat = %s AND m.segment_id {compared}"
        f" AND {_CONVERSATION}",
        (left_out, chat_key, segment),
    )
    return max(int(kept or 0) - int(excluded or 0), 0)
