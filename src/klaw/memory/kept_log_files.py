"""A log the store keeps (PostgreSQL's `log_records`) checked, or written out as the usual JSONL files.

With several engines on one database the log lives in the database (docs/decisions/132-log-with-several-
engines.md). `klaw log check` reads it a UTC day at a time and names each row it cannot use by the day
and line reindex names it by (`log_records/<day>:<n>`) and by its append number (`seq`), never its
content. `klaw log export` writes it out in the layout of a home's `conversations/` directory,
`<channel>_<chat id>/<YYYY-MM-DD>.jsonl`, each chat's lines in the order they were appended: a backup a
person can read and grep, and a log `klaw reindex` rebuilds an SQLite home from. A malformed row is
written out as it is (an export keeps everything; reading skips it as it skips any malformed line).
Blocking: run in a thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from klaw.atomic_file import fsync_dir
from klaw.errors import KlawError
from klaw.memory.conversation_log import decode_filed
from klaw.memory.log_oddities import OddRecords
from klaw.memory.log_replay import KEPT_LOG
from klaw.private_files import open_private, private_dirs
from klaw.store.log_format import MalformedLine
from klaw.store.rebuild_protocol import KeptLog, KeptLogRow
from klaw.store.records import ChatRef

KeptLogProgress = Callable[[int, int], None]  # days done, days in all


@dataclass(frozen=True)
class MalformedRow:
    day: str
    line: int  # within the day, from 1: as `klaw reindex` reports it
    seq: int
    chat: ChatRef
    reason: str

    def where(self) -> str:
        return f"{KEPT_LOG}/{self.day}:{self.line} (seq {self.seq}, chat {self.chat})"


@dataclass
class KeptLogReport:
    records: dict[ChatRef, int] = field(default_factory=dict)  # usable records per chat
    malformed: list[MalformedRow] = field(default_factory=list)
    files: int = 0  # files written by an export
    # records that parse but no klaw writes, per chat (decision 488's check, on log_records: decision 500)
    watched: dict[ChatRef, OddRecords] = field(default_factory=dict)
    now: datetime = field(default_factory=lambda: datetime.now(UTC))

    def odd(self, chat: ChatRef) -> list[str]:
        """`chat`'s odd records, one sentence each (ids, sizes and dates, never text)."""
        watch = self.watched.get(chat)
        return watch.said() if watch is not None else []


class ExportTargetError(KlawError, ValueError):
    """The export's directory cannot take it; the message says why and what to do."""


def check_kept_log(kept: KeptLog, progress: KeptLogProgress | None = None) -> KeptLogReport:
    """Every row read and decoded: the records per chat and the malformed rows."""
    report = KeptLogReport()
    days = kept.days()
    for done, day in enumerate(days, 1):
        for number, row in enumerate(kept.rows(day.day), 1):
            _count(report, day.day, number, row)
        if progress is not None:
            progress(done, len(days))
    return report


def refuse_target(target: Path) -> None:
    """ExportTargetError unless `target` is new or an empty directory; asked before any bar is drawn too (a
    refusal under `exporting days 0/?` looked half-started: newcomer20)."""
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ExportTargetError(
            f"{target} is not an empty directory: export into a new one (its files would mix with the log"
            " already there)"
        )


def export_kept_log(kept: KeptLog, target: Path, progress: KeptLogProgress | None = None) -> KeptLogReport:
    """Write the log under `target` (new or empty; directories 0700, files 0600, each fsync'd)."""
    refuse_target(target)
    private_dirs(target)
    report = KeptLogReport()
    days = kept.days()
    for done, day in enumerate(days, 1):
        by_chat: dict[ChatRef, list[str]] = {}
        for number, row in enumerate(kept.rows(day.day), 1):
            _count(report, day.day, number, row)
            by_chat.setdefault(row.chat, []).append(row.line)
        for chat, lines in by_chat.items():
            _write(target / chat.log_dir_name, f"{day.day}.jsonl", lines)
            report.files += 1
        if progress is not None:
            progress(done, len(days))
    fsync_dir(target)
    return report


def _count(report: KeptLogReport, day: str, number: int, row: KeptLogRow) -> None:
    try:
        record = decode_filed(row.line, row.chat)
    except MalformedLine as exc:
        report.malformed.append(MalformedRow(day, number, row.seq, row.chat, str(exc)))
        return
    report.records[row.chat] = report.records.get(row.chat, 0) + 1
    report.watched.setdefault(row.chat, OddRecords(report.now)).see(record)


def _write(directory: Path, name: str, lines: list[str]) -> None:
    is_new = not directory.exists()
    private_dirs(directory)
    fd = open_private(directory / name, os.O_WRONLY | os.O_EXCL)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", closefd=False) as handle:
            handle.writelines(line + "\n" for line in lines)
        os.fsync(fd)
    finally:
        os.close(fd)
    if is_new:
        fsync_dir(directory.parent)
    fsync_dir(directory)
