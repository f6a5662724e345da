"""A note beside klaw.db while a migration moves it forward, so that an opening knows what holds its write lock.

An opening that finds klaw.db's write lock held past SQLite's busy timeout (5 s) waits for it, up to 10
minutes, only when a migration holds it (decision 451): moving a large home forward takes minutes on a small
machine, and an engine and `klaw db info` started together after an upgrade must not fail for that. Anything
else holding the lock that long (a person's `sqlite3` shell left in a transaction, another program) is not
waited for: the opening fails after the busy timeout, in the usual words (decision 460).

The migration says it is one by this note, `klaw.db-migrating` holding its process id, written once it has
taken the lock and found work to do, removed when it committed or rolled back. A note whose process is gone (a
kill -9 mid-migration: its lock went with it) counts for nothing. A note that cannot be written (a full disk)
is not a reason to stop: an opening meanwhile is refused after the busy timeout, as before decision 451.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from klaw.private_files import write_private
from klaw.small_file import read_small

log = logging.getLogger(__name__)

NOTE_SUFFIX = "-migrating"
_MAX_NOTE_BYTES = 64


def note_path(database: str | Path) -> Path:
    """The note of the database file at `database` (symlinks followed: every opener names the same note)."""
    return Path(os.path.realpath(database) + NOTE_SUFFIX)


@contextlib.contextmanager
def noting_migration(database: str) -> Iterator[None]:
    """The note written for the block (a migration holding the write lock), removed after it whatever happens.
    Nothing for a database without a file (`:memory:`, whose filename is empty)."""
    if not database:
        yield
        return
    path = note_path(database)
    try:
        write_private(path, str(os.getpid()).encode())
    except OSError as exc:
        log.debug("no migration note beside %s (%s): an opening meanwhile is not told to wait", database, exc)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)


def migrating_process(database: str | Path) -> int | None:
    """The id of the live process migrating the database at `database`, None when none says it does."""
    try:
        pid = int(read_small(note_path(database), _MAX_NOTE_BYTES))
    except (OSError, ValueError):  # no note, or not one a migration wrote
        return None
    if pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:  # a migration killed before it removed its note: its lock is gone too
        return None
    except PermissionError:  # alive, another user's
        pass
    return pid
