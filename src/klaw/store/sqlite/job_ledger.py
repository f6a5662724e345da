"""The end of an embedding batch without more trips to the database thread (decision 229).

The embedding queue ends each batch with four calls after its vectors go in: `complete` (delete the
jobs), `claim` again (none due), `next_due_at` (when to wake). Each waits for the one database
thread behind a turn's writes, and the turn's writes wait behind them. Here the vectors' own write
answers them:

* **A put pays its jobs.** The transaction that stores a target's vectors deletes the jobs owed for
  them (`pay`): the table holds exactly the work still owed (a vector stored is not owed), in one
  commit, so no crash can leave a vector with its job or a job deleted without its vector. The ids
  it deleted are kept, and `complete` of those ids needs no round trip.
* **When the next job is due is read in the same transaction** (`min(next_attempt_at)` of the
  pending jobs) and kept with the `embedding_jobs` generation of decision 197 (TEMP triggers raise
  it on every insert and update of the table, whoever writes). While the generation is unchanged,
  `claim` with nothing due and `next_due_at` answer from memory; a job queued or rescheduled since
  (a turn's message, a retry, a failure, `/embeddings on` reviving the failed) sends them to the database as
  before. A delete (a job paid or completed, a forget) raises nothing: it can only make the next
  job later, so "nothing due by now" stays true, and a `next_due_at` that is early only wakes the
  queue for a claim that finds nothing and reads the time again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import apsw

from klaw.store.records import EmbeddingJobStatus, from_millis
from klaw.store.shared.paid_jobs import PaidJobs
from klaw.store.sqlite.query import fetch_all, fetch_value
from klaw.store.sqlite.read_cache import TableGenerations

_JOBS = ("embedding_jobs",)
_PENDING = EmbeddingJobStatus.PENDING.value


@dataclass(frozen=True)
class Paid:
    """What a put's transaction paid: the job ids, and the pending jobs' earliest due time after it."""

    job_ids: list[int]
    next_due: int | None
    stamp: tuple[int, ...] | None


class JobLedger:
    """Job ids paid by puts and when the next job is due, valid while `embedding_jobs` is unwritten."""

    def __init__(self, generations: TableGenerations) -> None:
        self._generations = generations
        self.paid = PaidJobs()
        self._due: tuple[int | None, tuple[int, ...]] | None = None

    def prepare(self, connection: apsw.Connection) -> None:
        """Install the generations' triggers: on the database thread, outside any transaction (a
        rollback would take the TEMP triggers back and leave them counted as installed)."""
        self._generations.install(connection)

    def pay(self, connection: apsw.Connection, target: str, rowids: Sequence[int]) -> Paid:
        """Inside the put's transaction: delete the jobs of `target` for `rowids` and read when the
        next pending job is due. `settle` the answer once the transaction has committed."""
        return self.pay_all(connection, [(target, rowids)])

    def pay_all(self, connection: apsw.Connection, owed: Sequence[tuple[str, Sequence[int]]]) -> Paid:
        """`pay` for the vectors of several targets stored in one transaction (sqlite/vector_puts.py)."""
        paid: list[int] = []
        for target, rowids in owed:
            rows = fetch_all(
                connection,
                "DELETE FROM embedding_jobs WHERE target = ? AND target_rowid IN (SELECT value FROM json_each(?))"
                " RETURNING id",
                (target, json.dumps(sorted({int(rowid) for rowid in rowids}))),
            )
            paid.extend(int(row[0]) for row in rows)
        return Paid(paid, _earliest_due(connection), self._generations.stamp(_JOBS))

    def settle(self, paid: Paid) -> None:
        """Keep what a committed put paid (on the database thread, after its commit)."""
        self.paid.add(paid.job_ids)
        self._keep_due(paid.next_due, paid.stamp)

    def nothing_due(self, now_millis: int) -> bool:
        """Whether no pending job is due by `now_millis`, known without a read."""
        known = self.next_due()
        return known is not None and (known[0] is None or known[0] > now_millis)

    def next_due(self) -> tuple[int | None] | None:
        """(the earliest due time of a pending job, None for none), or None when not known now."""
        due = self._due
        if due is None or due[1] != self._generations.stamp(_JOBS):
            return None
        return (due[0],)

    def read_due(self, connection: apsw.Connection) -> int | None:
        """Read (on the database thread, outside a transaction) and keep when the next job is due."""
        self.prepare(connection)
        stamp = self._generations.stamp(_JOBS)
        earliest = _earliest_due(connection)
        self._keep_due(earliest, stamp)
        return earliest

    def _keep_due(self, next_due: int | None, stamp: tuple[int, ...] | None) -> None:
        self._due = None if stamp is None else (next_due, stamp)


def due_datetime(millis: int | None) -> datetime | None:
    return None if millis is None else from_millis(millis)


def _earliest_due(connection: apsw.Connection) -> int | None:
    earliest = fetch_value(connection, "SELECT min(next_attempt_at) FROM embedding_jobs WHERE status = ?", (_PENDING,))
    return None if earliest is None else int(earliest)
