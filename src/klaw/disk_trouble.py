"""What a failed write means when the disk is the cause: a file system mounted read-only, or one with no
space left, named with its mount point and the fix, in one sentence (decision 320).

`[Errno 30] Read-only file system: '…/engine.lock'`, `apsw.FullError: database or disk is full` and
`sqlite3.OperationalError: unable to open database file` say what failed, not where the trouble is or
what a person does about it. The answer is the same whichever file klaw was writing (engine.lock,
klaw.db, a log line): the file system holding it. SQLite's own errors carry no errno, so the file
system is asked directly (`statvfs`: its read-only flag, its free blocks and inodes).

Lives at the top level: `home_lock`, the store, the log handlers and `cli` all word these failures, and
it imports nothing of klaw.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

READ_ONLY_ERRNOS = frozenset({errno.EROFS})
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
NEARLY_FULL_BYTES = 1 << 20
"""A write SQLite reports without an errno failed for want of space when less than this is left."""


def mount_point(path: Path) -> Path:
    """The mount point of the file system holding `path` (or its nearest existing parent)."""
    here = Path(os.path.abspath(path))
    while not here.is_dir() and here.parent != here:  # a file's folder (a log file may be a link elsewhere)
        here = here.parent
    try:
        device = here.stat().st_dev
        while here.parent != here and here.parent.stat().st_dev == device:
            here = here.parent
    except OSError:
        pass
    return here


def _statvfs(path: Path) -> os.statvfs_result | None:
    here = Path(os.path.abspath(path))
    while not here.exists() and here.parent != here:
        here = here.parent
    try:
        return os.statvfs(here)
    except OSError:
        return None


def read_only_words(path: Path) -> str:
    mount = mount_point(path)
    return (
        f"{path} is on a read-only file system (mounted at {mount}): klaw writes its home there. Remount"
        f" it read-write (mount -o remount,rw {mount}), or set KLAW_HOME to a folder you can write."
    )


AGAIN = "then run the command again"
"""What follows the fix for a command; a worker that tries again by itself says so instead."""


def full_words(path: Path, then: str = AGAIN) -> str:
    mount = mount_point(path)
    if _out_of_inodes(_statvfs(path)):  # ENOSPC too, with free blocks: `df -h` would show room (adversary20)
        return (
            f"no free inodes left on the file system holding {path} (mounted at {mount}): it has room but cannot"
            f" hold one more file; remove files on {mount} (df -i shows how many are used), {then}."
        )
    return (
        f"no space left on the file system holding {path} (mounted at {mount}): free space on {mount}"
        f" (df -h shows how much is left), {then}."
    )


def _out_of_inodes(found: os.statvfs_result | None) -> bool:
    """No file can be made: a file system that counts inodes (f_files > 0) with none left for this user."""
    if found is None or found.f_files == 0:
        return False
    return (found.f_ffree if os.geteuid() == 0 else found.f_favail) == 0


def disk_trouble(path: Path, exc: BaseException | None = None, then: str = AGAIN) -> str | None:
    """One sentence when writing `path` failed because its file system is read-only or full (by `exc`'s
    errno, else by asking the file system); None when the disk is not the cause. `then` ends a full
    disk's fix."""
    code = exc.errno if isinstance(exc, OSError) else None
    if code in READ_ONLY_ERRNOS:
        return read_only_words(path)
    if code in FULL_ERRNOS:
        return full_words(path, then)
    if code is not None and code != errno.EACCES:
        return None  # another OSError (a missing folder…): its own words say it
    found = _statvfs(path)
    if found is None:
        return None
    if found.f_flag & os.ST_RDONLY:
        return read_only_words(path)
    usable = found.f_bfree if os.geteuid() == 0 else found.f_bavail
    if usable * found.f_frsize < NEARLY_FULL_BYTES or _out_of_inodes(found):  # SQLite: "disk I/O error", no errno
        return full_words(path, then)
    return None


