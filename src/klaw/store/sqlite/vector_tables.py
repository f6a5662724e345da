"""Binding a sqlite-vec table to one embedder through `index_meta`, for any vector table.

`vec_messages` and `vec_memory` bind through `bind_vector_table`: a table that holds vectors of
another embedder (model or dimension) is refused with `IndexMismatchError`; an empty one is
recreated for the new embedder. `vec_summaries` rebuilds instead of refusing (klaw/store/summaries/sqlite/vectors.py)
but records its embedder with the same `record_embedder`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

import apsw

from klaw.store.protocol import StorageError, embedder_mismatch
from klaw.store.sqlite.query import fetch_one, fetch_value

if TYPE_CHECKING:  # numpy where a vector is touched: opening the store needs none (decision 437)
    import numpy as np
    import numpy.typing as npt


def table_exists(connection: apsw.Connection, table: str) -> bool:
    row = fetch_one(connection, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
    return row is not None


def vector_count(connection: apsw.Connection, table: str) -> int:
    """The vectors `table` holds; 0 before the first `bind_embedder` created it."""
    return int(fetch_value(connection, f"SELECT count(*) FROM {table}")) if table_exists(connection, table) else 0


def bind_vector_table(connection: apsw.Connection, table: str, columns: str, embedder_id: str, dim: int) -> bool:
    """Create `table` as `vec0(<columns with {dim}>)` if needed and record its embedder, in one
    transaction; returns True when an empty table of another embedder was dropped and recreated.

    `columns` is the vec0 column list with `{dim}` where the vector size goes."""
    with connection:
        row = fetch_one(connection, "SELECT embedder_id, dim FROM index_meta WHERE table_name = ?", (table,))
        exists = table_exists(connection, table)
        recreated = False
        if row is not None and exists and (row[0], row[1]) != (embedder_id, dim):
            stored = int(fetch_value(connection, f"SELECT count(*) FROM {table}"))
            if (mismatch := embedder_mismatch(table, stored, (row[0], row[1]), (embedder_id, dim))) is not None:
                raise mismatch
            connection.execute(f"DROP TABLE {table}")
            exists, recreated = False, True
        if not exists:
            connection.execute(f"CREATE VIRTUAL TABLE {table} USING vec0({columns.format(dim=dim)})")
        record_embedder(connection, table, embedder_id, dim)
    return recreated


def record_embedder(connection: apsw.Connection, table: str, embedder_id: str, dim: int) -> None:
    """Note in `index_meta` which embedder fills `table` (what a later start and `klaw db info` check)."""
    connection.execute(
        "INSERT INTO index_meta (table_name, embedder_id, dim, created_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (table_name) DO UPDATE SET embedder_id = excluded.embedder_id, dim = excluded.dim",
        (table, embedder_id, dim, int(time.time() * 1000)),
    )


def vector_blobs(
    vectors: Sequence[tuple[int, npt.NDArray[np.float32]]], dim: int, what: str
) -> list[tuple[int, bytes]]:
    """Each (rowid, vector) as the float32 bytes vec0 stores, once every vector is checked against the
    bound embedder's `dim`: a wrong size is refused here, naming the row, before anything is written.
    `what` names the rows in the message (message, memory, summary)."""
    import numpy as np

    for rowid, vector in vectors:
        if vector.shape != (dim,):
            raise StorageError(f"vector for {what} {rowid} has shape {vector.shape}, expected ({dim},)")
    return [(rowid, np.ascontiguousarray(vector, dtype=np.float32).tobytes()) for rowid, vector in vectors]


def bound_embedder(connection: apsw.Connection, table: str) -> tuple[str, int] | None:
    """(embedder id, dim) recorded for `table`, or None when it was never bound."""
    row = fetch_one(connection, "SELECT embedder_id, dim FROM index_meta WHERE table_name = ?", (table,))
    return None if row is None else (str(row[0]), int(row[1]))
