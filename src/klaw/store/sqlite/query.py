"""Typed one-liners over apsw cursors: rows come back as plain tuples of Python values."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

Row = tuple[Any, ...]


def fetch_one(connection: apsw.Connection, sql: str, params: Sequence[Any] = ()) -> Row | None:
    row = connection.execute(sql, params).fetchone()
    return None if row is None else tuple(row)


def fetch_all(connection: apsw.Connection, sql: str, params: Sequence[Any] = ()) -> list[Row]:
    return [tuple(row) for row in connection.execute(sql, params).fetchall()]


def fetch_value(connection: apsw.Connection, sql: str, params: Sequence[Any] = ()) -> Any:
    """The first column of the first row, or None when there is no row."""
    row = connection.execute(sql, params).fetchone()
    return None if row is None else row[0]
