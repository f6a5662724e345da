"""SQL statements both backends run alike, written once with SQLite's `?` placeholders; the PostgreSQL
repositories take them through `dialect.postgres_sql`. A statement lands here only when nothing but its
placeholders differs between the backends."""

from __future__ import annotations

from klaw.store.shared.dialect import postgres_sql

# Queue an embedding, due now; a job already queued for the same thing is left as it is.
# Parameters: target, rowid, pending status, now, now.
ENQUEUE_JOB = (
    "INSERT INTO embedding_jobs (target, target_rowid, status, attempts, next_attempt_at, created_at)"
    " VALUES (?, ?, ?, 0, ?, ?) ON CONFLICT (target, target_rowid) DO NOTHING"
)
# Queue an embedding, or queue it again due now with its attempts reset (a summary's text changed).
REQUEUE_JOB = (
    "INSERT INTO embedding_jobs (target, target_rowid, status, attempts, next_attempt_at, created_at)"
    " VALUES (?, ?, ?, 0, ?, ?) ON CONFLICT (target, target_rowid) DO UPDATE SET status = excluded.status,"
    " attempts = 0, next_attempt_at = excluded.next_attempt_at, last_error = NULL"
)

PG_ENQUEUE_JOB = postgres_sql(ENQUEUE_JOB)
PG_REQUEUE_JOB = postgres_sql(REQUEUE_JOB)
