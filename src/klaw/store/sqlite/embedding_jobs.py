"""The durable embedding queue in SQLite (`embedding_jobs`): due jobs, retries, failures, counts.

A job row is inserted in the same transaction as the thing it embeds (see `insert_message_job`,
called by `SqliteMessages.append_in`), and deleted once its vector is stored, so the table holds
exactly the work still owed: pending jobs waiting for their next attempt, and failed jobs that
stay visible until someone retries them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import apsw

from klaw.store.records import (
    MESSAGE_TARGET,
    ClaimedJob,
    EmbeddingJob,
    EmbeddingJobCounts,
    EmbeddingJobStatus,
    TargetJobCounts,
    to_millis,
)
from klaw.store.shared.rows import JOB_COLUMNS, job_from_row
from klaw.store.shared.statements import ENQUEUE_JOB
from klaw.store.sqlite.connection import SqliteDatabase
from klaw.store.sqlite.job_ledger import JobLedger, due_datetime
from klaw.store.sqlite.job_texts import with_texts
from klaw.store.sqlite.query import fetch_all
from klaw.store.sqlite.vector_puts import SqliteVectorPuts

if TYPE_CHECKING:  # numpy where a vector is touched: opening the store needs none (decision 437)
    import numpy as np
    import numpy.typing as npt

_PENDING = EmbeddingJobStatus.PENDING.value
_FAILED = EmbeddingJobStatus.FAILED.value
# Error text is already short and content-free by the caller's contract; the cap keeps a
# misbehaving caller from filling the table.
MAX_ERROR_CHARS = 300


def insert_message_job(connection: apsw.Connection, rowid: int, now_millis: int) -> None:
    """Queue a message's embedding, due now; a job already queued for it is left as it is."""
    connection.execute(
        ENQUEUE_JOB,
        (MESSAGE_TARGET, rowid, _PENDING, now_millis, now_millis),
    )


