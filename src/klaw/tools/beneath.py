"""Open a path beneath a directory with no window between checking where it leads and opening it.

Resolving a path to a string, checking the string is inside the workspace, then opening the string
is a race: `code_execute` runs code with the workspace mounted, and that code can swap a folder for
a symlink to elsewhere (`renameat2(RENAME_EXCHANGE)` in a loop) between the check and the open. So
nothing here opens a path string: each component is opened relative to the descriptor of the folder
above it, with O_NOFOLLOW, and a symlink met on the way is read (`readlink` relative to that
descriptor) and its target walked the same way, from the descriptors already held. `..` pops a
descriptor this walk opened itself; popping past the root, or a symlink with an absolute target not
under the root's path, PermissionError. Whatever is swapped meanwhile, every descriptor opened is of a
directory reached beneath the root, so a symlink inside pointing inside still works (the promise of
docs/tools.md) and nothing outside can be reached. Decision: docs/decisions/243-workspace-paths-opened-beneath.md.
"""

from __future__ import annotations

import errno
import os
from collections import deque
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

from klaw.errors import KlawError
from klaw.private_files import FILE_MODE, private_dir_at

MAX_SYMLINKS = 40  # as the kernel's own limit: a loop of links ends in a clear refusal
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_directory(resolved: Path) -> int:
    """A descriptor of the absolute, already resolved folder `resolved`, opened from `/` one component
    at a time with O_NOFOLLOW: a component swapped for a symlink since it was resolved is refused
    (NotADirectoryError) rather than followed. The caller closes it."""
    fd = os.open("/", _DIRECTORY)
    try:
        for part in resolved.parts[1:]:
            try:
                child = os.open(part, _DIRECTORY, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise NotADirectoryError(f"{resolved} is no longer a folder (a symlink now?)") from None
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


@dataclass
class Walk:
    """Where a path leads beneath `root` (a descriptor the caller owns): `parent`, a descriptor of the
    folder holding the last component (owned by the walk: `close` it), `name` that component ("."
    for the root itself) and `shown`, the path relative to the root as really reached."""

    root: int
    root_path: str
    given: str
    make: bool = False  # missing folders made (0700) on the way
    # called with the walk and the folder's name before one is made: raises to refuse (a protected folder)
    before_make: Callable[[Walk, str], None] | None = None
    stack: list[tuple[int, str]] = field(default_factory=list)
    name: str = "."

    @property
    def parent(self) -> int:
        return self.stack[-1][0] if self.stack else self.root

    @property
    def shown(self) -> str:
        parts = [name for _, name in self.stack]
        if self.name != ".":
            parts.append(self.name)
        return "/".join(parts) or "."

    def at_root(self) -> bool:
        """Whether the last component's folder is the root itself (by identity, not by name)."""
        mine, root = os.fstat(self.parent), os.fstat(self.root)
        return (mine.st_dev, mine.st_ino) == (root.st_dev, root.st_ino)

    def open(self, flags: int, mode: int = FILE_MODE) -> int:
        """The last component opened with `flags` (O_NOFOLLOW added); a symlink there is followed
        beneath the root as any other. The caller closes the descriptor."""
        for _ in range(MAX_SYMLINKS + 1):
            try:
                return os.open(self.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=self.parent)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.EMLINK, errno.ENOTDIR) or self.name == ".":
                    raise
                target = _link(self.name, self.parent)
                if target is None:
                    raise
            self._follow(target, deque())
        raise OSError(errno.ELOOP, f"{self.given!r} goes through too many symlinks")

    def close(self) -> None:
        while self.stack:
            os.close(self.stack.pop()[0])

    def _follow(self, target: str, pending: deque[str]) -> None:
        """Walk the symlink `target` (met at `self.name` in the current folder), then `pending`."""
        self.name = "."
        self._walk(deque(self._jump(target)) + pending)

    def _jump(self, target: str) -> list[str]:
        """The components of a symlink's `target` to walk next: a relative one from the current
        folder, an absolute one from the root (the descriptors above dropped), if it names a place
        under the root's path; PermissionError otherwise."""
        if os.path.isabs(target):
            if not _under(target, self.root_path):
                raise Outside(_outside(self.given))
            self.close()
            target = os.path.relpath(target, self.root_path)
        return _parts(target)

    def _walk(self, pending: deque[str]) -> None:
        hops = remade = 0  # symlinks followed; times the folder being made vanished again before it was opened
        while pending:
            part = pending.popleft()
            if part == "..":
                if not self.stack:
                    raise Outside(_outside(self.given))
                os.close(self.stack.pop()[0])
                continue
            if not pending:
                self.name = part
                return
            try:
                fd = os.open(part, _DIRECTORY, dir_fd=self.parent)
            except FileNotFoundError:
                remade += 1  # a folder made is not a symlink hop: only a folder removed as fast as made ends it
                if not self.make or remade > MAX_SYMLINKS:
                    raise
                if self.before_make is not None:
                    self.before_make(self, part)
                with suppress(FileExistsError):  # made meanwhile: opened (or judged) just below
                    private_dir_at(part, self.parent)
                pending.appendleft(part)
                continue
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                target = _link(part, self.parent)
                if target is None:  # a file where a folder should be
                    raise FileNotFoundError(errno.ENOENT, f"{part!r} is not a folder") from None
                hops += 1
                if hops > MAX_SYMLINKS:
                    raise OSError(errno.ELOOP, f"{self.given!r} goes through too many symlinks") from None
                pending.extendleft(reversed(self._jump(target)))
                continue
            self.stack.append((fd, part))
            remade = 0
        self.name = "."


def walk(
    root: int,
    root_path: Path,
    path: str,
    *,
    make_folders: bool = False,
    before_make: Callable[[Walk, str], None] | None = None,
) -> Walk:
    """Walk `path` (relative to the root, or absolute under `root_path`) to its last component,
    making missing folders 0700 when `make_folders` (`before_make(walk, name)` first, which may raise
    to refuse); PermissionError when it leads out. Close the walk."""
    given = path
    if os.path.isabs(path):
        if not _under(path, str(root_path)):
            raise Outside(_outside(given))
        path = os.path.relpath(path, root_path)
    found = Walk(root, str(root_path), given, make_folders, before_make)
    try:
        found._walk(deque(_parts(path)))
    except BaseException:
        found.close()
        raise
    return found


def _link(name: str, parent: int) -> str | None:
    """The target of the symlink `name` in `parent`, or None when it is not a symlink."""
    try:
        return os.readlink(name, dir_fd=parent)
    except OSError:
        return None


def _parts(path: str) -> list[str]:
    return [part for part in path.split("/") if part not in ("", ".")]


def _under(path: str, root: str) -> bool:
    normal = os.path.normpath(path)
    return normal == root or normal.startswith(root.rstrip("/") + "/")


class Outside(KlawError, PermissionError):
    """A path leading out of the root: a refusal by design (its message says so and what to use
    instead), which a tool hands to the model as it is, unlike the system's own PermissionError."""


def _outside(given: str) -> str:
    return f"{given!r} is outside the workspace; use a path relative to the workspace"
