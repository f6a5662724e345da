"""Raw SQL against either backend's store, for tests that look under the protocol (row counts, leftovers).

Placeholders are written `?` (SQLite's) and become `%s` for PostgreSQL; the tables compared are the ones
both schemas share (messages, segments, exchanges, summaries, embedding_jobs, memory_chunks, index_meta).
"""

from __future__ import annotations

from typing import Any

from klaw.store.protocol import Storage


def is_postgres(store: Storage) -> bool:
    return type(store).__name__ == "PostgresStore"


async def rows(store: Storage, sql: str, *params: object) -> list[tuple[Any, ...]]:
    if is_postgres(store):
        from klaw.store.postgres.store import PostgresStore

        assert isinstance(store, PostgresStore)
        async with store.db.transaction() as connection:
            cursor = await connection.execute(sql.replace("?", "%s"), params)
            return [] if cursor.description is None else [tuple(row) for row in await cursor.fetchall()]
    from klaw.store.sqlite.query import fetch_all as sqlite_fetch_all
    from klaw.store.sqlite.store import SqliteStore

    assert isinstance(store, SqliteStore)

    def run(connection: Any) -> list[tuple[Any, ...]]:
        with connection:
            return sqlite_fetch_all(connection, sql, params)

    return await store.db.run(run)


async def value(store: Storage, sql: str, *params: object) -> Any:
    found = await rows(store, sql, *params)
    return found[0][0] if found else None


def message_vectors(store: Storage) -> str:
    """The message vector table's name."""
    return "message_vectors" if is_postgres(store) else "vec_messages"


def memory_vectors(store: Storage) -> str:
    return "memory_vectors" if is_postgres(store) else "vec_memory"
