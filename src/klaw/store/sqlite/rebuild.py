"""`SqliteRebuild`: what `klaw reindex` needs of SQLite beyond the repositories (the protocols are
`store/rebuild_protocol.py`).

- The build is `<klaw.db>.reindex`, a whole `SqliteStore` beside the live file (no vector cache).
- Its journal, kept inside the database being built (`reindex_*` tables): which log files are done
  (by size and mtime, so a file that grew since is read again), the malformed lines they had, and
  which embedder the build is for. An interrupted run resumes from it; the tables are dropped
  before the file goes live.
- The runtime settings copied from the old database (commands set them; the log does not hold them),
  and which replies still wait for delivery (gateways confirm them; the log does not say).
- The finished file made self-contained and swapped into place.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import apsw

from klaw.atomic_file import kept_copy_name
from klaw.config import FullTextTokenizer
from klaw.store.protocol import StorageError
from klaw.store.rebuild_protocol import DoneFile
from klaw.store.sqlite.connection import SqliteDatabase
from klaw.store.sqlite.fts_merge import merged
from klaw.store.sqlite.query import fetch_all, fetch_one
from klaw.store.sqlite.store import SqliteStore
from klaw.store.sqlite.vector_cache import save_large_chats
from klaw.store.sqlite.vector_floats import FloatFile
from klaw.store.sqlite.vector_snapshot import SNAPSHOT_MIN_ROWS, SnapshotFolder
from klaw.store.sqlite.vectors import MESSAGE_VECTORS

log = logging.getLogger(__name__)

_JOURNAL = """
CREATE TABLE IF NOT EXISTS reindex_files (
    key TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL, lines INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS reindex_skipped (
    key TEXT NOT NULL, line INTEGER NOT NULL, reason TEXT NOT NULL, PRIMARY KEY (key, line)
);
CREATE TABLE IF NOT EXISTS reindex_state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_SIDECARS = ("-wal", "-shm", "-journal")


class SqliteRebuildJournal:
    def __init__(self, db: SqliteDatabase) -> None:
        self._db = db

    async def create(self) -> None:
        await self._db.run(lambda connection: connection.execute(_JOURNAL))

    async def get(self, key: str) -> str | None:
        def query(connection: apsw.Connection) -> str | None:
            row = fetch_one(connection, "SELECT value FROM reindex_state WHERE key = ?", (key,))
            return None if row is None else str(row[0])

        return await self._db.run(query)

    async def set(self, key: str, value: str) -> None:
        await self._db.run(
            lambda connection: connection.execute(
                "INSERT INTO reindex_state (key, value) VALUES (?, ?)"
                " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )
        )

    async def done_files(self) -> dict[str, DoneFile]:
        def query(connection: apsw.Connection) -> dict[str, DoneFile]:
            rows = fetch_all(connection, "SELECT key, size, mtime_ns, lines FROM reindex_files")
            return {row[0]: DoneFile(row[0], row[1], row[2], row[3]) for row in rows}

        return await self._db.run(query)

    async def mark_done(self, files: Sequence[DoneFile], skipped: Sequence[tuple[str, int, str]]) -> None:
        """Record `files` as rebuilt, replacing the malformed lines noted for them before."""

        def write(connection: apsw.Connection) -> None:
            with connection:
                for done in files:
                    connection.execute("DELETE FROM reindex_skipped WHERE key = ?", (done.key,))
                    connection.execute(
                        "INSERT INTO reindex_files (key, size, mtime_ns, lines) VALUES (?, ?, ?, ?)"
                        " ON CONFLICT (key) DO UPDATE SET size = excluded.size, mtime_ns = excluded.mtime_ns,"
                        " lines = excluded.lines",
                        (done.key, done.size, done.mtime_ns, done.lines),
                    )
                connection.executemany(
                    "INSERT OR REPLACE INTO reindex_skipped (key, line, reason) VALUES (?, ?, ?)", list(skipped)
                )

        await self._db.run(write)

    async def skipped(self) -> list[tuple[str, int, str]]:
        def query(connection: apsw.Connection) -> list[tuple[str, int, str]]:
            rows = fetch_all(connection, "SELECT key, line, reason FROM reindex_skipped ORDER BY key, line")
            return [(str(row[0]), int(row[1]), str(row[2])) for row in rows]

        return await self._db.run(query)

    async def drop(self) -> None:
        await self._db.run(
            lambda connection: connection.execute(
                "DROP TABLE IF EXISTS reindex_files; DROP TABLE IF EXISTS reindex_skipped;"
                " DROP TABLE IF EXISTS reindex_state"
            )
        )


async def copy_settings(db: SqliteDatabase, source: Path) -> int:
    """Replace `db`'s settings (and `message_send`'s places of the last hour) with those of the database
    file `source`; returns how many settings.
    Reading through ATTACH sees `source`'s WAL too, so nothing committed there is missed."""

    def copy(connection: apsw.Connection) -> int:
        connection.execute("ATTACH DATABASE ? AS old", (str(source),))
        try:
            if fetch_one(connection, "SELECT 1 FROM old.sqlite_master WHERE name = 'sends'") is not None:
                with connection:  # message_send's places of the last hour (decision 418): the log has no sends
                    connection.execute("DELETE FROM main.sends")
                    connection.execute("INSERT INTO main.sends (target, sent_at) SELECT target, sent_at FROM old.sends")
            present = fetch_one(connection, "SELECT 1 FROM old.sqlite_master WHERE name = 'settings'")
            if present is None:
                return 0
            with connection:
                connection.execute("DELETE FROM main.settings")
                connection.execute(
                    "INSERT INTO main.settings (key, value, updated_at) SELECT key, value, updated_at FROM old.settings"
                )
                copied = int(connection.changes())
            return copied
        finally:
            connection.execute("DETACH DATABASE old")

    return await db.run(copy)


def keep_undelivered(connection: apsw.Connection, source: Path) -> None:
    """Keep, of the replies the rebuilt database would send again, those `source` (the live file)
    still waits for (by record id); none when it cannot be read: resending every reply the log ever
    held would be worse than losing one that was waiting at the moment of a reindex."""
    with connection:
        connection.execute("DELETE FROM main.undelivered_replies")
    if not source.exists():
        return
    try:
        connection.execute("ATTACH DATABASE ? AS old", (str(source),))
    except apsw.Error as exc:
        log.warning("undelivered replies not carried over: %s cannot be read (%s)", source, type(exc).__name__)
        return
    try:
        if fetch_one(connection, "SELECT 1 FROM old.sqlite_master WHERE name = 'undelivered_replies'") is None:
            return
        with connection:
            connection.execute(
                "INSERT OR IGNORE INTO main.undelivered_replies (message_rowid, exchange_id)"
                " SELECT m.rowid, u.exchange_id FROM old.undelivered_replies u"
                " JOIN old.messages o ON o.rowid = u.message_rowid JOIN main.messages m ON m.id = o.id"
            )
    except apsw.Error as exc:
        log.warning("undelivered replies not carried over from %s (%s)", source, type(exc).__name__)
    finally:
        connection.execute("DETACH DATABASE old")


async def make_self_contained(db: SqliteDatabase) -> None:
    """Fold the WAL into the file and leave WAL mode, so the file alone is the whole database
    (a stray `-wal` next to it after a move would otherwise be applied to the wrong file). The
    engine switches it back to WAL when it opens it. Leaving WAL mode needs the file's other
    connections closed: the read connections are (decision 216)."""
    await db.close_reads()
    await db.run(lambda connection: connection.execute("PRAGMA journal_mode = DELETE"))


def swap_into_place(new: Path, live: Path, *, keep_backup: bool) -> Path | None:
    """Make `new` the database at `live` (blocking). The old database is moved aside until the new one
    is in place, then removed unless `keep_backup` (kept as `<live>.bak-<UTC time>`); returns the backup
    kept, if any.

    The old file is first made self-contained (its WAL checkpointed); if that fails (a damaged
    database, the usual reason to reindex) its `-wal`/`-shm` move with it into the backup. No stale
    `-wal` or `-shm` of the old file is ever left next to the new one, nor its saved vectors
    (`vector_snapshot.py`)."""
    # kept: a name of its own, so no later run removes or overwrites it (decision 395); else a
    # temporary name no kept backup (nor an older klaw's klaw.db.bak) ever has
    backup = kept_copy_name(live) if keep_backup else live.with_name(f"{live.name}.swapping-out")
    for stale in [backup, *(_sidecar(backup, s) for s in _SIDECARS)]:
        stale.unlink(missing_ok=True)
    if live.exists():
        _checkpoint(live)
        os.replace(live, backup)
    for suffix in _SIDECARS:  # even without a live file: a stray -wal would be applied to the new one
        if _sidecar(live, suffix).exists():
            os.replace(_sidecar(live, suffix), _sidecar(backup, suffix))
    for suffix in _SIDECARS:
        _sidecar(new, suffix).unlink(missing_ok=True)  # empty after make_self_contained
    os.replace(new, live)
    _fsync_dir(live.parent)
    # The old file's saved vectors are stale for the new one; the build's, saved by `finish`, are its own.
    SnapshotFolder.beside(new).replace(SnapshotFolder.beside(live))
    # Likewise the float rows (decision 534): the build's, written by its puts, or none.
    for built, old in zip(FloatFile.beside(new).paths(), FloatFile.beside(live).paths(), strict=True):
        if built.exists():
            os.replace(built, old)
        else:
            old.unlink(missing_ok=True)
    if keep_backup and backup.exists():
        return backup
    for path in [backup, *(_sidecar(backup, s) for s in _SIDECARS)]:
        path.unlink(missing_ok=True)
    return None


def _checkpoint(path: Path) -> None:
    try:
        connection = apsw.Connection(str(path))
        try:
            connection.setbusytimeout(5000)
            connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            connection.execute("PRAGMA journal_mode = DELETE")
        finally:
            connection.close()
    except apsw.Error as exc:
        log.warning("could not checkpoint the old database %s (%s); keeping its WAL beside the backup", path, exc)


def _sidecar(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _fsync_dir(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        with contextlib.suppress(OSError):
            os.fsync(descriptor)
    finally:
        os.close(descriptor)


@dataclass(frozen=True)
class SqliteBuild:
    """An open build: the store being filled, its journal, and the steps that finish it."""

    store: SqliteStore
    journal: SqliteRebuildJournal
    live: Path
    copy_min_rows: int = SNAPSHOT_MIN_ROWS  # chats this large have their int8 copy saved by `finish`

    async def copy_settings(self) -> int:
        # Which replies still wait for delivery is the live database's to say, not the log's: folding
        # the log marked every reply ever closed; only those the live file still waits for are kept.
        await self.store.db.run(lambda connection: keep_undelivered(connection, self.live))
        if not self.live.exists():
            return 0
        try:
            return await copy_settings(self.store.db, self.live)
        except apsw.Error as exc:
            raise StorageError(f"the settings of {self.live} cannot be read ({type(exc).__name__})") from exc

    async def finish(self) -> None:
        """Merge the full-text index (the appends left it in many segments, which every search
        reads: decision 251), save the large chats' int8 copies beside the build (moved with it by
        the swap), so the first start after a reindex loads none of them from the table (decision
        236), then make the file self-contained."""
        await self.store.db.run(merged)
        folder = SnapshotFolder.beside(self.store.db.path)
        await self.store.db.run(
            lambda connection: save_large_chats(connection, MESSAGE_VECTORS, folder, self.copy_min_rows)
        )
        await make_self_contained(self.store.db)

    async def aclose(self) -> None:
        await self.store.aclose()


class SqliteRebuild:
    """`klaw reindex` on SQLite: the build is `<klaw.db>.reindex`, swapped in when finished."""

    def __init__(
        self, live: Path, tokenizer: FullTextTokenizer = "porter", *, copy_min_rows: int = SNAPSHOT_MIN_ROWS
    ) -> None:
        self._live = live = live.resolve()  # through a link: built and swapped beside the file (decision 544)
        self._tokenizer = tokenizer
        self._work = _sidecar(live, ".reindex")
        self._copy_min_rows = copy_min_rows

    @property
    def location(self) -> Path:
        return self._work

    def exists(self) -> bool:
        return self._work.exists()

    async def open(self, clock: Callable[[], datetime], *, resume: bool) -> SqliteBuild | None:
        try:
            store = await SqliteStore.open(self._work, clock=clock, vector_cache_bytes=0, tokenizer=self._tokenizer)
        except (StorageError, apsw.Error) as exc:
            if not resume:
                raise
            log.warning("cannot resume the build at %s: %s", self._work, exc)
            return None
        return SqliteBuild(store, SqliteRebuildJournal(store.db), self._live, self._copy_min_rows)

    def kept_log(self) -> None:
        """The log is the home's JSONL files."""
        return None

    def discard(self) -> None:
        for path in [self._work, *(_sidecar(self._work, s) for s in _SIDECARS)]:
            path.unlink(missing_ok=True)
        SnapshotFolder.beside(self._work).remove()
        FloatFile.beside(self._work).remove()

    def swap_into_place(self, *, keep_backup: bool) -> Path | None:
        return swap_into_place(self._work, self._live, keep_backup=keep_backup)