def permission_words(where: Path, home_root: Path) -> str:
    return (
        f"{where} cannot be written: permission denied. klaw writes its home as the user running it:"
        f" make {home_root} yours and writable (chown -R, chmod u+w), or set KLAW_HOME to a folder you can write."
    )


def denied_words(path: Path, then: str = AGAIN) -> str:
    """A permission denied at `path` while klaw runs (a folder of its home made unreadable, chmod 000), with the
    folder (or file) to give back and how: the outermost of its folders klaw's user cannot open, else the file
    itself when it cannot be read or written, else its folder (decision 466)."""
    here = Path(os.path.abspath(path))
    blocked = next((p for p in reversed(here.parents) if not os.access(p, os.R_OK | os.X_OK)), None)
    if blocked is None and os.path.lexists(here) and not os.access(here, os.R_OK | os.W_OK):
        mode = "700" if os.path.isdir(here) else "600"
        return (
            f"klaw may not open {here}: permission denied. Give it back to klaw's user (chmod {mode} {here}), {then}."
        )
    blocked = blocked or (here if os.path.isdir(here) else here.parent)
    return (
        f"klaw may not open {blocked}: permission denied. Give it back to the user klaw runs as (chmod 700"
        f" {blocked}, as klaw makes its folders; chown if it changed owner), {then}."
    )


def unwritable(home_root: Path, files: tuple[Path, ...] = ()) -> str | None:
    """Why klaw could not run on the home at `home_root`, asked of the file system without writing (so
    `klaw config check` can say it): the home or one of `files` that exists (klaw.db, its folder) on a
    read-only file system, or not writable by this user; None when all can be written. Where SQLite can
    still read klaw.db, commands that only read work, but no engine starts (its lock, the log)."""
    for path in (home_root, *files):
        if not path.exists():
            continue
        found = _statvfs(path)
        if found is not None and found.f_flag & os.ST_RDONLY:
            return read_only_words(path)
        if not os.access(path, os.W_OK):
            return permission_words(path, home_root)
    return None


DAMAGED_TEXTS = ("database disk image is malformed", "file is not a database")
"""SQLite's words for a damaged file, the same through apsw (CorruptError, NotADBError) and sqlite3."""


def rebuild_klaw_db(klaw_db: Path | None = None) -> str:
    """The fix for a damaged klaw.db, naming its path when the caller knows it (decision 364)."""
    where = "klaw.db" if klaw_db is None else str(klaw_db)
    return f"The conversation log holds everything {where} had: stop the engine and run `klaw reindex` to rebuild it"


REBUILD_KLAW_DB = rebuild_klaw_db()


def repair_scheduler_db(scheduler_db: Path | None = None) -> str:
    """The fix for a damaged scheduler.db, naming its path when the caller knows it."""
    where = "scheduler.db" if scheduler_db is None else str(scheduler_db)
    return (
        f"Tasks are kept only in {where}: stop the engine, move it aside (its tasks can still be read from it"
        " with sqlite3 .recover) and add them again with klaw schedule add"
    )


def damaged_database(exc: BaseException) -> str | None:
    """SQLite's reason when `exc` (or what it was raised from) says a database file is damaged; None
    otherwise. Final: trying again reads the same damaged pages (decision 326), so a background worker
    says it once and stops instead of retrying as if the trouble would pass."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        found = next((t for t in DAMAGED_TEXTS if t in str(link)), None)  # SQLite's phrase only, never more text
        if found is not None or type(link).__name__ in ("CorruptError", "NotADBError"):
            return found or type(link).__name__
        link = link.__cause__ or link.__context__
    return None


def damaged_words(what: str, reason: str, fix: str = REBUILD_KLAW_DB) -> str:
    """What a person is told when `what` (a worker, a part of klaw) stopped on a damaged database."""
    return f"{what} stopped: a database is damaged ({reason}), so trying again cannot help. {fix}."
