"""Every entry under a folder, however deep: the walk the workspace's quotas count (disk_room.usage, names).

Each folder is entered by a descriptor and the name in it (`openat`, `O_NOFOLLOW`), never by a path string,
so no path length applies (adversary13). Only the folder being listed is held open (and the top): a folder's
subfolders are noted while it is listed, and the walk comes back up by its `..`, checked to be the folder it
left (same device and inode). So depth costs neither descriptors nor recursion: the earlier walk held two
descriptors per level and gave up past 200 levels, and a run writing 210 folders deep was never counted
(adversary23: 116 MiB against a 20 MiB quota). A folder moved elsewhere meanwhile is found again from the
top by its names; what vanished is skipped (the next count finds it where it went). A folder that cannot be
entered (no permission) is named in `unreadable`, never skipped in silence.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

MAX_UNREADABLE_NAMED = 3
_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NONBLOCK

Identity = tuple[int, int]  # (st_dev, st_ino)


class Walk:
    """Iterating yields each entry under `top` (files, folders, symlinks; symlinks not followed), while its
    folder is open, so `entry.stat(follow_symlinks=False)` works on it; `note` names an entry of the folder
    being listed as one klaw could not look at. Blocking."""

    def __init__(self, top: Path, max_depth: int | None = None) -> None:
        self.top = top
        self.max_depth = max_depth  # folders this many levels below the top are listed, not entered
        self.unreadable: list[str] = []
        self.too_deep = 0  # folders left unlisted by `max_depth`
        self.here = -1  # the folder being listed, open: for `*at` calls on its entries
        self._names: list[str] = []  # the folders from the top down to the one being listed

    @property
    def depth(self) -> int:
        """How many folders below the top the folder being listed is (0: the top)."""
        return len(self._names)

    def path(self, name: str) -> str:
        """`name`, an entry of the folder being listed, as a path below the top."""
        return "/".join([*self._names, name])

    def note(self, name: str, why: str) -> None:
        """`name` (an entry of the folder being listed; "" for that folder) could not be looked into."""
        if len(self.unreadable) < MAX_UNREADABLE_NAMED:
            path = "/".join([*self._names, name] if name else self._names) or "."
            shown = path if len(path) <= 120 else f"{path[:60]}…{path[-59:]}"
            self.unreadable.append(f"{shown} ({why})")

    def __iter__(self) -> Iterator[os.DirEntry[str]]:
        try:
            top = os.open(self.top, _FOLDER)
        except FileNotFoundError:
            return
        except OSError:
            self.note("", "no permission to list it")
            return
        here: int | None = os.dup(top)
        levels: list[tuple[Identity, list[str]]] = []  # each open folder's identity and subfolders left
        try:
            while here is not None:
                subfolders: list[str] = []
                self.here = here
                yield from self._listing(here, subfolders)
                if self.max_depth is not None and len(self._names) >= self.max_depth:
                    self.too_deep += len(subfolders)
                    subfolders = []
                levels.append((_identity(here), subfolders))
                here = self._next(here, levels, top)
        finally:
            if here is not None:
                os.close(here)
            os.close(top)

    def _listing(self, folder: int, subfolders: list[str]) -> Iterator[os.DirEntry[str]]:
        try:
            listing = os.scandir(folder)
        except OSError:
            self.note("", "no permission to list it")
            return
        with listing:
            for entry in listing:
                yield entry
                try:
                    if entry.is_dir(follow_symlinks=False):
                        subfolders.append(entry.name)
                except OSError:
                    continue

    def _next(self, here: int, levels: list[tuple[Identity, list[str]]], top: int) -> int | None:
        """The next folder to list, opened (`here`, the last level's folder, closed), or None at the end."""
        while True:
            subfolders = levels[-1][1]
            while subfolders:
                name = subfolders.pop()
                inner = self._enter(here, name)
                if inner is not None:
                    os.close(here)
                    self._names.append(name)
                    return inner
            levels.pop()
            if not levels:
                os.close(here)
                return None
            self._names.pop()
            here = self._up(here, levels, top)

    def _enter(self, parent: int, name: str) -> int | None:
        try:
            return os.open(name, _FOLDER | os.O_NOFOLLOW, dir_fd=parent)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno in (errno.ENOTDIR, errno.ELOOP):  # swapped for a file or symlink meanwhile: counted as listed
                return None
            self.note(name, "no permission to list it")
            return None

    def _up(self, here: int, levels: list[tuple[Identity, list[str]]], top: int) -> int:
        """The folder of the last level, by `..` of `here` (closed) if it is still that one, else from the top."""
        try:
            parent: int | None = os.open("..", _FOLDER, dir_fd=here)
        except OSError:
            parent = None
        os.close(here)
        if parent is not None and _identity(parent) == levels[-1][0]:
            return parent
        if parent is not None:
            os.close(parent)
        return self._refound(levels, top)

    def _refound(self, levels: list[tuple[Identity, list[str]]], top: int) -> int:
        """The deepest folder of `levels` still reached from the top by its names (each checked to be the one
        listed); the levels below it are dropped: they moved or vanished."""
        here = os.dup(top)
        for depth, name in enumerate(list(self._names)):
            inner: int | None
            try:
                inner = os.open(name, _FOLDER | os.O_NOFOLLOW, dir_fd=here)
            except OSError:
                inner = None
            if inner is not None and _identity(inner) != levels[depth + 1][0]:
                os.close(inner)
                inner = None
            if inner is None:
                del levels[depth + 1 :]
                del self._names[depth:]
                return here
            os.close(here)
            here = inner
        return here


def _identity(folder: int) -> Identity:
    info = os.fstat(folder)
    return info.st_dev, info.st_ino
