"""`klaw reindex`: rebuild klaw.db from the conversation log, the source of truth.

The database is an index of the log. A damaged or lost klaw.db, a change in how rows are derived,
or a new embedder (vectors of different models never mix) is repaired by building a new database
from the log and swapping it in:

1. Refuse while an engine answers on engine.sock: it holds klaw.db open and keeps writing it.
2. Build into `<klaw.db>.reindex`; the live file is not touched until the end. The log is replayed
   day by day (`log_replay`) through the same `append_many` as live ingestion, so `messages`, FTS,
   segments, sessions, exchanges, saved memories and summaries come out of the same fold (no model
   is called: summaries are read from their records); every message `should_embed` picks
   gets its embedding job in the same transaction, as live. Records a `forget` tombstone names
   (`/forget`) are skipped, wherever the tombstone is in the log, so forgotten text never comes back.
3. Drain those jobs with the engine's own `EmbeddingQueue`. A job whose embedding fails stays in the
   new database (pending with backoff, or failed), is reported, and is retried by the engine.
4. Copy `settings` from the old database (commands set them; the log does not hold them), make the
   new file self-contained and swap it in; the old one is moved aside until the swap succeeded.

Resumable and idempotent: the new file carries a journal of the log files done (by size and
mtime), so a second run after an interruption skips them and drains the jobs still pending;
appends are idempotent on message id and jobs on rowid, so redoing a partly done day is harmless.
A partial build for another embedder than the configured one is discarded and started over.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from klaw.config import EngineConfig
from klaw.engine_presence import STOP_AN_ENGINE, engine_answers, held_message, holding_home
from klaw.errors import KlawError
from klaw.home import KlawHome
from klaw.home_lock import ENGINE_ROLE, HomeHeldError
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.embedder.factory import create_embedder
from klaw.memory.embedder.protocol import Embedder
from klaw.memory.embedding_policy import should_embed
from klaw.memory.embedding_queue import EmbeddingQueue, QueueClock
from klaw.memory.log_replay import LogDay, LogSource, file_source, kept_source
from klaw.private_files import open_private, private_dirs
from klaw.store.backend import rebuild_backend
from klaw.store.protocol import StorageError, StoreCounts
from klaw.store.rebuild_protocol import DoneFile, RebuildBackend, RebuildTarget
from klaw.store.records import MessageRecord

log = logging.getLogger(__name__)

APPEND_BATCH = 500  # records per transaction: large enough to be fast, small enough to resume often
LISTED_MALFORMED = 20  # malformed lines named in the report (all are counted)
_EMBEDDER_KEY = "embedder"
_RUN_OF = {"klaw reindex": "reindex"}  # what a refusal calls the interrupted work of the command refused


class ReindexStage(StrEnum):
    READ = "read"  # log files read (done, total)
    REBUILD = "rebuild"  # log lines turned into rows; malformed lines count as done (done, total)
    EMBED = "embed"  # messages embedded (done, done + still pending)
    SWAP = "swap"  # settings copied, file swapped in (timing only, no progress)


ReindexProgress = Callable[[ReindexStage, int, int], None]


class ReindexError(KlawError, RuntimeError):
    """Reindex cannot run; the message says why and what to do."""


class EngineRunningError(ReindexError):
    """An engine is serving the home; it must be stopped first."""


@dataclass(frozen=True)
class StageTiming:
    stage: ReindexStage
    seconds: float
    items: int

    @property
    def per_second(self) -> float:
        return self.items / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class ReindexReport:
    database: Path
    counts: StoreCounts
    log_files: int
    resumed_files: int  # files an interrupted run had already rebuilt
    records: int  # log records replayed by this run
    malformed: int  # malformed log lines skipped (all runs of this build)
    malformed_lines: tuple[tuple[Path, int, str], ...]  # the first LISTED_MALFORMED: file, line, reason
    embedded: int  # vectors stored by this run
    settings_copied: int
    backup: Path | None  # the old database, when kept
    warnings: tuple[str, ...]
    stages: tuple[StageTiming, ...]
    seconds: float

    @property
    def rows_per_second(self) -> float:
        return next((s.per_second for s in self.stages if s.stage is ReindexStage.REBUILD), 0.0)


async def reindex(
    home: KlawHome,
    config: EngineConfig,
    *,
    progress: ReindexProgress | None = None,
    embedder: Embedder | None = None,
    clock: QueueClock | None = None,
    keep_backup: bool = False,
    backend: RebuildBackend | None = None,
    command: str = "klaw reindex",
) -> ReindexReport:
    """Rebuild the database of `home` from its log, embed, and swap the result in.

    `embedder` defaults to the configured one (created and closed here), `backend` to the configured
    `database.backend`'s. An exception (including KeyboardInterrupt or cancellation) leaves the live
    database untouched and the partial build in place for the next run to resume. `command` is the
    one a person typed (`klaw db migrate` runs this too): a refusal says to run that one again."""
    began = time.perf_counter()
    live, database = home.database_file(config.database.path).resolve(), config.database  # a link's file (544)
    unfinished = lambda: _unfinished(backend or rebuild_backend(live, database))  # noqa: E731
    async with _holding(home, command, unfinished, database.backend, database.path):
        return await _reindex(home, config, live, began, progress, embedder, clock, keep_backup, backend, command)


async def _reindex(
    home: KlawHome,
    config: EngineConfig,
    live: Path,
    began: float,
    progress: ReindexProgress | None,
    embedder: Embedder | None,
    clock: QueueClock | None,
    keep_backup: bool,
    backend: RebuildBackend | None,
    command: str,
) -> ReindexReport:
    private_dirs(live.parent)
    with _exclusive(_beside(live, ".reindex.lock")):
        owned = embedder is None
        queue_clock = clock or _WallClock()
        active = embedder or create_embedder(config.embedder, sleep=queue_clock.sleep, cache_dir=home.embedder_cache)
        try:
            target = backend or rebuild_backend(live, config.database)
            kept = target.kept_log()
            build = _Build(
                home,
                live,
                target,
                kept_source(kept) if kept is not None else file_source(ConversationLog(home.conversations)),
                active,
                queue_clock,
                progress or _ignore,
                min_embed_tokens=config.auto_rag.min_message_tokens,
                batch_size=config.embedder.batch_size,
                command=command,
            )
            return await build.run(began, keep_backup=keep_backup)
        finally:
            if owned:
                await active.aclose()


@dataclass(eq=False)
class _Build:
    home: KlawHome
    live: Path
    backend: RebuildBackend
    source: LogSource
    embedder: Embedder
    clock: QueueClock
    notify: ReindexProgress
    _: KW_ONLY
    min_embed_tokens: int  # `autoRag.minMessageTokens`: which messages get a vector
    batch_size: int  # `embedder.batchSize`
    command: str  # the command a person typed, named when it is refused
    warnings: list[str] = field(default_factory=list, init=False)
    stages: list[StageTiming] = field(default_factory=list, init=False)
    # ids named by `forget` tombstones: never rebuilt
    forgotten: frozenset[str] = field(default=frozenset(), init=False)

    async def run(self, began: float, *, keep_backup: bool) -> ReindexReport:
        started = time.perf_counter()
        days = await asyncio.to_thread(self.source.scan)
        self.forgotten = await asyncio.to_thread(self.source.forgotten)
        build = await self._open(days)
        try:
            journal = build.journal
            files, resumed, records = await self._rebuild(build, days)
            self.stages.append(StageTiming(ReindexStage.REBUILD, time.perf_counter() - started, records))
            started = time.perf_counter()
            embedded = await self._embed(build)
            self.stages.append(StageTiming(ReindexStage.EMBED, time.perf_counter() - started, embedded))
            started = time.perf_counter()
            await _refuse_if_engine_runs(self.home, self.command)
            settings = await self._copy_settings(build)
            counts = await build.store.counts()
            skipped = await journal.skipped()
            await journal.drop()
            await build.finish()
        finally:
            await build.aclose()
        backup = await asyncio.to_thread(lambda: self.backend.swap_into_place(keep_backup=keep_backup))
        self.stages.append(StageTiming(ReindexStage.SWAP, time.perf_counter() - started, 0))
        listed = tuple((self.home.conversations / key, line, reason) for key, line, reason in skipped)
        return ReindexReport(
            database=self.live,
            counts=counts,
            log_files=files,
            resumed_files=resumed,
            records=records,
            malformed=len(skipped),
            malformed_lines=listed[:LISTED_MALFORMED],
            embedded=embedded,
            settings_copied=settings,
            backup=backup,
            warnings=tuple(self.warnings),
            stages=tuple(self.stages),
            seconds=time.perf_counter() - began,
        )

    async def _open(self, days: Sequence[LogDay]) -> RebuildTarget:
        """The build: resumed if it was started for the same embedder and no log file it rebuilt
        has since shrunk or gone (a log edited by hand), else made anew."""
        wanted = f"{self.embedder.model_id}:{self.embedder.dim}"
        if self.backend.exists():
            build = await self.backend.open(self.clock.now, resume=True)
            if build is not None:
                await build.journal.create()
                journal = build.journal
                if await journal.get(_EMBEDDER_KEY) == wanted and not _log_rewritten(days, await journal.done_files()):
                    await self._bind(build)
                    return build
                await build.aclose()
            self.warnings.append(
                f"started over: the unfinished build at {self.backend.location} was for another embedder,"
                " unreadable, or older than log files edited since"
            )
            await asyncio.to_thread(self.backend.discard)
        build = await self.backend.open(self.clock.now, resume=False)
        assert build is not None
        await build.journal.create()
        await self._bind(build)
        await build.journal.set(_EMBEDDER_KEY, wanted)
        return build

    async def _bind(self, build: RebuildTarget) -> None:
        for index in (build.store.vectors, build.store.memory_chunks, build.store.summaries):
            await index.bind_embedder(self.embedder.model_id, self.embedder.dim)

    async def _rebuild(self, build: RebuildTarget, days: Sequence[LogDay]) -> tuple[int, int, int]:
        """Replay the log day by day; returns (log files, files skipped as done, records replayed)."""
        done = await build.journal.done_files()
        files_total = sum(len(day.files) for day in days)
        lines_total = sum(day.lines for day in days)
        files_done = lines_done = resumed = records = 0
        self.notify(ReindexStage.READ, 0, files_total)
        self.notify(ReindexStage.REBUILD, 0, lines_total)
        for day in days:
            if _already_done(day, done):
                resumed += len(day.files)
            else:
                records += await self._replay_day(build, day, lines_done, lines_total)
            files_done += len(day.files)
            lines_done += day.lines
            self.notify(ReindexStage.READ, files_done, files_total)
            self.notify(ReindexStage.REBUILD, lines_done, lines_total)
        return files_total, resumed, records

    async def _replay_day(self, build: RebuildTarget, day: LogDay, lines_before: int, lines_total: int) -> int:
        """Append one day's records in batches, then mark its files done; returns the records."""
        read = await asyncio.to_thread(self.source.read, day)
        records = [record for record in read.records if record.id not in self.forgotten]
        lines = len(read.skipped) + len(read.records) - len(records)
        for batch in _batches(records, APPEND_BATCH):
            await self._append(build, batch)
            lines += len(batch)
            self.notify(ReindexStage.REBUILD, lines_before + lines, lines_total)
        keys = {f.path: f.key for f in day.files}
        await build.journal.mark_done(
            [DoneFile(f.key, f.size, f.mtime_ns, f.lines) for f in day.files],
            [(keys[path], line, reason) for path, line, reason in read.skipped],
        )
        return len(records)

    async def _append(self, build: RebuildTarget, batch: Sequence[MessageRecord]) -> None:
        minimum = self.min_embed_tokens
        await build.store.messages.append_many(batch, embed=[should_embed(record, minimum) for record in batch])

    async def _embed(self, build: RebuildTarget) -> int:
        pending = (await build.store.embedding_jobs.counts()).pending
        self.notify(ReindexStage.EMBED, 0, pending)
        queue = EmbeddingQueue(build.store, self.embedder, self.clock, batch_size=self.batch_size)
        return await queue.run_until_idle(lambda done, total: self.notify(ReindexStage.EMBED, done, total))

    async def _copy_settings(self, build: RebuildTarget) -> int:
        try:
            return await build.copy_settings()
        except StorageError as exc:
            cause = type(exc.__cause__ or exc).__name__
            self.warnings.append(f"settings not copied from {self.live} ({cause}): set them again")
            return 0


