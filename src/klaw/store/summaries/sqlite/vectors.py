"""Summary vectors in the sqlite-vec table `vec_summaries`, bound to one embedder through `index_meta`.

Partitioned by chat and kind, so "final segment summaries of this chat except the current segment"
is an exact sqlite-vec KNN over that chat's segment summaries only (a few thousand at most: about a
millisecond), never over its exchange summaries, which grow with every turn (sqlite-vec scans a whole
partition, filtering metadata row by row: ~17 ms at 50k vectors). "Exchange summaries of segment S"
reads that segment's vectors by rowid and ranks them with one numpy product, exact too; only a
segment of more than `POINT_LOOKUP_MAX` exchanges falls back to a KNN over the chat's exchange
partition. No in-memory cache is needed as for messages (`vector_cache.py`); `klaw bench scale`
reports the latency.

The table is created with the first summary vector. Unlike message vectors, summary vectors of another
embedder are not refused but rebuilt: the table is dropped and every embeddable summary queued again.
Triggers created with the table drop a vector when its summary's text changes or the summary is
deleted, so a vector never outlives its text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import apsw

from klaw.store.records import from_millis
from klaw.store.sqlite.query import fetch_all, fetch_one
from klaw.store.sqlite.vector_tables import record_embedder, table_exists
from klaw.store.summaries.records import SummaryHit
from klaw.store.summaries.rows import EXCHANGE, SEGMENT
from klaw.store.summaries.sqlite.rows import EMBEDDABLE, load_summaries, queue_summary_job

if TYPE_CHECKING:  # numpy where a vector is touched: opening the store needs none (decision 437)
    import numpy as np
    import numpy.typing as npt

SUMMARY_VECTORS = "vec_summaries"
# A segment with more exchange summaries than this is searched by KNN instead of point lookups.
POINT_LOOKUP_MAX = 512
# sqlite-vec refuses a KNN with k above this ("k value in knn query too large"). The limits come from
# `/rag set` and engine.yaml, which only ask them to be > 0: a larger one asks for every row there is.
VEC0_MAX_K = 4096
_TRIGGERS = (
    f"CREATE TRIGGER IF NOT EXISTS summaries_vector_stale AFTER UPDATE OF text ON summaries BEGIN"
    f" DELETE FROM {SUMMARY_VECTORS} WHERE rowid = old.id; END",
    f"CREATE TRIGGER IF NOT EXISTS summaries_vector_gone AFTER DELETE ON summaries BEGIN"
    f" DELETE FROM {SUMMARY_VECTORS} WHERE rowid = old.id; END",
)


def bind_summary_vectors(connection: apsw.Connection, embedder_id: str, dim: int, now_millis: int) -> int:
    """Check the table against this embedder: vectors of another one are dropped and every summary is
    queued again; returns how many were queued. The table itself is created with its first vector
    (`insert_vectors`), so a database without summary vectors has no summary vector table."""
    with connection:
        row = fetch_one(connection, "SELECT embedder_id, dim FROM index_meta WHERE table_name = ?", (SUMMARY_VECTORS,))
        exists = table_exists(connection, SUMMARY_VECTORS)
        if not exists or row is None or (row[0], row[1]) == (embedder_id, dim):
            return 0
        _drop(connection)
        queued = queue_all(connection, now_millis)
    return queued


def rebuild_vectors(connection: apsw.Connection, now_millis: int) -> int:
    """Drop every summary vector and queue every embeddable summary again (`/embeddings rebuild`)."""
    with connection:
        if table_exists(connection, SUMMARY_VECTORS):
            _drop(connection)
        queued = queue_all(connection, now_millis)
    return queued


def queue_all(connection: apsw.Connection, now_millis: int) -> int:
    ids = [int(row[0]) for row in fetch_all(connection, f"SELECT s.id FROM summaries s WHERE {EMBEDDABLE}")]
    for summary_id in ids:
        queue_summary_job(connection, summary_id, now_millis)
    return len(ids)


def insert_vectors(connection: apsw.Connection, vectors: list[tuple[int, bytes]], embedder_id: str, dim: int) -> int:
    """Insert vectors of embeddable summaries that have none yet, in one transaction; the table is
    created (for `embedder_id`, `dim`) on first use."""
    added = 0
    with connection:
        if not table_exists(connection, SUMMARY_VECTORS):
            _create(connection, dim)
            record_embedder(connection, SUMMARY_VECTORS, embedder_id, dim)
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


def query_array(vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """A query vector as the searches read it (contiguous float32); numpy imported here, not when the store
    opens (decision 437)."""
    import numpy as np

    return np.ascontiguousarray(vector, dtype=np.float32)


def nearest_segment_summaries(
    connection: apsw.Connection,
    chat_key: int,
    vector: npt.NDArray[np.float32],
    limit: int,
    exclude_segment_id: int | None,
) -> list[tuple[int, float]]:
    """(summary id, cosine distance) of the chat's closest segment summaries, closest first."""
    if limit <= 0 or not table_exists(connection, SUMMARY_VECTORS):
        return []
    exclude = "" if exclude_segment_id is None else " AND segment_id != ?"
    rows = fetch_all(
        connection,
        f"SELECT rowid, distance FROM {SUMMARY_VECTORS} WHERE embedding MATCH ? AND k = ? AND chat_key = ?"
        f" AND kind = ?{exclude} ORDER BY distance",
        (
            _blob(vector),
            min(limit, VEC0_MAX_K),
            chat_key,
            SEGMENT,
            *(() if exclude_segment_id is None else (exclude_segment_id,)),
        ),
    )
    return [(int(row[0]), float(row[1])) for row in rows]


