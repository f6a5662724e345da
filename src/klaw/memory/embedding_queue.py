"""The durable embedding queue's worker: `embedding_jobs` rows in, vectors out, never blocking a reply.

Jobs name a target (`message`, `memory`, `summary`) that says where texts come from and vectors go.
A message that should be embedded gets its job row in the same transaction as the message itself
(`MessageRepository.append(..., embed=True)`), so the work owed survives any crash. This worker
takes due jobs in batches of the embedder's batch size (at most 100) with their texts (one call to
the store, `claim_texts`: decision 272), embeds them, stores the vectors and deletes the jobs. A
failed batch is tried again after 1, 2, 4, 8, 16 and 32 s; when the 32 s retry fails too, its jobs
are marked failed: kept, counted in `/status`, and made pending again by `retry_failed`. An
embedder that cannot run here at all (a package not installed) fails its jobs at once: waiting
installs nothing. A job whose text is gone (message deleted) is simply dropped.

One text can sink a whole batch: a remote endpoint answers HTTP 400 to the request when any input is
over its model's length (a pasted document), and the other 99 texts would share its fate, retried
and finally failed with it. So a batch the endpoint rejected as a request (400, 413, 422) is halved
until the text at fault is alone: the others get their vectors at once, for at most 2·log2(batch)
extra calls per bad text, and only the bad one backs off. An outage, a wrong key or a rate limit
fails any batch, so those are not split.

Time passes only through the injected clock, so tests advance a `ManualClock` instead of sleeping. Logs name
the error (its class, and the reason for klaw's own errors, which never quote content), counts, never texts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from klaw.disk_trouble import damaged_database, damaged_words
from klaw.llm.errors import LlmBadRequestError, LlmError
from klaw.memory.background_task import rest, stop_task
from klaw.memory.embedder.model_thread import in_background
from klaw.memory.embedder.protocol import Embedder, EmbedderError, EmbedderUnavailable
from klaw.store.protocol import Storage, StorageError
from klaw.store.records import MEMORY_TARGET, MESSAGE_TARGET, EmbeddingJob
from klaw.store.summaries.records import SUMMARY_TARGET

if TYPE_CHECKING:  # vector types only: importing the engine loads no numpy until a vector is touched (520)
    import numpy as np
    import numpy.typing as npt

log = logging.getLogger(__name__)

# Waits before the 1st … 6th retry of a failed job; a failure after the last one marks it failed.
BACKOFF_SECONDS = (1, 2, 4, 8, 16, 32)
# No embedding call carries more texts than this, whatever `embedder.batchSize` says: the limit of
# common embedding APIs, and a bound on how much one failed call puts back.
MAX_TEXTS_PER_CALL = 100
STORE_ERROR_PAUSE_SECONDS = 5.0  # the worker's wait after the store itself failed (not an embedding)
_MAX_REASON_CHARS = 200
# A batch claimed on a shared store is theirs for this long (due again after it if the engine dies mid-batch).
CLAIM_HOLD = timedelta(minutes=2)
# A pass woken by a new job first waits 10 ms, so that the turn that job's message starts is under way and
# counted (it then waits for that turn's end, `between_turns`): the message and its reply go in one pass
# (decision 426: 196 of 200 turns, one yield 183). This timer once exposed a cancellation psycopg_pool's wait
# for a connection lost at Ctrl-C (the stop hung); that loss is repaired where it happens (decision 428).
SETTLE_SECONDS = 0.01
# HTTP statuses by which an endpoint refuses a request for what it carries (too long, too large, unprocessable),
# not for who asks or where: a batch without the offending text would pass.
INPUT_REJECTED_STATUSES = frozenset({400, 413, 422})
# Exceptions whose messages are content-free by contract (they name endpoints, shapes, statuses).
_DESCRIBED_ERRORS = (EmbedderError, LlmError, StorageError)


class QueueClock(Protocol):
    """What the queue needs of `klaw.engine.clock.Clock` (declared here: memory does not import engine)."""

    def now(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...


class EmbeddingTarget(Protocol):
    """Where the vectors of one job target go (their texts come with the claim: `claim_texts`)."""

    async def put(self, vectors: Sequence[tuple[int, npt.NDArray[np.float32]]]) -> int:
        """Store vectors by rowid; existing ones are kept (a re-run is harmless)."""
        ...

    async def ready(self) -> None:
        """Whatever must be done once before the store's joint put takes this target's vectors."""
        ...


class MessageTarget:
    """Jobs on `messages` rows: text from `messages.content`, vectors into `vec_messages`."""

    def __init__(self, store: Storage) -> None:
        self._store = store

    async def put(self, vectors: Sequence[tuple[int, npt.NDArray[np.float32]]]) -> int:
        return await self._store.vectors.put(vectors)

    async def ready(self) -> None:  # `vec_messages` is bound by the engine at start
        return None


class MemoryTarget:
    """Jobs on `memory_chunks` rows (archival memory): text from the chunk, vectors into `vec_memory`,
    which is bound to the queue's embedder before the first vectors go in."""

    def __init__(self, store: Storage, embedder: Embedder) -> None:
        self._store = store
        self._embedder = embedder
        self._bound = False

    async def put(self, vectors: Sequence[tuple[int, npt.NDArray[np.float32]]]) -> int:
        await self.ready()
        return await self._store.memory_chunks.put(vectors)

    async def ready(self) -> None:
        if not self._bound:
            await self._store.memory_chunks.bind_embedder(self._embedder.model_id, self._embedder.dim)
            self._bound = True


