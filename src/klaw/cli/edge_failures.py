"""The failures every command can meet on its way out, worded once at the command line's edge (decision 320).

A read-only home, a full disk and a damaged klaw.db are not one command's problem: `memory list` met them
closing the store, `schedule list` in the scheduler's SQLite, `memory forget` taking the home's lock,
`klaw chat` storing the message that filled the disk. Each ended in an apsw, sqlite3 or OSError traceback
(or `error: [Errno 28] No space left on device`, naming neither the file nor the fix). `klaw.cli.app.main`
hands whatever escaped a command to `edge_words`: one line naming the file system or the file and what
to do (remount it, free space on it, `klaw reindex`), exit 1. Anything else is a bug and keeps its
traceback.
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Iterator
from pathlib import Path

from klaw.disk_trouble import FULL_ERRNOS, READ_ONLY_ERRNOS, disk_trouble, full_words, permission_words, read_only_words

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


def _damaged(home_root: Path, what: str) -> str:
    return (
        f"a database in {home_root} is damaged ({what}). The conversation log holds everything klaw.db had:"
        " run `klaw reindex` to rebuild it (or move a damaged scheduler.db aside: its tasks are listed in"
        " it only)."
    )


def _apsw_words(exc: BaseException, home_root: Path) -> str | None:
    apsw = sys.modules.get("apsw")
    if apsw is None or not isinstance(exc, apsw.Error):
        return None
    if isinstance(exc, apsw.FullError):
        return full_words(home_root)
    if isinstance(exc, apsw.ReadOnlyError):
        return disk_trouble(home_root) or read_only_words(home_root)
    if isinstance(exc, (apsw.CorruptError, apsw.NotADBError)):
        return _damaged(home_root, str(exc))
    if isinstance(exc, (apsw.CantOpenError, apsw.IOError)):
        return disk_trouble(home_root)
    return None


def _sqlite3_words(exc: BaseException, home_root: Path) -> str | None:
    sqlite3 = sys.modules.get("sqlite3")
    if sqlite3 is None or not isinstance(exc, sqlite3.Error):
        return None
    text = str(exc)
    if "full" in text:
        return full_words(home_root)
    if "malformed" in text or "not a database" in text:
        return _damaged(home_root, text)
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
