"""Vector puts of several job targets in one transaction on PostgreSQL (decision 471), as on SQLite
(store/sqlite/vector_puts.py): each target's put split into its statements inside the transaction
(`PutPart.insert`, returning what to do once committed) and what all share — the transaction, the
jobs' payment (`pay_jobs`), the paid ids kept (`PaidJobs`) and the after-commit steps. A message part
holds its cache's `writing()` around the whole call, as its own put did around its transaction.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from klaw.store.postgres.connection import Connection, PostgresDatabase
from klaw.store.postgres.embedding_jobs import pay_jobs
from klaw.store.shared.paid_jobs import PaidJobs
from klaw.store.work_protocol import put_parts

Vectors = Sequence[tuple[int, npt.NDArray[np.float32]]]


def nothing_after() -> None:
    """The after-commit step of a part with nothing to tell anyone."""


@dataclass(frozen=True)
class PutPart:
    """One target's put, ready to run inside a transaction: `insert` stores its rows and returns how many
    it added and what to do once they are committed; `rowids` are what its jobs name (paid by the call);
    `around`, when given, is held from before the transaction until the after-commit steps ran."""

    target: str
    rowids: list[int]
    insert: Callable[[Connection], Awaitable[tuple[int, Callable[[], None]]]]
    around: Callable[[], AbstractAsyncContextManager[None]] | None = None


async def run_puts(db: PostgresDatabase, paid: PaidJobs, parts: Sequence[PutPart]) -> list[int]:
    """Every part's rows and the jobs they pay in one transaction, then each part's after-commit step.
    Returns how many vectors each part added."""
    async with contextlib.AsyncExitStack() as held:
        for part in parts:
            if part.around is not None:
                await held.enter_async_context(part.around())
        async with db.transaction() as connection:
            done = [await part.insert(connection) for part in parts]
            paid_ids = [job for part in parts for job in await pay_jobs(connection, part.target, part.rowids)]
        paid.add(paid_ids)
        for _, after in done:  # committed: now the cached copies may take them
            after()
    return [added for added, _ in done]


class PostgresVectorPuts:
    """`EmbeddingJobRepository.put_vectors` on PostgreSQL: each target's `PutPart` maker, one transaction."""

    def __init__(
        self, db: PostgresDatabase, paid: PaidJobs, makers: Mapping[str, Callable[[Vectors], PutPart]]
    ) -> None:
        self._db = db
        self._paid = paid
        self._makers = dict(makers)

    async def put(self, puts: Mapping[str, Vectors]) -> int:
        parts = put_parts(self._makers, puts)
        return sum(await run_puts(self._db, self._paid, parts)) if parts else 0
