"""The texts of claimed embedding jobs, read on the database thread in the claim's own call.

The embedding queue used to claim a batch (on the database thread), then read its texts (messages
on a read connection, summaries and memories on the database thread again): two trips a batch, ~2.8
a sequential turn of `klaw bench turn` (decision 272). The texts are read here right after the claim,
by the same rules as each target's `texts`: a message's content, an archival memory's content, an
embeddable summary's text (an exchange summary, or a final segment summary). A job whose target row
is gone, or whose target no longer wants a vector, gets None.

Each target's ids go in as one JSON array (`json_each`), so the statement is the same whatever the
batch's size and stays prepared (decision 263).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import apsw

from klaw.store.records import MEMORY_TARGET, MESSAGE_TARGET, ClaimedJob, EmbeddingJob
from klaw.store.sqlite.query import fetch_all
from klaw.store.summaries.records import SUMMARY_TARGET
from klaw.store.summaries.sqlite.rows import EMBEDDABLE

_IDS = "(SELECT value FROM json_each(?))"
TEXT_QUERIES = {
    MESSAGE_TARGET: f"SELECT rowid, content FROM messages WHERE rowid IN {_IDS}",
    MEMORY_TARGET: f"SELECT rowid, content FROM memory_chunks WHERE rowid IN {_IDS}",
    SUMMARY_TARGET: f"SELECT s.id, s.text FROM summaries s WHERE s.id IN {_IDS} AND {EMBEDDABLE}",
}


def with_texts(connection: apsw.Connection, jobs: Sequence[EmbeddingJob]) -> list[ClaimedJob]:
    """`jobs` in their order, each with its target's text now (None: gone, or a target klaw does not know)."""
    texts: dict[tuple[str, int], str] = {}
    for target in dict.fromkeys(job.target for job in jobs):
        sql = TEXT_QUERIES.get(target)
        if sql is None:
            continue
        ids = json.dumps(sorted({job.target_rowid for job in jobs if job.target == target}))
        texts.update(((target, int(row[0])), str(row[1])) for row in fetch_all(connection, sql, (ids,)))
    return [ClaimedJob(job, texts.get((job.target, job.target_rowid))) for job in jobs]
