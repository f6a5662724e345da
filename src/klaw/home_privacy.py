"""Nobody but its owner may read what klaw keeps: directories 0700, files 0600, whatever the umask.

Everything under KLAW_HOME holds private text (conversations, memories, the web token, the buffer of
messages not yet stored), and many writers create files there: our own code, SQLite (klaw.db and its
-wal/-shm, scheduler.db, reindex's side files), prompt_toolkit (chat history), temporary files. Giving
each call a mode would miss the next writer, so the rule is one process-wide umask of 0o077, set by the
`klaw` command before anything runs (`restrict_umask`): whatever is created afterwards, by whom, is
private. Library users (tests, embedding klaw) own their process's umask.

A home made by an older klaw, or by hand, may already be readable by others: `make_private` tightens
it at every command's start and says what it changed. It leaves alone symlinks (chmod would follow
them out of the home), paths owned by another user, and what is inside the workspace: those are the
person's own files, perhaps hard links to files elsewhere whose mode is not ours to change (the home
itself being 0700 keeps them from other users). Why one umask: docs/decisions/050-private-by-umask.md.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path

from klaw.home import KlawHome

PRIVATE_UMASK = 0o077
_OTHERS = 0o077


def restrict_umask() -> None:
    """From now on this process creates directories 0700 and files 0600 (unless a caller asks for less)."""
    os.umask(PRIVATE_UMASK)


def make_private(home: KlawHome, extra: Iterable[Path] = ()) -> list[Path]:
    """Remove group and other permissions from the home and what klaw keeps in it (and `extra`, e.g. a
    database outside the home with its -wal/-shm); the paths changed, for a warning."""
    changed: list[Path] = []
    if not home.root.is_dir():
        return changed
    workspace = home.workspace
    for directory, subdirectories, files in os.walk(home.root):
        here = Path(directory)
        if here == workspace:
            subdirectories.clear()  # the person's files: see the module docstring
            files = []
        changed += _tighten(here)
        changed += [path for name in files for path in _tighten(here / name)]
    for path in extra:
        if not path.is_relative_to(home.root):
            changed += _tighten(path)
    return changed


def _tighten(path: Path) -> list[Path]:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return []
    if stat.S_ISLNK(info.st_mode) or info.st_uid != os.getuid() or not info.st_mode & _OTHERS:
        return []
    try:
        os.chmod(path, stat.S_IMODE(info.st_mode) & ~_OTHERS)  # not a symlink: checked just above
    except OSError:
        return []  # vanished meanwhile, or a file system without modes: nothing to say
    return [path]
