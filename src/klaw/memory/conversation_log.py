"""The conversation log: append-only JSONL per chat and day, the source of truth.

`conversations/<channel>_<chat_id>/<YYYY-MM-DD>.jsonl` (UTC date of the message). A message counts
as accepted only once its line is written and fsync'd; an append that fails (a full disk) is cut
back to where it started. A crash can leave a torn last line; the
next append starts a fresh line so the torn one stays isolated (and is skipped with a warning
when read) instead of swallowing the new record. Reading skips malformed lines with a warning
naming the file and line number, never the content, and goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, TypeVar

from klaw.atomic_file import append_whole, fsync_dir
from klaw.bounded_lines import numbered_lines
from klaw.memory.log_rewrite import DAY, holds_lines, record_line, remove_lines
from klaw.private_files import open_private, private_dirs
from klaw.scheduling.names import is_task_log_dir
from klaw.store.log_format import MAX_RECORD_BYTES, TOO_LONG, MalformedLine, decode_record, encode_record
from klaw.store.records import ChatRef, MessageRecord

log = logging.getLogger(__name__)
T = TypeVar("T")
_CHAT_DIRS_KEPT = 4096
WRONG_FOLDER = "its channel and chat_id are another chat's than its folder's (moved or edited by hand?)"
WRONG_CHAT = "its channel and chat_id are another chat's than its row's chat column (edited by hand?)"


@dataclass
class ReadReport:
    """What reading log files produced: the records, and where lines were skipped."""

    records: list[MessageRecord] = field(default_factory=list)
    skipped: list[tuple[Path, int, str]] = field(default_factory=list)  # (file, line number, reason)


@dataclass(eq=False)
class LogWrite:
    """Lines to append to log files, run on a worker thread (blocking: write and fsync each file);
    `done` once every line is durable, so a caller whose next step failed knows the log has them."""

    lines: dict[Path, list[str]] = field(default_factory=dict)
    done: bool = False

    def __call__(self) -> None:
        for path, lines in self.lines.items():
            _append_lines(path, lines)
        self.done = True


class ConversationLog:
    def __init__(self, root: Path) -> None:
        self.root = root
        self._locks: dict[str, asyncio.Lock] = {}
        # A chat's directory, built once: quoting its id and joining paths took ~2 % of the event
        # loop with many chats talking at once (three appends a turn).
        self._chat_dirs: dict[ChatRef, Path] = {}
        self._files: dict[tuple[ChatRef, date], Path] = {}

    def chat_dir(self, chat: ChatRef) -> Path:
        directory = self._chat_dirs.get(chat)
        if directory is None:
            if len(self._chat_dirs) >= _CHAT_DIRS_KEPT:
                self._chat_dirs.clear()
            directory = self._chat_dirs[chat] = self.root / chat.log_dir_name
        return directory

    def file_for(self, record: MessageRecord) -> Path:
        """The chat's file of the record's UTC day, kept once made: joining the path cost more than
        encoding the line (decision 254)."""
        key = (record.chat, record.created_at.date())
        path = self._files.get(key)
        if path is None:
            if len(self._files) >= _CHAT_DIRS_KEPT:
                self._files.clear()
            path = self._files[key] = self.chat_dir(record.chat) / f"{key[1].isoformat()}.jsonl"
        return path

    async def append(self, record: MessageRecord) -> None:
        """Write and fsync one record; returns once it is durable."""
        await self.append_many([record])

    async def append_many(self, records: Sequence[MessageRecord]) -> None:
        """Write records in order, one fsync per file touched (for bulk imports)."""
        async with self.appending(records) as write:
            if write is not None:
                await _on_log_threads(write)

    @contextlib.asynccontextmanager
    async def appending(self, records: Sequence[MessageRecord]) -> AsyncIterator[LogWrite | None]:
        """The write of `records` (encoded now) for the caller to run on a thread of its choice, while
        the chats' append locks are held (a `/forget` rewriting their files waits); None: nothing to
        write (no records, or a store that keeps the log). Ingestion hands it to the store, which
        runs it on its own thread just before the rows' transaction: one hop for both."""
        if not records:
            yield None
            return
        write = LogWrite()
        for record in records:
            write.lines.setdefault(self.file_for(record), []).append(encode_record(record))
        async with contextlib.AsyncExitStack() as locks:
            for name in sorted({path.parent.name for path in write.lines}):
                await locks.enter_async_context(self._lock(name))
            yield write

    async def remove_records(
        self, chat: ChatRef, ids: Collection[str], days: Iterable[str] | None = None
    ) -> list[Path]:
        """Rewrite the chat's files of `days` (UTC dates; None: all its files) without the records `ids`,
        each atomically and under the chat's append lock, so no append is lost. The one exception to
        append-only: `/forget` (memory/log_rewrite.py). Returns the files rewritten."""
        directory = self.chat_dir(chat)
        paths = self._day_files(directory, days)
        wanted = frozenset(ids)
        rewritten: list[Path] = []
        async with self._lock(directory.name):
            for path in paths:
                if await _on_log_threads(remove_lines, path, wanted):
                    rewritten.append(path)
        return rewritten

    async def holds_records(self, chat: ChatRef, ids: Collection[str], days: Iterable[str] | None = None) -> bool:
        """Whether the chat's files of `days` (None: all) still hold a line of the records `ids` (read only):
        what `remove_records` would rewrite (decision 468)."""
        paths = self._day_files(self.chat_dir(chat), days)
        wanted = frozenset(ids)
        for path in paths:
            if await _on_log_threads(holds_lines, path, wanted):
                return True
        return False

    def _day_files(self, directory: Path, days: Iterable[str] | None) -> list[Path]:
        """The chat's files of `days` (UTC dates, each checked as one; None: all its files)."""
        if days is None:
            return self.files(directory)
        return [directory / f"{day}.jsonl" for day in sorted(set(days)) if DAY.match(day)]

    async def find_record(self, record_id: str) -> MessageRecord | None:
        """The record `record_id` wherever a chat's files hold it, newest files first; None when none does.
        Reads every file in the worst case: only for a forget's tombstone the database lacks (decision 468)."""
        for directory in self.chat_dirs():
            for path in reversed(self.files(directory)):
                raw = await _on_log_threads(record_line, path, record_id)
                if raw is not None:
                    try:
                        return decode_record(raw.decode("utf-8"))
                    except (UnicodeDecodeError, MalformedLine):
                        return None
        return None

    def chat_dirs(self) -> list[Path]:
        """The chats' directories, by name. Scheduled tasks' run logs (`scheduler_<task>`) are not
        chats: recovery and reindexing, which read these, must never turn runs into chat messages."""
        return [p for p in self._dirs() if not is_task_log_dir(p.name)]

    def task_dirs(self) -> list[Path]:
        """The scheduled tasks' run logs (`scheduler_<task>`), by name."""
        return [p for p in self._dirs() if is_task_log_dir(p.name)]

    def _dirs(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir() if p.is_dir())

    @staticmethod
    def files(chat_dir: Path) -> list[Path]:
        """The chat's log files, oldest first (file names are dates)."""
        return sorted(chat_dir.glob("*.jsonl")) if chat_dir.is_dir() else []

    async def read(self, paths: Sequence[Path]) -> ReadReport:
        return await _on_log_threads(_read_files, list(paths))

    def _lock(self, key: str) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock


