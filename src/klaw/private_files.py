"""Creating what klaw keeps so that only its owner can use it (folders 0700, files 0600), whatever the
process's umask, without changing it.

The umask belongs to the process, and in a program using klaw as a library to that program, whose
own files are its business: klaw may not set it (decision 237). So every place klaw creates a file or
folder goes through here. A mode given at creation is filtered by the umask, which can only take bits
away, so 0600 and 0700 stay private under any umask. Three traps this avoids: pathlib's
`mkdir(parents=True)` makes the missing parents with the umask's default (0755 under 022);
`write_text`, `open(..., "w")` and logging's file handlers create with 0666 & ~umask; SQLite creates
a new database 0644 & ~umask, and gives the -wal, -shm and -journal files it makes later the main
file's mode, so a database created empty at 0600 before SQLite opens it keeps all of them private.
Imports nothing else of klaw.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import IO, Any

DIRECTORY_MODE = 0o700
FILE_MODE = 0o600
CHILD_UMASK = 0o077  # for the programs klaw starts in the workspace (set in the child only: bounded_process)


def private_dirs(path: Path) -> None:
    """`path` and each missing folder above it created 0700; folders already there are left as they are
    (tightening an existing home is `home_privacy.make_private`'s job, at start)."""
    missing: list[Path] = []
    current = path
    while not current.is_dir() and current != current.parent:
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, DIRECTORY_MODE)
        except FileExistsError:  # made meanwhile (another thread or process), or a file is in the way
            if not directory.is_dir():
                raise


def private_dir_at(name: str, parent: int) -> None:
    """The folder `name` made 0700 inside the folder open as descriptor `parent` (FileExistsError when
    something is there): how the workspace tools create folders beneath the workspace (decision 243)."""
    os.mkdir(name, DIRECTORY_MODE, dir_fd=parent)


def open_private(path: Path, flags: int) -> int:
    """`os.open(path, flags)`, creating the file 0600 if it is missing (its folder must exist)."""
    return os.open(path, flags | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)


def write_private(path: Path, data: bytes) -> None:
    """`path` holding `data`, created 0600 with its folders 0700 if missing (an existing file keeps its
    mode). Not atomic: for files written once whole (templates); `atomic_file.replace_file` otherwise."""
    private_dirs(path.parent)
    descriptor = open_private(path, os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(data)


def create_private(path: Path) -> None:
    """An empty 0600 file at `path` (folders 0700) unless one is there, for a writer that opens files by
    name without a mode and keeps the mode it finds: SQLite (an empty file is a new database, and its
    -wal/-shm/-journal files get its mode), prompt_toolkit's history (appends)."""
    private_dirs(path.parent)
    with contextlib.suppress(FileExistsError):  # an existing file is the writer's to open (or refuse)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE))


_OPEN_FLAGS = {"w": os.O_WRONLY | os.O_TRUNC, "a": os.O_WRONLY | os.O_APPEND, "x": os.O_WRONLY | os.O_EXCL}


def private_open(path: Path | str, mode: str = "w", *, encoding: str | None = "utf-8") -> IO[Any]:
    """`open(path, mode)` for writing ("w", "a" or "x", with "b" for bytes, "+" to read too) that creates a
    missing file 0600 and missing folders 0700 whatever the umask, as klaw's own file tools do: exported for
    a plugin's tool writing in the workspace (docs/library.md), where `open` made a file 0644 under umask 022
    (newcomer21, decision 502). An existing file keeps its mode: the person may have opened it on purpose."""
    kind = mode.replace("b", "").replace("+", "")
    if kind not in _OPEN_FLAGS or len(mode) != len(set(mode)) or set(mode) - set("wax+b"):
        raise ValueError(f"private_open writes: mode {mode!r} is not one of 'w', 'a', 'x' (with 'b', '+')")
    flags = _OPEN_FLAGS[kind]
    if "+" in mode:
        flags = flags & ~os.O_WRONLY | os.O_RDWR
    target = Path(path)
    private_dirs(target.parent)
    descriptor = open_private(target, flags)
    if "b" in mode:
        return os.fdopen(descriptor, mode)
    return os.fdopen(descriptor, mode, encoding=encoding)
