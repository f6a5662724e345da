"""Summary vectors in the sqlite-vec table `vec_summaries`, bound to one embedder through `index_meta`.

Partitioned by chat, with `kind` and `segment_id` as metadata columns, so "final segment summaries of
this chat except the current segment" and "exchange summaries of segment S" are answered inside
sqlite-vec. There is no in-memory cache as for messages (`vector_cache.py`): a chat has one summary
per exchange and segment, a few thousand at most, and sqlite-vec's exact KNN over that many takes
about a millisecond (`klaw bench scale` reports it).

Unlike message vectors, summary vectors of another embedder are not refused but rebuilt: the table is
recreated and every embeddable summary queued again. Triggers created with the table drop a vector
when its summary's text changes or the summary is deleted, so a vector never outlives its text.
"""

from __future__ import annotations

import time

import apsw
import numpy as np
import numpy.typing as npt

from klaw.store.sqlite.query import fetch_all, fetch_one
from klaw.store.sqlite.summary_rows import EMBEDDABLE, queue_summary_job
from klaw.store.sqlite.vectors import vector_table_exists
from klaw.store.summary_records import SummaryKind

SUMMARY_VECTORS = "vec_summaries"
_TRIGGERS = (
    f"CREATE TRIGGER IF NOT EXISTS summaries_vector_stale AFTER UPDATE OF text ON summaries BEGIN"
    f" DELETE FROM {SUMMARY_VECTORS} WHERE rowid = old.id; END",
    f"CREATE TRIGGER IF NOT EXISTS summaries_vector_gone AFTER DELETE ON summaries BEGIN"
    f" DELETE FROM {SUMMARY_VECTORS} WHERE rowid = old.id; END",
)


def bind_summary_vectors(connection: apsw.Connection, embedder_id: str, dim: int, now_millis: int) -> int:
    """Create the table (and its triggers) for this embedder, rebuilding it if another embedder filled
    it; returns how many summaries were queued for embedding because of a rebuild."""
    with connection:
        row = fetch_one(connection, "SELECT embedder_id, dim FROM index_meta WHERE table_name = ?", (SUMMARY_VECTORS,))
        exists = vector_table_exists(connection, SUMMARY_VECTORS)
        queued = 0
        if exists and row is not None and (row[0], row[1]) != (embedder_id, dim):
            _drop(connection)
            exists = False
            queued = queue_all(connection, now_millis)
        if not exists:
            _create(connection, dim)
        connection.execute(
            "INSERT INTO index_meta (table_name, embedder_id, dim, created_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (table_name) DO UPDATE SET embedder_id = excluded.embedder_id, dim = excluded.dim",
            (SUMMARY_VECTORS, embedder_id, dim, int(time.time() * 1000)),
        )
    return queued


def bound_dim(connection: apsw.Connection) -> int | None:
    row = fetch_one(connection, "SELECT dim FROM index_meta WHERE table_name = ?", (SUMMARY_VECTORS,))
    if row is None or not vector_table_exists(connection, SUMMARY_VECTORS):
        return None
    return int(row[0])


def rebuild_vectors(connection: apsw.Connection, now_millis: int) -> int:
    """Empty the table and queue every embeddable summary again (`/embeddings rebuild`)."""
    dim = bound_dim(connection)
    with connection:
        if dim is not None:
            _drop(connection)
            _create(connection, dim)
        queued = queue_all(connection, now_millis)
    return queued


def queue_all(connection: apsw.Connection, now_millis: int) -> int:
    ids = [int(row[0]) for row in fetch_all(connection, f"SELECT s.id FROM summaries s WHERE {EMBEDDABLE}")]
    for summary_id in ids:
        queue_summary_job(connection, summary_id, now_millis)
    return len(ids)


def insert_vectors(connection: apsw.Connection, vectors: list[tuple[int, bytes]]) -> int:
    """Insert vectors of embeddable summaries that have none yet, in one transaction."""
    added = 0
    with connection:
        for summary_id, blob in vectors:
            meta = fetch_one(
                connection,
                f"SELECT s.chat, s.kind, s.segment_id FROM summaries s WHERE s.id = ? AND {EMBEDDABLE}",
                (summary_id,),
            )
            if meta is None or fetch_one(connection, f"SELECT 1 FROM {SUMMARY_VECTORS} WHERE rowid = ?", (summary_id,)):
                continue
            connection.execute(
                f"INSERT INTO {SUMMARY_VECTORS} (rowid, chat_key, embedding, kind, segment_id) VALUES (?, ?, ?, ?, ?)",
                (summary_id, meta[0], blob, meta[1], meta[2]),
            )
            added += 1
    return added


def knn(
    connection: apsw.Connection,
    chat_key: int,
    vector: npt.NDArray[np.float32],
    kind: SummaryKind,
    limit: int,
    *,
    segment_id: int | None = None,
    exclude_segment_id: int | None = None,
) -> list[tuple[int, float]]:
    """(summary id, cosine distance), closest first."""
    if limit <= 0 or not vector_table_exists(connection, SUMMARY_VECTORS):
        return []
    clauses = ["embedding MATCH ?", "k = ?", "chat_key = ?", "kind = ?"]
    params: list[object] = [np.ascontiguousarray(vector, dtype=np.float32).tobytes(), limit, chat_key, kind.value]
    if segment_id is not None:
        clauses.append("segment_id = ?")
        params.append(segment_id)
    if exclude_segment_id is not None:
        clauses.append("segment_id != ?")
        params.append(exclude_segment_id)
    rows = fetch_all(
        connection,
        f"SELECT rowid, distance FROM {SUMMARY_VECTORS} WHERE {' AND '.join(clauses)} ORDER BY distance",
        params,
    )
    return [(int(row[0]), float(row[1])) for row in rows]


def vector_count(connection: apsw.Connection) -> int:
    if not vector_table_exists(connection, SUMMARY_VECTORS):
        return 0
    row = fetch_one(connection, f"SELECT count(*) FROM {SUMMARY_VECTORS}")
    return 0 if row is None else int(row[0])


def _create(connection: apsw.Connection, dim: int) -> None:
    connection.execute(
        f"CREATE VIRTUAL TABLE {SUMMARY_VECTORS} USING vec0(chat_key integer partition key,"
        f" embedding float[{dim}] distance_metric=cosine, kind text, segment_id integer)"
    )
    for trigger in _TRIGGERS:
        connection.execute(trigger)


def _drop(connection: apsw.Connection) -> None:
    # The triggers name the table: dropped first, recreated with it.
    connection.execute("DROP TRIGGER IF EXISTS summaries_vector_stale")
    connection.execute("DROP TRIGGER IF EXISTS summaries_vector_gone")
    connection.execute(f"DROP TABLE {SUMMARY_VECTORS}")
