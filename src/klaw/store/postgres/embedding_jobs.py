"""The durable embedding queue in PostgreSQL (`embedding_jobs`): as SQLite's (`store/sqlite/embedding_jobs.py`).

A job row is inserted in the same transaction as the thing it embeds and deleted once its vector is
stored, so the table holds exactly the work still owed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from klaw.store.postgres.connection import Connection, PostgresDatabase, execute, fetch_all, fetch_value
from klaw.store.postgres.job_texts import with_texts
from klaw.store.records import (
    MESSAGE_TARGET,
    ClaimedJob,
    EmbeddingJob,
    EmbeddingJobCounts,
    EmbeddingJobStatus,
    TargetJobCounts,
    from_millis,
    to_millis,
)
from klaw.store.shared.paid_jobs import PaidJobs
from klaw.store.shared.rows import JOB_COLUMNS, job_from_row
from klaw.store.shared.statements import PG_ENQUEUE_JOB

if TYPE_CHECKING:  # vector_puts.py pays its jobs with this module's `pay_jobs`
    from klaw.store.postgres.vector_puts import PostgresVectorPuts

_PENDING = EmbeddingJobStatus.PENDING.value
_FAILED = EmbeddingJobStatus.FAILED.value
MAX_ERROR_CHARS = 300  # error text is short and content-free by contract; the cap guards the table


async def insert_job(connection: Connection, target: str, rowid: int, now_millis: int) -> None:
    """Queue an embedding, due now; a job already queued for it is left as it is."""
    await execute(
        connection,
        PG_ENQUEUE_JOB,
        (target, rowid, _PENDING, now_millis, now_millis),
    )


async def pay_jobs(connection: Connection, target: str, rowids: Sequence[int]) -> list[int]:
    """Inside a vector put's transaction: delete the jobs its vectors pay (decision 229); their ids,
    for `PaidJobs.add` once the transaction has committed."""
    rows = await fetch_all(
        connection,
        "DELETE FROM embedding_jobs WHERE target = %s AND target_rowid = ANY(%s) RETURNING id",
        (target, sorted({int(rowid) for rowid in rowids})),
    )
    return [int(row[0]) for row in rows]


async def _claim_in(connection: Connection, now: datetime, limit: int, hold: timedelta) -> list[EmbeddingJob]:
    rows = await fetch_all(
        connection,
        f"UPDATE embedding_jobs SET next_attempt_at = %s WHERE id IN (SELECT id FROM embedding_jobs"
        " WHERE status = %s AND next_attempt_at <= %s ORDER BY next_attempt_at, id LIMIT %s"
        f" FOR UPDATE SKIP LOCKED) RETURNING {JOB_COLUMNS}",
        (to_millis(now + hold), _PENDING, to_millis(now), limit),
    )
    return [job_from_row(row) for row in sorted(rows, key=lambda row: int(row[0]))]


class PostgresEmbeddingJobs:
    """`paid`: the jobs the vector puts deleted already, which `complete` skips (a round trip saved)."""

    def __init__(
        self, db: PostgresDatabase, clock: Callable[[], datetime], paid: PaidJobs, puts: PostgresVectorPuts
    ) -> None:
        self._db = db
        self._clock = clock
        self._paid = paid
        self._puts = puts

    async def put_vectors(self, puts: Mapping[str, Sequence[tuple[int, npt.NDArray[np.float32]]]]) -> int:
        """Every target's vectors and the jobs they pay in one transaction (vector_puts.py, decision 471)."""
        return await self._puts.put(puts)

    async def due(self, now: datetime, limit: int) -> list[EmbeddingJob]:
        rows = await self._db.rows(
            f"SELECT {JOB_COLUMNS} FROM embedding_jobs WHERE status = %s AND next_attempt_at <= %s"
            " ORDER BY next_attempt_at, id LIMIT %s",
            (_PENDING, to_millis(now), limit),
        )
        return [job_from_row(row) for row in rows]

    async def claim(self, now: datetime, limit: int, hold: timedelta) -> list[EmbeddingJob]:
        """`due`, each job postponed by `hold` in the same statement: engines sharing the database skip
        the rows another one is claiming (`FOR UPDATE SKIP LOCKED`) and, once claimed, find them not due,
        so no job is embedded twice; one whose engine dies is due again after `hold`."""
        async with self._db.transaction() as connection:
            return await _claim_in(connection, now, limit, hold)

    async def claim_texts(self, now: datetime, limit: int, hold: timedelta) -> list[ClaimedJob]:
        """`claim` and the jobs' texts on one connection, in the claim's transaction (job_texts.py)."""
        async with self._db.transaction() as connection:
            jobs = await _claim_in(connection, now, limit, hold)
            return await with_texts(connection, jobs) if jobs else []

    async def next_due_at(self) -> datetime | None:
        async with self._db.connection() as connection:
            earliest = await fetch_value(
                connection, "SELECT min(next_attempt_at) FROM embedding_jobs WHERE status = %s", (_PENDING,)
            )
        return None if earliest is None else from_millis(int(earliest))

    async def complete(self, job_ids: Sequence[int]) -> None:
        left = self._paid.unpaid(job_ids)
        if not left:
            return
        async with self._db.transaction() as connection:
            await execute(connection, "DELETE FROM embedding_jobs WHERE id = ANY(%s)", (left,))

    async def retry(self, job_id: int, error: str, next_attempt_at: datetime) -> None:
        async with self._db.transaction() as connection:
            await execute(
                connection,
                "UPDATE embedding_jobs SET attempts = attempts + 1, last_error = %s, next_attempt_at = %s"
                " WHERE id = %s",
                (error[:MAX_ERROR_CHARS], to_millis(next_attempt_at), job_id),
            )

    async def fail(self, job_id: int, error: str) -> None:
        async with self._db.transaction() as connection:
            await execute(
                connection,
                "UPDATE embedding_jobs SET status = %s, attempts = attempts + 1, last_error = %s WHERE id = %s",
                (_FAILED, error[:MAX_ERROR_CHARS], job_id),
            )

    async def counts(self) -> EmbeddingJobCounts:
        async with self._db.connection() as connection:
            rows: dict[str, int] = dict(
                await fetch_all(connection, "SELECT status, count(*) FROM embedding_jobs GROUP BY status")
            )
        return EmbeddingJobCounts(pending=int(rows.get(_PENDING, 0)), failed=int(rows.get(_FAILED, 0)))

    async def by_target(self) -> list[TargetJobCounts]:
        rows = await self._db.rows(
            "SELECT target, count(*) FILTER (WHERE status = %s), count(*) FILTER (WHERE status = %s),"
            " (SELECT j.last_error FROM embedding_jobs j WHERE j.target = embedding_jobs.target AND j.status = %s"
            " ORDER BY j.id DESC LIMIT 1) FROM embedding_jobs GROUP BY target ORDER BY target",
            (_PENDING, _FAILED, _FAILED),
        )
        return [TargetJobCounts(str(r[0]), int(r[1] or 0), int(r[2] or 0), r[3]) for r in rows]

    async def retry_failed(self) -> int:
        now = to_millis(self._clock())
        async with self._db.transaction() as connection:
            return await execute(
                connection,
                "UPDATE embedding_jobs SET status = %s, attempts = 0, next_attempt_at = %s WHERE status = %s",
                (_PENDING, now, _FAILED),
            )

    async def enqueue_messages(self, rowids: Sequence[int]) -> int:
        wanted = list(dict.fromkeys(rowids))
        if not wanted:
            return 0
        now = to_millis(self._clock())
        async with self._db.transaction() as connection:
            return await execute(
                connection,
                "INSERT INTO embedding_jobs (target, target_rowid, status, attempts, next_attempt_at, created_at)"
                " SELECT %s, m.rowid, %s, 0, %s, %s FROM messages m WHERE m.rowid = ANY(%s)"
                " ON CONFLICT (target, target_rowid) DO UPDATE SET status = excluded.status, attempts = 0,"
                " next_attempt_at = excluded.next_attempt_at WHERE embedding_jobs.status = %s",
                (MESSAGE_TARGET, _PENDING, now, now, wanted, _FAILED),
            )
