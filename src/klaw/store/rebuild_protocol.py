"""What `klaw reindex` needs of a storage backend beyond the repositories: a store built beside the
live one, the journal that lets an interrupted build resume, and the swap into place.

`memory/reindex.py` codes against these protocols only; `store/backend.py` hands out the
implementation of the configured `database.backend` (SQLite: `store/sqlite/rebuild.py`; PostgreSQL:
`store/postgres/reindex_build.py`), so a backend slots in without touching the rebuild itself. A store
that keeps the log itself (PostgreSQL) hands it over as a `KeptLog`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from klaw.store.protocol import Storage, StorageError
from klaw.store.records import ChatRef


@dataclass(frozen=True)
class DoneFile:
    """A log file the build holds the rows of, as it was when read (a file that changed is read again)."""

    key: str
    size: int
    mtime_ns: int
    lines: int


class RebuildJournal(Protocol):
    """Kept inside the build: which log files are done, their malformed lines, and small state (which
    embedder the build is for). Dropped before the build goes live."""

    async def create(self) -> None: ...

    async def get(self, key: str) -> str | None: ...

    async def set(self, key: str, value: str) -> None: ...

    async def done_files(self) -> dict[str, DoneFile]: ...

    async def mark_done(self, files: Sequence[DoneFile], skipped: Sequence[tuple[str, int, str]]) -> None:
        """Record `files` as rebuilt, replacing the malformed lines noted for them before."""
        ...

    async def skipped(self) -> list[tuple[str, int, str]]:
        """Every malformed line noted: (file key, line number, reason), in order."""
        ...

    async def drop(self) -> None: ...


class RebuildTarget(Protocol):
    """An open build: a whole store, its journal, and the steps that finish it."""

    @property
    def store(self) -> Storage: ...

    @property
    def journal(self) -> RebuildJournal: ...

    async def copy_settings(self) -> int:
        """Replace the build's runtime settings with the live store's (commands set them; the log does
        not hold them); returns how many. 0 when there is no live store. `StorageError` when the live
        store cannot be read. The other state the log does not hold comes along too: which replies still
        wait for delivery (the fold marked every reply the log closed; only those the live store still
        waits for stay, none without it) and `message_send`'s places of the last hour."""
        ...

    async def finish(self) -> None:
        """Make the build whole on its own (e.g. no write-ahead log beside it), ready to swap in."""
        ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class KeptLogDay:
    """One UTC day of a log the store keeps: how many lines, and the last append's number (a day whose
    count and last number are unchanged since an interrupted build is not read again)."""

    day: str  # YYYY-MM-DD
    lines: int
    last_seq: int


@dataclass(frozen=True)
class KeptLogRow:
    """One line of a log the store keeps, with what the store knows of it beside the line itself (a
    malformed line still has its chat and its place): for `klaw log export` and `klaw log check`."""

    seq: int  # the append's number, unique: how a person finds the row
    chat: ChatRef
    line: str


class KeptLog(Protocol):
    """The conversation log of a store that keeps it (PostgreSQL's `log_records`), read for a rebuild.
    Blocking calls: run them in a thread."""

    def days(self) -> list[KeptLogDay]:
        """Every day holding records, oldest first."""
        ...

    def rows(self, day: str) -> list[KeptLogRow]:
        """The day's lines (by the records' UTC dates) with their append numbers and the chats they are
        filed under, in the order they were appended."""
        ...


class TargetRefused(StorageError):
    """The build's target cannot take it as it is (a PostgreSQL database holding a home already):
    running the same command again changes nothing, so no resume is offered."""


class RebuildBackend(Protocol):
    """Where a backend builds a new store for the live one, and how it swaps it in."""

    def kept_log(self) -> KeptLog | None:
        """The log to rebuild from when the live store keeps it; None: the JSONL files in KLAW_HOME."""
        ...

    @property
    def location(self) -> Path:
        """Where the build is made (named in messages)."""
        ...

    def exists(self) -> bool:
        """Whether an earlier, unfinished build is there."""
        ...

    async def open(self, clock: Callable[[], datetime], *, resume: bool) -> RebuildTarget | None:
        """Open the build (created if missing). With `resume`, None when the one there cannot be
        opened; without, such a failure raises."""
        ...

    def discard(self) -> None:
        """Remove an unfinished build (blocking)."""
        ...

    def swap_into_place(self, *, keep_backup: bool) -> Path | None:
        """Make the finished build the live store (blocking); returns the old one's backup if kept."""
        ...