class SummaryTarget:
    """Jobs on `summaries` rows: exchange summaries and final segment summaries, into `vec_summaries`
    (bound by the engine at start, like `vec_messages`). A batch's vectors go in in one transaction."""

    def __init__(self, store: Storage) -> None:
        self._store = store

    async def put(self, vectors: Sequence[tuple[int, npt.NDArray[np.float32]]]) -> int:
        return await self._store.summaries.put_vectors(vectors)

    async def ready(self) -> None:  # `vec_summaries` is bound by the engine at start
        return None


def default_targets(store: Storage, embedder: Embedder) -> dict[str, EmbeddingTarget]:
    """Every job target the store queues: messages, archival memories and summaries."""
    return {
        MESSAGE_TARGET: MessageTarget(store),
        MEMORY_TARGET: MemoryTarget(store, embedder),
        SUMMARY_TARGET: SummaryTarget(store),
    }


@dataclass(frozen=True)
class EmbeddingQueueStatus:
    pending: int
    failed: int
    embedded: int  # by this queue since it was created
    running: bool  # the background worker is started and alive
    # why the last embedding call failed (`describe_error`), until a call succeeds: `/status` says it, so
    # a person whose vectors are not being made (an embedder that cannot load) sees why without the log
    last_error: str | None = None


def describe_error(exc: BaseException) -> str:
    """An error class and short reason for `last_error`; the reason only from klaw's own error
    families, whose messages never quote content (a foreign exception's text might)."""
    name = type(exc).__name__
    if not isinstance(exc, _DESCRIBED_ERRORS):
        return name
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if len(reason) > _MAX_REASON_CHARS:
        reason = reason[: _MAX_REASON_CHARS - 1] + "…"
    return f"{name}: {reason}" if reason else name