class SqliteEmbeddingJobs:
    """`ledger`: what the puts paid and when the next job is due, shared with the vector stores
    (job_ledger.py): a batch's end costs no round trip while nothing else wrote the queue."""

    def __init__(
        self, db: SqliteDatabase, clock: Callable[[], datetime], ledger: JobLedger, puts: SqliteVectorPuts
    ) -> None:
        self._db = db
        self._clock = clock
        self._ledger = ledger
        self._puts = puts

    async def put_vectors(self, puts: Mapping[str, Sequence[tuple[int, npt.NDArray[np.float32]]]]) -> int:
        """Every target's vectors and the jobs they pay in one transaction (vector_puts.py, decision 471)."""
        return await self._puts.put(puts)

    async def due(self, now: datetime, limit: int) -> list[EmbeddingJob]:
        due_by = to_millis(now)
        if self._ledger.nothing_due(due_by):
            return []
        return await self._db.run(lambda connection: self._due_in(connection, due_by, limit))

    async def claim(self, now: datetime, limit: int, hold: timedelta) -> list[EmbeddingJob]:
        """`due`: one engine owns klaw.db, so there is nobody to claim jobs from (`hold` unused)."""
        return await self.due(now, limit)

    async def claim_texts(self, now: datetime, limit: int, hold: timedelta) -> list[ClaimedJob]:
        """`claim` and the jobs' texts in one call on the database thread (job_texts.py)."""
        due_by = to_millis(now)
        if self._ledger.nothing_due(due_by):
            return []
        return await self._db.run(
            lambda connection: with_texts(connection, self._due_in(connection, due_by, limit)), behind=True
        )  # the embedding queue's: no turn waits for it (decision 382)

    def _due_in(self, connection: apsw.Connection, due_by: int, limit: int) -> list[EmbeddingJob]:
        rows = fetch_all(
            connection,
            f"SELECT {JOB_COLUMNS} FROM embedding_jobs WHERE status = ? AND next_attempt_at <= ?"
            " ORDER BY next_attempt_at, id LIMIT ?",
            (_PENDING, due_by, limit),
        )
        if not rows:
            self._ledger.read_due(connection)  # the `next_due_at` that follows an empty claim
        return [job_from_row(row) for row in rows]

    async def next_due_at(self) -> datetime | None:
        known = self._ledger.next_due()
        if known is not None:
            return due_datetime(known[0])
        return due_datetime(await self._db.run(self._ledger.read_due))

    async def complete(self, job_ids: Sequence[int]) -> None:
        """Delete the jobs, but those the put of their vectors deleted already (without a round trip)."""
        ids = [(job_id,) for job_id in self._ledger.paid.unpaid(job_ids)]
        if not ids:
            return

        def delete(connection: apsw.Connection) -> None:
            with connection:
                connection.executemany("DELETE FROM embedding_jobs WHERE id = ?", ids)

        await self._db.run(delete)

    async def retry(self, job_id: int, error: str, next_attempt_at: datetime) -> None:
        params = (error[:MAX_ERROR_CHARS], to_millis(next_attempt_at), job_id)
        await self._db.run(
            lambda connection: connection.execute(
                "UPDATE embedding_jobs SET attempts = attempts + 1, last_error = ?, next_attempt_at = ? WHERE id = ?",
                params,
            )
        )

    async def fail(self, job_id: int, error: str) -> None:
        params = (_FAILED, error[:MAX_ERROR_CHARS], job_id)
        await self._db.run(
            lambda connection: connection.execute(
                "UPDATE embedding_jobs SET status = ?, attempts = attempts + 1, last_error = ? WHERE id = ?", params
            )
        )

    async def counts(self) -> EmbeddingJobCounts:
        def query(connection: apsw.Connection) -> EmbeddingJobCounts:
            rows: dict[str, int] = dict(
                fetch_all(connection, "SELECT status, count(*) FROM embedding_jobs GROUP BY status")
            )
            return EmbeddingJobCounts(pending=int(rows.get(_PENDING, 0)), failed=int(rows.get(_FAILED, 0)))

        return await self._db.run(query)

    async def by_target(self) -> list[TargetJobCounts]:
        rows = await self._db.rows(
            "SELECT target, sum(status = ?), sum(status = ?),"
            " (SELECT j.last_error FROM embedding_jobs j WHERE j.target = embedding_jobs.target AND j.status = ?"
            " ORDER BY j.id DESC LIMIT 1) FROM embedding_jobs GROUP BY target ORDER BY target",
            (_PENDING, _FAILED, _FAILED),
        )
        return [TargetJobCounts(str(r[0]), int(r[1] or 0), int(r[2] or 0), r[3]) for r in rows]

    async def retry_failed(self) -> int:
        now = to_millis(self._clock())

        def revive(connection: apsw.Connection) -> int:
            connection.execute(
                "UPDATE embedding_jobs SET status = ?, attempts = 0, next_attempt_at = ? WHERE status = ?",
                (_PENDING, now, _FAILED),
            )
            return int(connection.changes())

        return await self._db.run(revive)

    async def enqueue_messages(self, rowids: Sequence[int]) -> int:
        wanted = list(dict.fromkeys(rowids))
        if not wanted:
            return 0
        now = to_millis(self._clock())

        def insert(connection: apsw.Connection) -> int:
            queued = 0
            with connection:
                for rowid in wanted:
                    # The WHERE on the SELECT skips unknown rowids (and lets SQLite parse the upsert).
                    connection.execute(
                        "INSERT INTO embedding_jobs (target, target_rowid, status, attempts, next_attempt_at,"
                        " created_at) SELECT ?, rowid, ?, 0, ?, ? FROM messages WHERE rowid = ?"
                        " ON CONFLICT (target, target_rowid) DO UPDATE SET status = excluded.status,"
                        " attempts = 0, next_attempt_at = excluded.next_attempt_at WHERE status = ?",
                        (MESSAGE_TARGET, _PENDING, now, now, rowid, _FAILED),
                    )
                    queued += int(connection.changes())
            return queued

        return await self._db.run(insert)
