"""The failures every command can meet on its way out, worded once at the command line's edge (decision 320).

A read-only home, a full disk and a damaged klaw.db are not one command's problem: `memory list` met them
closing the store, `schedule list` in the scheduler's SQLite, `memory forget` taking the home's lock,
`klaw chat` storing the message that filled the disk. Each ended in an apsw, sqlite3 or OSError traceback
(or `error: [Errno 28] No space left on device`, naming neither the file nor the fix). `klaw.cli.app.main`
hands whatever escaped a command to `edge_words`: one line naming the file system or the file and what
to do (remount it, free space on it, `klaw reindex`), exit 1. Anything else is a bug and keeps its
traceback. A damaged database is told by the background workers' check and in their words
(`disk_trouble.damaged_database`, decision 326), naming the file's path (decision 364).
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Iterator
from pathlib import Path

from klaw.disk_trouble import (
    FULL_ERRNOS,
    READ_ONLY_ERRNOS,
    damaged_database,
    damaged_words,
    disk_trouble,
    full_words,
    permission_words,
    read_only_words,
    rebuild_klaw_db,
    repair_scheduler_db,
)
from klaw.home import KlawHome

_FILE_TOO_LARGE = errno.EFBIG


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then what it was raised from or while handling (a close failing after a turn's failure)."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__


def _os_words(exc: OSError, home_root: Path) -> str | None:
    where = Path(exc.filename) if isinstance(exc.filename, str) else home_root
    if exc.errno in READ_ONLY_ERRNOS or exc.errno in FULL_ERRNOS:
        return disk_trouble(where, exc)
    if exc.errno in (errno.EACCES, errno.EPERM) and where.is_relative_to(home_root):
        return permission_words(where, home_root)
    if exc.errno == _FILE_TOO_LARGE:
        return f"{where} cannot grow: {exc.strerror} (a file-size limit: see `ulimit -f`)."
    return None


def _klaw_db(home_root: Path) -> Path:
    """klaw.db's path as engine.yaml sets it (`database.path`), or the default when the file cannot say."""
    from klaw.config_loader import load_config  # only on the way out: pydantic's models are slow to import

    try:
        return KlawHome(home_root).database_file(load_config(KlawHome(home_root).config_file).config.database.path)
    except Exception:  # an engine.yaml that does not load: its own error is told when a command reads it
        return home_root / "klaw.db"


def _damaged(reason: str, fix: str) -> str:
    """The background workers' words (decision 326), one check and one wording for both (decision 364)."""
    return damaged_words("the command", reason, fix)


def _apsw_words(exc: BaseException, home_root: Path) -> str | None:
    apsw = sys.modules.get("apsw")
    if apsw is None or not isinstance(exc, apsw.Error):
        return None
    if isinstance(exc, apsw.FullError):
        return full_words(home_root)
    if isinstance(exc, apsw.ReadOnlyError):
        return disk_trouble(home_root) or read_only_words(home_root)
    if (reason := damaged_database(exc)) is not None:  # klaw.db: klaw's store is the one on apsw
        return _damaged(reason, rebuild_klaw_db(_klaw_db(home_root)))
    if isinstance(exc, (apsw.CantOpenError, apsw.IOError)):
        return disk_trouble(home_root)
    return None


def _sqlite3_words(exc: BaseException, home_root: Path) -> str | None:
    sqlite3 = sys.modules.get("sqlite3")
    if sqlite3 is None or not isinstance(exc, sqlite3.Error):
        return None
    if "full" in str(exc):
        return full_words(home_root)
    if (reason := damaged_database(exc)) is not None:  # scheduler.db: the task store is the one on sqlite3
        return _damaged(reason, repair_scheduler_db(KlawHome(home_root).scheduler_db))
    return disk_trouble(home_root)


def edge_words(exc: BaseException, home_root: Path) -> str | None:
    """One line for a failure a person fixes on their disk, or None (then it is a bug: let it show)."""
    for link in _chain(exc):
        if isinstance(link, OSError):
            words = _os_words(link, home_root)
        else:
            words = _apsw_words(link, home_root) or _sqlite3_words(link, home_root)
        if words is not None:
            return words
    return None
