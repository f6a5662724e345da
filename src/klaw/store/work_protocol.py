"""The work engines hand each other through the store: the durable embedding queue and chat leases.

Apart from the repositories of what is remembered (klaw/store/protocol.py) because these are about who
does what, and when: a job claimed by one engine's worker, a chat served by one engine at a time on a
store several engines share (docs/decisions/170-chat-leases.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol, TypeVar

from klaw.store.errors import StorageError
from klaw.store.records import ChatRef, ClaimedJob, EmbeddingJob, EmbeddingJobCounts, TargetJobCounts

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors = Sequence[tuple[int, npt.NDArray[np.float32]]]


class EmbeddingJobRepository(Protocol):
    """The durable embedding queue (`embedding_jobs`): a row per thing to embed until it is embedded.

    Completed jobs are deleted; pending ones wait for `next_attempt_at`; failed ones stay, counted,
    until `retry_failed`. Times come from the store's clock."""

    async def due(self, now: datetime, limit: int) -> list[EmbeddingJob]:
        """Pending jobs whose next attempt is at or before `now`, oldest first."""
        ...

    async def claim(self, now: datetime, limit: int, hold: timedelta) -> list[EmbeddingJob]:
        """`due`, taken for the embedding worker: on a store several engines share, the jobs are postponed
        by `hold` so no other engine takes them meanwhile (due again after `hold` if this one dies)."""
        ...

    async def claim_texts(self, now: datetime, limit: int, hold: timedelta) -> list[ClaimedJob]:
        """`claim`, each job with its target's text read in the same call (None: the target row is gone
        or wants no vector now): the embedding queue's one trip to the store before it embeds a batch."""
        ...

    async def next_due_at(self) -> datetime | None:
        """When the earliest pending job is due (None when nothing is pending)."""
        ...

    async def complete(self, job_ids: Sequence[int]) -> None: ...

    async def put_vectors(self, puts: Mapping[str, Sequence[tuple[int, npt.NDArray[np.float32]]]]) -> int:
        """The vectors of several job targets (`message`, `summary`, `memory`: target -> (rowid, vector))
        stored in one transaction, each target as its own repository's put stores it and paying the jobs
        they were owed for; returns how many were new. `StorageError` for a target without a vector table.
        The embedding queue's one call for a batch embedded together (decision 471)."""
        ...

    async def retry(self, job_id: int, error: str, next_attempt_at: datetime) -> None:
        """Count a failed attempt and try again at `next_attempt_at`."""
        ...

    async def fail(self, job_id: int, error: str) -> None:
        """Count a failed attempt and give up: the job stays, `failed`, until `retry_failed`."""
        ...

    async def counts(self) -> EmbeddingJobCounts: ...

    async def by_target(self) -> list[TargetJobCounts]:
        """Pending and failed jobs per target that has any, with the newest failure's error."""
        ...

    async def retry_failed(self) -> int:
        """Make every failed job pending again, due now, attempts reset; returns how many."""
        ...

    async def enqueue_messages(self, rowids: Sequence[int]) -> int:
        """Queue the messages with these rowids (unknown rowids are skipped; a failed job is made
        pending again, a pending one is left alone); returns how many jobs were added or revived."""
        ...


class ChatLeaseRepository(Protocol):
    """Which engine serves each chat's turns, on a store several engines share (docs/decisions/170-chat-leases.md).
    `holder` names one engine process; lease times are the store's own clock, never an engine's."""

    async def acquire(self, chat: ChatRef, holder: str, seconds: float) -> int | None:
        """Take or extend the chat's lease for `seconds`: its new generation, which a turn's writes are
        fenced by (store/lease_fence.py); None while another holder's is still valid."""
        ...

    async def renew(self, chats: Sequence[ChatRef], holder: str, seconds: float) -> set[ChatRef]:
        """Extend `holder`'s leases among `chats`; returns the chats it no longer holds."""
        ...

    async def release(self, chat: ChatRef, holder: str) -> None: ...

    async def join(
        self, holder: str, embedder: tuple[str, int], seconds: float, home: tuple[str, str] | None = None
    ) -> str:
        """Note `holder` running with `embedder` (model id, dim) for `seconds`, renewed by `keep`, ended by
        `release_all`; `IndexMismatchError` while another live engine embeds with another one (decision 532).
        `home` (id, place): `StorageError` while a live engine of the same home runs from another place; a
        warning returned when the home last started from another place (decision 539), else empty."""
        ...

    async def keep(self, holder: str, seconds: float) -> bool:
        """Renew `holder`'s record; True when it had been dropped (a stall past its lease) and is restored;
        `IndexMismatchError` when another embedder took the database meanwhile (decision 541)."""
        ...

    async def forgotten_after(self, chat: ChatRef, rowid: int) -> bool:
        """Whether a forget (`/forget`, `klaw memory forget`, on any engine) was stored in the chat after
        the message whose row is `rowid`: a turn answering that message must not go on (decision 286)."""
        ...

    async def release_all(self, holder: str) -> None: ...

    async def unserved(self, since: datetime, until: datetime, holder: str) -> list[ChatRef]:
        """Chats with a person's message created between `since` and `until` that no exchange answered,
        and no other holder's valid lease: what a dead engine left to answer."""
        ...


Part = TypeVar("Part")


def put_parts(makers: Mapping[str, Callable[[Vectors], Part]], puts: Mapping[str, Vectors]) -> list[Part]:
    """`EmbeddingJobRepository.put_vectors`' parts on either backend: each target's vectors made into its part by
    the target's maker (none for a target with nothing to put); a target no maker knows is refused whole."""
    unknown = sorted(set(puts) - set(makers))
    if unknown:
        raise StorageError(f"no vector table for embedding job target(s) {', '.join(map(repr, unknown))}")
    return [makers[target](vectors) for target, vectors in puts.items() if vectors]