class EmbeddingQueue:
    def __init__(
        self,
        store: Storage,
        embedder: Embedder,
        clock: QueueClock,
        *,
        batch_size: int,
        targets: Mapping[str, EmbeddingTarget] | None = None,
        between_turns: Callable[[], Awaitable[bool]] | None = None,
    ) -> None:
        """`between_turns`: awaited before each batch of the worker, returning True when no turn is in
        flight, False after a bound (the engine's `TurnGate.quiet`, decision 426); None: batches start at once."""
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self._store = store
        self._embedder = embedder
        self._clock = clock
        self._batch_size = min(batch_size, MAX_TEXTS_PER_CALL)
        self._targets: dict[str, EmbeddingTarget] = dict(targets or default_targets(store, embedder))
        self._joint = targets is None  # the store's targets: several in one call (decision 471); given ones alone
        self._wake = asyncio.Event()
        self._batch_lock = asyncio.Lock()  # the worker and run_until_idle never take the same jobs
        self._worker: asyncio.Task[None] | None = None
        self._embedded = 0
        self._idle = asyncio.Condition()  # notified whenever the worker has caught up
        self._caught_up = False
        self._stopped: str | None = None  # why the worker stopped for good (decision 326)
        self._last_error: str | None = None
        self._between_turns = between_turns

    def start(self) -> None:
        """Start the background worker (once, never after `stop_for_good`); it first embeds what a run left pending."""
        if self._worker is None and self._stopped is None:
            self._wake.set()
            self._worker = asyncio.create_task(self._run(), name="klaw-embedding-queue")

    def notify(self) -> None:
        """A job was just queued: wake the worker now instead of at its next planned time."""
        self._wake.set()

    async def run_until_idle(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Embed every job due now, batch by batch, until none is due; returns how many were embedded. Jobs that
        fail are rescheduled (not waited for). `progress(embedded, embedded + pending)` is called after each batch."""
        embedded = 0
        while (batch := await self._run_batch()) is not None:
            embedded += batch
            if progress is not None:
                pending = (await self._store.embedding_jobs.counts()).pending
                progress(embedded, embedded + pending)
        return embedded

    async def wait_idle(self) -> None:
        """Until the worker has handled every job due and waits for more (at once if it is not running).

        For tests and tools that need the vectors now; the engine itself never waits for them."""
        while self._running() and self._stopped is None:
            async with self._idle:
                await self._idle.wait_for(lambda: not self._running() or (self._caught_up and not self._wake.is_set()))
            if self._stopped is not None:
                return  # it stopped for good (a damaged database): nothing more will be embedded
            next_due = await self._store.embedding_jobs.next_due_at()
            if next_due is None or next_due > self._clock.now():
                return
            # Due now although the worker rests: it planned its sleep just before the clock moved
            # (a test's manual clock jumps); wake it and wait for that pass too.
            self.notify()

    def _running(self) -> bool:
        return self._worker is not None and not self._worker.done()

    async def status(self) -> EmbeddingQueueStatus:
        counts = await self._store.embedding_jobs.counts()
        return EmbeddingQueueStatus(counts.pending, counts.failed, self._embedded, self._running(), self._last_error)

    async def aclose(self) -> None:
        """Stop the worker. A batch in flight is abandoned: its jobs stay pending for the next start."""
        worker, self._worker = self._worker, None
        if worker is None:
            return
        await stop_task(worker, "embedding queue worker")
        async with self._idle:
            self._idle.notify_all()  # nobody waits for a worker that is gone

    async def stop_for_good(self, reason: str) -> None:
        """Stop the worker, never to start again here (`/embeddings on` neither); `/status` says `reason` (541)."""
        self._stopped = self._last_error = reason
        await self.aclose()

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            pause: float | None
            try:
                await self._drain()
                next_due = await self._store.embedding_jobs.next_due_at()
                pause = None if next_due is None else max(0.0, (next_due - self._clock.now()).total_seconds())
            except Exception as exc:  # the store failed: keep the worker alive and try again later
                if (reason := damaged_database(exc)) is not None:  # final: said once, not retried (decision 326)
                    self._stopped = damaged_words("embedding queue", reason)
                    log.error("%s", self._stopped)
                    async with self._idle:
                        self._caught_up = True  # nobody waits for a worker that is gone
                        self._idle.notify_all()
                    return
                log.warning(
                    "embedding queue: %s; trying again in %.0f s", type(exc).__name__, STORE_ERROR_PAUSE_SECONDS
                )
                pause = STORE_ERROR_PAUSE_SECONDS
            if pause == 0.0:
                continue  # due already (time moved while embedding): not caught up, go again
            async with self._idle:
                self._caught_up = True
                self._idle.notify_all()
            try:
                await rest(self._wake, self._clock.sleep, pause)
            finally:
                self._caught_up = False

    async def _drain(self) -> None:
        """Every due job, batch by batch, each started between turns: its claim, embedding and write share the
        threads and the GIL with the turns a person waits for (~5 ms of a 30 ms turn at 1k messages, decision 425),
        and a turn's message and reply go in one batch. Once a wait reached its bound (many busy chats), the rest
        is drained without waiting, so vectors come late by about that bound, never later."""
        if self._between_turns is None:
            while await self._run_batch() is not None:
                pass
            return
        await asyncio.sleep(SETTLE_SECONDS)  # the turn a new message starts gets under way first
        waited_out = False
        while True:
            if not waited_out:
                waited_out = not await self._between_turns()
            if await self._run_batch() is None:
                return

    async def _run_batch(self) -> int | None:
        """Handle one batch of due jobs; returns how many were embedded, None when none was due."""
        async with self._batch_lock:
            # The texts come with the claim: one trip to the store before the batch is embedded (decision 272).
            claimed = await self._store.embedding_jobs.claim_texts(self._clock.now(), self._batch_size, CLAIM_HOLD)
            if not claimed:
                return None
            for item in claimed:
                if (target := item.job.target) not in self._targets:
                    log.warning("embedding queue: a job for unknown target %r marked failed", target)
                    await self._store.embedding_jobs.fail(item.job.id, f"UnknownTarget: {target!r}")
            known = [item for item in claimed if item.job.target in self._targets]
            gone = [item.job.id for item in known if item.text is None]
            if gone:
                await self._store.embedding_jobs.complete(gone)  # nothing left to embed
            texts = {item.job.id: item.text for item in known if item.text is not None}
            live = [item.job for item in known if item.text is not None]
            embedded = await self._embed_texts(live, texts) if live else 0
            self._embedded += embedded
            return embedded

    async def _embed_texts(self, jobs: list[EmbeddingJob], texts: Mapping[int, str]) -> int:
        """Embed `jobs` of any targets in one call and store their vectors; a batch whose request the
        endpoint rejected is halved (see the module docstring), anything else reschedules the whole batch."""
        try:
            # a live engine's batch goes after its turns' queries, a text at a time (decision 508); a reindex's not
            with in_background() if self._between_turns is not None else contextlib.nullcontext():
                vectors = await self._embedder.embed([texts[job.id] for job in jobs])
            if vectors.shape[0] != len(jobs):
                raise EmbedderError(f"the embedder returned {vectors.shape[0]} vectors for {len(jobs)} texts")
        except Exception as exc:
            if len(jobs) > 1 and rejects_the_input(exc):
                middle = len(jobs) // 2
                first = await self._embed_texts(jobs[:middle], texts)
                return first + await self._embed_texts(jobs[middle:], texts)
            await self._reschedule(jobs, exc)
            return 0
        groups: dict[str, list[tuple[EmbeddingJob, npt.NDArray[np.float32]]]] = {}
        for i, job in enumerate(jobs):
            groups.setdefault(job.target, []).append((job, vectors[i]))
        if len(groups) > 1 and self._joint:
            try:  # every target's vectors in one call to the store, one transaction (decision 471)
                for target in groups:
                    await self._targets[target].ready()
                await self._store.embedding_jobs.put_vectors(
                    {target: [(job.target_rowid, vector) for job, vector in group] for target, group in groups.items()}
                )
            except Exception as exc:  # one target's trouble must not sink the others': each alone, as before
                log.info("embedding queue: a joint put failed (%s); storing each target alone", describe_error(exc))
            else:
                return await self._completed(jobs)
        stored = 0
        for target, group in groups.items():
            try:
                await self._targets[target].put([(job.target_rowid, vector) for job, vector in group])
            except Exception as exc:
                await self._reschedule([job for job, _ in group], exc)
                continue
            stored += await self._completed([job for job, _ in group])
        return stored

    async def _completed(self, jobs: list[EmbeddingJob]) -> int:
        await self._store.embedding_jobs.complete([job.id for job in jobs])
        self._last_error = None
        return len(jobs)

    async def _reschedule(self, jobs: list[EmbeddingJob], exc: Exception) -> None:
        """Back off each job by its attempt count, or mark it failed after the last step; at once when
        the embedder cannot run here at all (`EmbedderUnavailable`: no wait would install a package)."""
        error = self._last_error = describe_error(exc)
        now = self._clock.now()
        final = isinstance(exc, EmbedderUnavailable)
        failed = 0
        for job in jobs:
            attempt = job.attempts + 1
            if attempt <= len(BACKOFF_SECONDS) and not final:
                retry_at = now + timedelta(seconds=BACKOFF_SECONDS[attempt - 1])
                await self._store.embedding_jobs.retry(job.id, error, retry_at)
            else:
                await self._store.embedding_jobs.fail(job.id, error)
                failed += 1
        # The reason, not the class alone: it names the fix, and klaw's error families never quote content.
        log.warning(
            "embedding %d item(s) failed (%s): %d will be retried, %d marked failed",
            len(jobs),
            error,
            len(jobs) - failed,
            failed,
        )


def rejects_the_input(exc: BaseException) -> bool:
    """Whether an embedding call failed because the endpoint refused what the request carried
    (`INPUT_REJECTED_STATUSES`), which a smaller batch might not: the embedder's error is caused by
    the HTTP client's `LlmBadRequestError`."""
    cause = exc if isinstance(exc, LlmBadRequestError) else exc.__cause__
    return isinstance(cause, LlmBadRequestError) and cause.status in INPUT_REJECTED_STATUSES
