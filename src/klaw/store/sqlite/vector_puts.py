"""Vector puts of several job targets in one transaction on the database thread (decision 471).

A turn leaves two kinds of vectors to store: its message and reply (`vec_messages`) and, a moment later,
the exchange's summary (`vec_summaries`); the embedding queue claims them together and embeds them in one
call. Stored by each target's own put they were two calls to the database thread and two transactions
(~2 ms of its CPU a turn at 1k messages, decision 459). Here each target's put is split into what it
does inside the transaction (`PutPart.insert`: its rows, returning what to do once they are committed)
and what is the same for all (the transaction, the jobs' payment, the ledger's settling), so one call
stores every target's vectors and pays every job. What stays as each put did it alone: the
generations' TEMP triggers are installed before the transaction (`JobLedger.prepare`), the jobs are
deleted in it (`JobLedger.pay_all`), and the ledger and the in-memory vector copies learn of the rows
only after the commit (`after`). A part that fails rolls the whole call back: the caller then stores
each target alone, as before (memory/embedding_queue.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import apsw

from klaw.store.sqlite.connection import SqliteDatabase
from klaw.store.sqlite.job_ledger import JobLedger
from klaw.store.work_protocol import put_parts

if TYPE_CHECKING:  # numpy where a vector is touched: opening the store needs none (decision 437)
    import numpy as np
    import numpy.typing as npt

Vectors = Sequence[tuple[int, "npt.NDArray[np.float32]"]]


def nothing_after() -> None:
    """The after-commit step of a part with nothing to tell anyone."""


@dataclass(frozen=True)
class PutPart:
    """One target's put, ready to run inside a transaction: `insert` stores its rows and returns how many
    it added and what to do once they are committed; `rowids` are what its jobs name (paid by the call)."""

    target: str
    rowids: list[int]
    insert: Callable[[apsw.Connection], tuple[int, Callable[[], None]]]


def run_puts(connection: apsw.Connection, ledger: JobLedger, parts: Sequence[PutPart]) -> list[int]:
    """On the database thread: every part's rows and the jobs they pay in one transaction, then each
    part's after-commit step. Returns how many vectors each part added."""
    ledger.prepare(connection)  # outside the transaction: a rollback would take the TEMP triggers back
    with connection:
        done = [part.insert(connection) for part in parts]
        paid = ledger.pay_all(connection, [(part.target, part.rowids) for part in parts])
    ledger.settle(paid)
    for _, after in done:  # committed: now the cached copies may see them
        after()
    return [added for added, _ in done]


async def put_one(db: SqliteDatabase, ledger: JobLedger, part: PutPart) -> int:
    """One target's put alone (its repository's `put`): `run_puts` of its part on the database thread."""
    # the embedding queue's: no turn waits for it (decision 382)
    return (await db.run(lambda connection: run_puts(connection, ledger, [part]), behind=True))[0]


class SqliteVectorPuts:
    """`EmbeddingJobRepository.put_vectors` on klaw.db: each target's `PutPart` maker, one call for all."""

    def __init__(
        self, db: SqliteDatabase, ledger: JobLedger, makers: Mapping[str, Callable[[Vectors], PutPart]]
    ) -> None:
        self._db = db
        self._ledger = ledger
        self._makers = dict(makers)

    async def put(self, puts: Mapping[str, Vectors]) -> int:
        parts = put_parts(self._makers, puts)
        if not parts:
            return 0
        added = await self._db.run(
            lambda connection: run_puts(connection, self._ledger, parts), behind=True
        )  # the embedding queue's: no turn waits for it (decision 382)
        return sum(added)
