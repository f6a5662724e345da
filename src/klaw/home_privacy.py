"""Nobody but its owner may read what klaw keeps: directories 0700, files 0600, whatever the umask.

Everything under KLAW_HOME holds private text (conversations, memories, the web token, the buffer of
messages not yet stored). Each writer of klaw creates its files private by itself (`klaw/private_files.py`,
decision 237), so a program using klaw as a library keeps its own umask. The `klaw` command also sets
its umask to 0o077 before anything runs (`restrict_umask`, decision 050): a second line for files
created by code klaw runs but does not write.

A home made by an older klaw, by hand, or by a library program before decision 237 may already be
readable by others: `make_private` tightens it when every command starts (saying what it changed) and
when `Klaw(home)` starts (a logged warning). The whole home is walked once (`.private-walk` records it,
with `WALK`), again only when its folder itself was open to others (anything beneath may have been
changed then) or `WALK` moves on (a writer found leaving files others could read); other starts check
the home's folder and its own entries (engine.yaml rewritten by an editor, service.env): a file copied
in deeper is out of others' reach while the home is 0700. The walk cost 2.3 s of a 4.8 s start at 3,000
chats, two files a chat (decision 486). It leaves alone symlinks (chmod would follow them out of
the home), paths owned by another user, and what is inside the workspace: those are the person's own
files, perhaps hard links to files elsewhere whose mode is not ours to change (the home itself being
0700 keeps them from other users).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from klaw.atomic_file import replace_file
from klaw.home import KlawHome

PRIVATE_UMASK = 0o077
_OTHERS = 0o077
# What `.private-walk` holds once the whole home was walked: a number moved on when a writer is found
# that left files others could read, so every home is walked once more (decision 486).
WALK = b"klaw private walk 1\n"


def restrict_umask() -> None:
    """From now on this process creates directories 0700 and files 0600 (unless a caller asks for less)."""
    os.umask(PRIVATE_UMASK)


def make_private(home: KlawHome, extra: Iterable[Path] = ()) -> list[Path]:
    """Remove group and other permissions from the home and what klaw keeps in it (and `extra`); the paths
    changed, for a warning. Never a database.path outside the home: it may be another program's (decision 478)."""
    if not home.root.is_dir():
        return []
    changed = _tighten(home.root)
    if changed or not _walked(home.privacy_walk_file):
        changed += _walk(home)
        with contextlib.suppress(OSError):  # a read-only home: walked again next time
            replace_file(home.privacy_walk_file, WALK)  # renamed over whatever is there (a FIFO, a link)
    else:
        changed += _own_entries(home)
    for path in extra:
        if not path.is_relative_to(home.root):
            changed += _tighten(path)
    return changed


def _walk(home: KlawHome) -> list[Path]:
    """Every path under the home but its folder (tightened first) and the workspace's contents."""
    changed: list[Path] = []
    workspace = home.workspace
    for directory, subdirectories, files in os.walk(home.root):
        here = Path(directory)
        if here == workspace:
            subdirectories.clear()  # the person's files: see the module docstring
            files = []
        if here != home.root:
            changed += _tighten(here)
        changed += [path for name in files for path in _tighten(here / name)]
    return changed


def _own_entries(home: KlawHome) -> list[Path]:
    """The home's own entries (files and folders, not what the folders hold)."""
    try:
        with os.scandir(home.root) as entries:
            names = [entry.name for entry in entries]
    except OSError:
        return []
    return [path for name in names for path in _tighten(home.root / name)]


def _walked(marker: Path) -> bool:
    """Whether the whole home was walked with this `WALK`: the marker a private regular file of ours
    holding it (one others could have written is not believed)."""
    try:
        descriptor = os.open(marker, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    with os.fdopen(descriptor, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & _OTHERS:
            return False
        return handle.read(len(WALK) + 1) == WALK


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