# The log's own threads. Appends must never queue behind work that can block for long on the default
# pool asyncio.to_thread uses (a tool reading a slow file, say): every acknowledgement waits for one.
# Few threads suffice, appends are short; more than one lets chats fsync side by side.
_LOG_THREADS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="klaw-log")


async def _on_log_threads(fn: Callable[..., T], *args: Any) -> T:
    return await asyncio.get_running_loop().run_in_executor(_LOG_THREADS, fn, *args)


def _append_lines(path: Path, lines: list[str]) -> None:
    """Append and fsync, or leave the file as it was: a write cut short (disk full, file size limit)
    is truncated away, so a failed append leaves no torn line for a retry to append after."""
    is_new = not path.exists()
    if is_new:
        private_dirs(path.parent)  # a chat's folder 0700, not the umask's 0755
    payload = "".join(line + "\n" for line in lines).encode("utf-8")
    fd = open_private(path, os.O_RDWR | os.O_APPEND)
    try:
        size = os.fstat(fd).st_size
        if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
            payload = b"\n" + payload  # isolate a torn last line left by a crash
        append_whole(fd, payload, size)
    finally:
        os.close(fd)
    if is_new:
        fsync_dir(path.parent)


def iter_file(path: Path, report: ReadReport) -> Iterator[MessageRecord]:
    """Records of one file in order; malformed lines are noted in `report` and logged. A record whose
    channel and chat_id name another chat than its folder is malformed too: every reader (recovery,
    reindex, log check) would otherwise file it under that other chat, creating it if need be."""
    with open(path, "rb") as handle:
        yield from iter_lines(path, numbered_lines(handle, MAX_RECORD_BYTES), report, folder=path.parent.name)