def nearest_exchange_summaries(
    connection: apsw.Connection, chat_key: int, segment_id: int, vector: npt.NDArray[np.float32], limit: int
) -> list[tuple[int, float]]:
    """(summary id, cosine distance) of the segment's closest exchange summaries, closest first."""
    import numpy as np

    if limit <= 0 or not table_exists(connection, SUMMARY_VECTORS):
        return []
    ids = [
        int(row[0])
        for row in fetch_all(
            connection, "SELECT id FROM summaries WHERE segment_id = ? AND kind = ?", (segment_id, EXCHANGE)
        )
    ]
    if len(ids) > POINT_LOOKUP_MAX:
        rows = fetch_all(
            connection,
            f"SELECT rowid, distance FROM {SUMMARY_VECTORS} WHERE embedding MATCH ? AND k = ? AND chat_key = ?"
            " AND kind = ? AND segment_id = ? ORDER BY distance",
            (_blob(vector), min(limit, VEC0_MAX_K), chat_key, EXCHANGE, segment_id),
        )
        return [(int(row[0]), float(row[1])) for row in rows]
    found: list[tuple[int, bytes]] = []
    for summary_id in ids:  # point lookups: vec0 answers `rowid = ?` directly, an IN list by scanning
        row = fetch_one(connection, f"SELECT embedding FROM {SUMMARY_VECTORS} WHERE rowid = ?", (summary_id,))
        if row is not None:
            found.append((summary_id, bytes(row[0])))
    if not found:
        return []
    matrix = np.frombuffer(b"".join(blob for _, blob in found), dtype=np.float32).reshape(len(found), -1)
    query = np.asarray(vector, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1) * max(float(np.linalg.norm(query)), 1e-12)
    similarities = (matrix @ query) / np.maximum(norms, 1e-12)
    order = np.argsort(-similarities, kind="stable")[:limit]
    return [(found[i][0], float(1.0 - similarities[i])) for i in order]


def vector_count(connection: apsw.Connection) -> int:
    if not table_exists(connection, SUMMARY_VECTORS):
        return 0
    row = fetch_one(connection, f"SELECT count(*) FROM {SUMMARY_VECTORS}")
    return 0 if row is None else int(row[0])


def _blob(vector: npt.NDArray[np.float32]) -> bytes:
    import numpy as np

    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()


def _create(connection: apsw.Connection, dim: int) -> None:
    connection.execute(
        f"CREATE VIRTUAL TABLE {SUMMARY_VECTORS} USING vec0(chat_key integer partition key, kind text partition key,"
        f" embedding float[{dim}] distance_metric=cosine, segment_id integer, chunk_size=128)"
    )
    for trigger in _TRIGGERS:
        connection.execute(trigger)


def _drop(connection: apsw.Connection) -> None:
    # The triggers name the table: dropped first, recreated with it.
    connection.execute("DROP TRIGGER IF EXISTS summaries_vector_stale")
    connection.execute("DROP TRIGGER IF EXISTS summaries_vector_gone")
    connection.execute(f"DROP TABLE {SUMMARY_VECTORS}")
    connection.execute("DELETE FROM index_meta WHERE table_name = ?", (SUMMARY_VECTORS,))


def summary_hits(connection: apsw.Connection, found: list[tuple[int, float]], table: str, key: str) -> list[SummaryHit]:
    """Summaries by (id, distance), with the start of their segment or exchange (`table`.id = s.`key`)."""
    if not found:
        return []
    marks = ",".join("?" * len(found))
    ids = [summary_id for summary_id, _ in found]
    by_id = {s.id: s for s in load_summaries(connection, f"s.id IN ({marks})", ids)}
    starts = {
        int(row[0]): from_millis(int(row[1]))
        for row in fetch_all(
            connection,
            f"SELECT s.id, t.started_at FROM summaries s JOIN {table} t ON t.id = s.{key} WHERE s.id IN ({marks})",
            ids,
        )
    }
    return [SummaryHit(by_id[i], 1.0 - distance, starts.get(i)) for i, distance in found if i in by_id]