class _WallClock:
    """The queue's clock when none is given (memory does not import engine's SystemClock)."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _ignore(_stage: ReindexStage, _done: int, _total: int) -> None:
    return None


@contextlib.asynccontextmanager
async def _holding(home: KlawHome, command: str, unfinished: Callable[[], bool], *where: str) -> AsyncIterator[None]:
    """The home (and a SQLite file outside it, `where`: 536) held for the run: no engine starts while the database
    is rebuilt and swapped. A refusal says a reindex resumes only when one was interrupted (`unfinished`)."""
    try:
        async with holding_home(home, command, *where):
            yield
    except HomeHeldError as exc:
        if exc.holder.role not in ("", ENGINE_ROLE):
            raise ReindexError(held_message(home, exc.holder)) from None
        resumes = f" The interrupted {_RUN_OF.get(command, 'run')} resumes where it stopped." if unfinished() else ""
        raise EngineRunningError(f"{held_message(home, exc.holder)}; then run '{command}' again.{resumes}") from None


def _unfinished(backend: RebuildBackend) -> bool:
    """Whether an interrupted reindex left its build (PostgreSQL: a server away says nothing of it)."""
    try:
        return backend.exists()
    except StorageError:
        return False


async def _refuse_if_engine_runs(home: KlawHome, command: str) -> None:
    """Before the swap: an engine of a klaw from before the home lock may have started meanwhile."""
    if await engine_answers(home.socket_path):
        raise EngineRunningError(
            f"a klaw engine is running on {home.socket_path}: {STOP_AN_ENGINE}; then run '{command}'"
            f" again. An interrupted {_RUN_OF.get(command, 'run')} resumes where it stopped."
        )


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """One reindex per database at a time (an advisory lock on a file beside it)."""
    descriptor = open_private(lock_path, os.O_RDWR)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ReindexError(f"another 'klaw reindex' is already running ({lock_path} is locked)") from None
        try:
            yield
        finally:
            lock_path.unlink(missing_ok=True)
    finally:
        os.close(descriptor)


def _log_rewritten(days: Sequence[LogDay], done: dict[str, DoneFile]) -> bool:
    """A file the build already holds rows of has shrunk or vanished: those rows may be stale.
    (A file that grew is fine: it is read again, and its known records are skipped by id.)"""
    sizes = {f.key: f.size for day in days for f in day.files}
    return any(sizes.get(key, -1) < previous.size for key, previous in done.items())


def _already_done(day: LogDay, done: dict[str, DoneFile]) -> bool:
    for log_file in day.files:
        previous = done.get(log_file.key)
        if previous is None or (previous.size, previous.mtime_ns) != (log_file.size, log_file.mtime_ns):
            return False
    return True


def _batches(records: Sequence[MessageRecord], size: int) -> Iterator[Sequence[MessageRecord]]:
    for start in range(0, len(records), size):
        yield records[start : start + size]


def _beside(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)
