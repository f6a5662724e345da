"""Runtime settings (set by slash commands, overriding engine.yaml), stored as JSON values."""

from __future__ import annotations

import json
import time
from typing import Any

import apsw

from klaw.store.sqlite.connection import SqliteDatabase
from klaw.store.sqlite.query import fetch_one


class SqliteSettings:
    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db

    async def get(self, key: str) -> Any | None:
        def query(connection: apsw.Connection) -> Any | None:
            row = fetch_one(connection, "SELECT value FROM settings WHERE key = ?", (key,))
            return None if row is None else json.loads(row[0])

        return await self._db.run(query)

    async def set(self, key: str, value: Any) -> None:
        encoded = json.dumps(value)

        def write(connection: apsw.Connection) -> None:
            connection.execute(
                "INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?) ON CONFLICT (key) DO UPDATE"
                " SET value = excluded.value, updated_at = excluded.updated_at",
                (key, encoded, int(time.time() * 1000)),
            )

        await self._db.run(write)

    async def delete(self, key: str) -> None:
        await self._db.run(lambda connection: connection.execute("DELETE FROM settings WHERE key = ?", (key,)))
