"""Every row klaw.db derives from the log, for comparing a reindexed database with another one.

Left out, because they record when a database was built rather than what the log says: the
`created_at` of `index_meta` (when the vector table was bound) and the times of `embedding_jobs`
(when a job was queued or retried). Everything else is compared row by row, rowids included.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw

from klaw.store.sqlite.store import SqliteStore

QUERIES = {
    "chats": "SELECT id, channel, chat_id FROM chats ORDER BY id",
    "segments": "SELECT id, chat, started_at, ended_at FROM segments ORDER BY id",
    "messages": "SELECT rowid, id, channel, chat_id, chat, segment_id, role, type, content, metadata, created_at"
    " FROM messages ORDER BY rowid",
    "messages_fts": "SELECT rowid, content, context FROM messages_fts ORDER BY rowid",
    # The index itself, term by term (`messages_fts` above reads its source view, not the index).
    "messages_fts_terms": "SELECT doc, term, col, offset FROM temp.messages_fts_terms ORDER BY doc, col, offset",
    "sessions": "SELECT chat, model, segment_id, created_at, updated_at FROM sessions ORDER BY chat",
    "exchanges": "SELECT id, chat, segment_id, started_at, ended_at, status, user_message_rowid, final_message_rowid"
    " FROM exchanges ORDER BY id",
    "vec_messages": "SELECT rowid, chat_key, segment_id, created_at, embedding FROM vec_messages ORDER BY rowid",
    "index_meta": "SELECT table_name, embedder_id, dim FROM index_meta ORDER BY table_name",
    "memory_chunks": "SELECT rowid, chat, segment_id, content, created_at FROM memory_chunks ORDER BY rowid",
    "memory_chunks_fts": "SELECT rowid, content FROM memory_chunks_fts ORDER BY rowid",
    "vec_memory": "SELECT rowid, chat_key, created_at, embedding FROM vec_memory ORDER BY rowid",
    "summaries": "SELECT id, kind, chat, segment_id, exchange_id, text, model, final, covers_exchange_id,"
    " exchanges_covered, created_at, updated_at, record_rowid FROM summaries ORDER BY id",
    "summary_records": "SELECT rowid, segment_id, exchange_id FROM summary_records ORDER BY rowid",
    "vec_summaries": "SELECT rowid, embedding FROM vec_summaries ORDER BY rowid",
    "settings": "SELECT key, value, updated_at FROM settings ORDER BY key",
    "embedding_jobs": "SELECT target, target_rowid, status, attempts, last_error FROM embedding_jobs"
    " ORDER BY target, target_rowid",
}


def _dump(connection: apsw.Connection) -> dict[str, list[tuple[Any, ...]]]:
    connection.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.messages_fts_terms USING fts5vocab(main, messages_fts, instance)"
    )
    tables = {str(row[0]) for row in connection.execute("SELECT name FROM sqlite_master").fetchall()}
    # vec_summaries exists once a summary embedder was bound (the engine and reindex bind one).
    queries = {name: sql for name, sql in QUERIES.items() if name != "vec_summaries" or name in tables}
    return {name: [tuple(row) for row in connection.execute(sql).fetchall()] for name, sql in queries.items()}


async def dump_tables(path: Path) -> dict[str, list[tuple[Any, ...]]]:
    store = await SqliteStore.open(path)
    try:
        return await store.db.run(_dump)
    finally:
        await store.aclose()
