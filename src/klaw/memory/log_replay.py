"""The whole conversation log as one stream in creation order, day by day, for rebuilding the database.

Log files are named by UTC day, so day D of every chat is `<chat>/D.jsonl`: a day's files are read
together and merged by `created_at`, each chat keeping its own file order. That order, not the
timestamps, decides which segment and exchange a record belongs to (a `/new` splits a chat exactly
where it was written). Across chats the merge reproduces the order in which live ingestion stored
the records, hence the same rowids, except for records of different chats written in the same
millisecond (their relative order is not in the log).

A day is also the unit `klaw reindex` resumes by: a day whose files are unchanged since an
interrupted run is not read again.

A store that keeps the log itself (PostgreSQL's `log_records`) is read the same way, a day at a time
(`kept_source`): one "file" per day, its lines in the order they were appended, its size the line
count and its stamp the last append's number.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from klaw.bounded_lines import numbered_lines
from klaw.memory.conversation_log import ConversationLog, ReadReport, iter_file, iter_rows
from klaw.memory.log_tombstones import forgotten_in_log
from klaw.store.log_format import MAX_RECORD_BYTES
from klaw.store.rebuild_protocol import KeptLog
from klaw.store.records import MessageRecord

KEPT_LOG = "log_records"  # how the days of a log the store keeps are named in reports


@dataclass(frozen=True)
class LogFile:
    path: Path
    key: str  # "<chat dir>/<day>.jsonl": stable if KLAW_HOME moves
    size: int
    mtime_ns: int
    lines: int  # non-blank lines: records plus malformed lines


@dataclass(frozen=True)
class LogDay:
    day: str
    files: tuple[LogFile, ...]

    @property
    def lines(self) -> int:
        return sum(f.lines for f in self.files)


def scan_log(log: ConversationLog) -> list[LogDay]:
    """Every log file, grouped by day, oldest day first (blocking: run it in a thread)."""
    by_day: dict[str, list[LogFile]] = {}
    for chat_dir in log.chat_dirs():
        for path in log.files(chat_dir):
            by_day.setdefault(path.stem, []).append(_measure(path, f"{chat_dir.name}/{path.name}"))
    return [LogDay(day, tuple(files)) for day, files in sorted(by_day.items())]


def read_day(day: LogDay) -> ReadReport:
    """The day's records of every chat, merged by `created_at` keeping each file's own order
    (blocking: run it in a thread). Malformed lines are in `skipped`, never in `records`."""
    report = ReadReport()
    per_file = [list(iter_file(f.path, report)) for f in day.files]
    report.records = list(_merge(per_file))
    return report


def _merge(sequences: Iterable[list[MessageRecord]]) -> Iterable[MessageRecord]:
    # heapq.merge never reorders within one input and breaks ties by input order (chat dir order).
    return heapq.merge(*sequences, key=lambda record: record.created_at)


def _measure(path: Path, key: str) -> LogFile:
    info = path.stat()
    with open(path, "rb") as handle:  # a line too long to read counts: it is reported as malformed
        lines = sum(1 for _, raw in numbered_lines(handle, MAX_RECORD_BYTES) if raw is None or raw.strip())
    return LogFile(path, key, info.st_size, info.st_mtime_ns, lines)


@dataclass(frozen=True)
class LogSource:
    """Where a rebuild reads the log (blocking calls: run them in a thread): its days, one day's
    records, and the ids its tombstones forgot."""

    scan: Callable[[], list[LogDay]]
    read: Callable[[LogDay], ReadReport]
    forgotten: Callable[[], frozenset[str]]


def file_source(log: ConversationLog) -> LogSource:
    """The home's JSONL files."""
    return LogSource(lambda: scan_log(log), read_day, lambda: forgotten_in_log(log))


def kept_source(kept: KeptLog) -> LogSource:
    """A log the store keeps. Its forgotten records are gone already: the tombstone's fold deleted them."""

    def scan() -> list[LogDay]:
        return [
            LogDay(d.day, (LogFile(Path(KEPT_LOG) / d.day, f"{KEPT_LOG}/{d.day}", d.lines, d.last_seq, d.lines),))
            for d in kept.days()
        ]

    def read(day: LogDay) -> ReadReport:
        report = ReadReport()
        numbered = ((number, row.chat, row.line) for number, row in enumerate(kept.rows(day.day), start=1))
        report.records = list(iter_rows(day.files[0].path, numbered, report))
        return report

    return LogSource(scan, read, frozenset)
