"""Which SQL statements a test's SQLite connections run: for tests that assert what a search reads
(a statement trace fails where a timing would only be noisy)."""

from __future__ import annotations

import apsw
import pytest

from klaw.store.sqlite.store import SqliteStore


def traced(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, object]]:
    """Every statement (and its bindings) that connections opened from now on run, in order."""
    statements: list[tuple[str, object]] = []

    def watch(_cursor: object, sql: str, bindings: object) -> bool:
        statements.append((sql, bindings))
        return True

    monkeypatch.setattr(apsw, "connection_hooks", [lambda connection: setattr(connection, "exec_trace", watch)])
    return statements


async def store_statements(store: SqliteStore) -> list[str]:
    """Every statement the open `store`'s connection runs from now on, in order (SQL only)."""
    statements: list[str] = []

    def record(_cursor: apsw.Cursor, sql: str, _bindings: object) -> bool:
        statements.append(sql)
        return True

    def trace(connection: apsw.Connection) -> None:
        connection.exec_trace = record

    await store.db.run(trace)
    return statements