def iter_lines(
    path: Path, lines: Iterable[tuple[int, bytes | str | None]], report: ReadReport, *, folder: str | None = None
) -> Iterator[MessageRecord]:
    """Records of a file's numbered lines (None: a line too long to read, decision 329); with `folder`,
    only those of the chat whose log folder it is (a store's rows: `iter_rows`)."""
    for number, raw in lines:
        if raw is None:
            _skip(report, path, number, TOO_LONG)
            continue
        if not raw.strip():
            continue
        try:
            record = decode_record(raw if isinstance(raw, str) else raw.decode("utf-8"))
        except UnicodeDecodeError:
            _skip(report, path, number, "not valid UTF-8")
        except MalformedLine as exc:
            _skip(report, path, number, str(exc))
        else:
            if folder is None or record.chat.log_dir_name == folder:
                yield record
            else:
                _skip(report, path, number, WRONG_FOLDER)


def iter_rows(path: Path, rows: Iterable[tuple[int, ChatRef, str]], report: ReadReport) -> Iterator[MessageRecord]:
    """Records of a log a store keeps (numbered rows, each filed under a chat, named `path`), as
    `iter_lines` reads a folder's file: a row whose record names another chat is malformed too."""
    for number, chat, line in rows:
        try:
            yield decode_filed(line, chat)
        except MalformedLine as exc:
            _skip(report, path, number, str(exc))


def decode_filed(line: str, chat: ChatRef) -> MessageRecord:
    """A row's line decoded and checked against the chat the store filed it under (PostgreSQL's
    `log_records.chat`). A record naming another chat is `MalformedLine`, as one in another chat's
    folder is: reindex would file it under the chat it names, `klaw log check` and an export under the
    row's, and a `/forget` of either chat would miss it."""
    record = decode_record(line)
    if record.chat != chat:
        raise MalformedLine(WRONG_CHAT)
    return record


def _skip(report: ReadReport, path: Path, number: int, reason: str) -> None:
    log.warning("skipping malformed log line %s:%d (%s)", path, number, reason)
    report.skipped.append((path, number, reason))


def _read_files(paths: list[Path]) -> ReadReport:
    report = ReadReport()
    for path in paths:
        report.records.extend(iter_file(path, report))
    return report


class StoreKeptLog(ConversationLog):
    """The log of a store that keeps it itself (PostgreSQL's `log_records`: each append writes the
    record's line in the transaction that folds it; docs/decisions/132-log-with-several-engines.md).

    Nothing to write here, nothing to replay (no fold exists without its record), nothing to rewrite
    (the tombstone's fold deletes the forgotten lines). Scheduled tasks' run logs stay files: they are
    the home's own (scheduler.db is), and `open_log` leaves them to a `ConversationLog`."""

    async def append_many(self, records: Sequence[MessageRecord]) -> None:
        return None

    @contextlib.asynccontextmanager
    async def appending(self, records: Sequence[MessageRecord]) -> AsyncIterator[LogWrite | None]:
        yield None  # the store writes each record's line in the transaction that stores it

    async def remove_records(
        self, chat: ChatRef, ids: Collection[str], days: Iterable[str] | None = None
    ) -> list[Path]:
        return []

    async def holds_records(self, chat: ChatRef, ids: Collection[str], days: Iterable[str] | None = None) -> bool:
        return False  # the tombstone's fold deleted the lines in its own transaction

    async def find_record(self, record_id: str) -> MessageRecord | None:
        return None  # a record in this log is in the database: the same transaction stored both

    def _dirs(self) -> list[Path]:
        return []


def open_log(conversations: Path, *, kept_by_store: bool) -> ConversationLog:
    """The conversation log of a home: JSONL files under `conversations`, or the store's own."""
    return StoreKeptLog(conversations) if kept_by_store else ConversationLog(conversations)
