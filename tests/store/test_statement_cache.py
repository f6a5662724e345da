"""A statement klaw.db's connections run once a turn stays prepared from one turn to the next (decision 263).

apsw's statement cache makes room by taking its slots in turn, one per statement run, so with its
default of 100 slots a statement is prepared again once ~100 others ran since it last did: a turn
runs ~70 on the writer's connection, and the statements of the summarizers and the embedding queue,
run once every few turns, were prepared again almost every time (6.5 a turn on the writer). Here a
message is appended (its statements prepared), 150 reads of one other statement run, and a second
message is appended: none of its statements is prepared again. On the old code some were.
"""

from __future__ import annotations

from datetime import UTC, datetime

import apsw

from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.sqlite.store import SqliteStore

CHAT = ChatRef("console", "alice")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _misses(connection: apsw.Connection) -> int:
    return int(connection.cache_stats()["misses"])


async def test_an_append_is_not_prepared_again_after_150_other_statements(store: SqliteStore) -> None:
    await store.messages.append(MessageRecord(CHAT, Role.USER, "first", created_at=T0), embed=True)

    def others(connection: apsw.Connection) -> int:
        before = _misses(connection)
        for i in range(150):
            connection.execute("SELECT count(*) FROM messages WHERE rowid > ?", (i,)).fetchall()
        return _misses(connection) - before

    assert await store.db.run(others) == 1  # the one statement, prepared once
    before = await store.db.run(_misses)
    await store.messages.append(MessageRecord(CHAT, Role.USER, "second", created_at=T0), embed=True)
    assert await store.db.run(_misses) == before


async def test_a_read_connection_keeps_its_statements_too(store: SqliteStore) -> None:
    await store.messages.append(MessageRecord(CHAT, Role.USER, "hello there", created_at=T0))

    def read_window(connection: apsw.Connection) -> int:
        connection.execute("SELECT rowid FROM messages ORDER BY rowid DESC LIMIT 5").fetchall()
        before = _misses(connection)
        for i in range(150):
            connection.execute("SELECT count(*) FROM messages WHERE rowid > ?", (i,)).fetchall()
        connection.execute("SELECT rowid FROM messages ORDER BY rowid DESC LIMIT 5").fetchall()
        return _misses(connection) - before

    assert await store.db.read(read_window) == 1  # the 150 reads' statement, prepared once
