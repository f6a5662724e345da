"""The texts of claimed embedding jobs, read on the claim's own connection (as SQLite's
`store/sqlite/job_texts.py`): a message's content, an archival memory's content, an embeddable
summary's text; None for a job whose target row is gone or no longer wants a vector."""

from __future__ import annotations

from collections.abc import Sequence

from klaw.store.postgres.connection import Connection, fetch_all
from klaw.store.records import MEMORY_TARGET, MESSAGE_TARGET, ClaimedJob, EmbeddingJob
from klaw.store.summaries.postgres.rows import EMBEDDABLE
from klaw.store.summaries.records import SUMMARY_TARGET

TEXT_QUERIES = {
    MESSAGE_TARGET: "SELECT rowid, content FROM messages WHERE rowid = ANY(%s)",
    MEMORY_TARGET: "SELECT rowid, content FROM memory_chunks WHERE rowid = ANY(%s)",
    SUMMARY_TARGET: f"SELECT s.id, s.text FROM summaries s WHERE s.id = ANY(%s) AND {EMBEDDABLE}",
}


async def with_texts(connection: Connection, jobs: Sequence[EmbeddingJob]) -> list[ClaimedJob]:
    """`jobs` in their order, each with its target's text now (None: gone, or a target klaw does not know)."""
    texts: dict[tuple[str, int], str] = {}
    for target in dict.fromkeys(job.target for job in jobs):
        sql = TEXT_QUERIES.get(target)
        if sql is None:
            continue
        ids = sorted({job.target_rowid for job in jobs if job.target == target})
        texts.update(((target, int(row[0])), str(row[1])) for row in await fetch_all(connection, sql, (ids,)))
    return [ClaimedJob(job, texts.get((job.target, job.target_rowid))) for job in jobs]
