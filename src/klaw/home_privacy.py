"""Nobody but its owner may read what klaw keeps: directories 0700, files 0600, whatever the umask.

Everything under KLAW_HOME holds private text (conversations, memories, the web token, the buffer of
messages not yet stored). Each writer of klaw creates its files private by itself (`klaw/private_files.py`,
decision 237), so a program using klaw as a library keeps its own umask. The `klaw` command also sets
its umask to 0o077 before anything runs (`restrict_umask`, decision 050): a second line for files
created by code klaw runs but does not write.

A home made by an older klaw, by hand, or by a library program before decision 237 may already be
readable by others: `make_private` tightens it when every command starts (saying what it changed) and
when `Klaw(home)` starts (a logged warning). It leaves alone symlinks (chmod would follow them out of
the home), paths owned by another user, and what is inside the workspace: those are the person's own
files, perhaps hard links to files elsewhere whose mode is not ours to change (the home itself being
0700 keeps them from other users).
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
    """Remove group and other permissions from the home and what klaw keeps in it (and `extra`); the paths
    changed, for a warning. Never a database.path outside the home: it may be another program's (decision 478)."""
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


def describe_changes(changed: list[Path]) -> str:
    """The warning's words for the paths `make_private` tightened: how many, the first three."""
    shown = ", ".join(str(path) for path in changed[:3]) + (", …" if len(changed) > 3 else "")
    return (
        f"other users could read {len(changed)} path(s) klaw keeps ({shown});"
        " made them private (directories 0700, files 0600)"
    )


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
