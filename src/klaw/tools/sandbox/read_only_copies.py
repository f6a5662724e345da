"""Private copies of a run's read-only workspace files (the prompt files, skills/): what a backend binds over them.

A bind mount names its source by path, and the sandbox tool resolves that path when it mounts, following
whatever stands at that name then. Code running meanwhile in a second sandbox shares the workspace and can
swap a prompt file for a symlink leading out (`../web_token`); even bubblewrap's `--ro-bind-fd` turns the
descriptor back into a path (Debian's 0.8.0 at once, when it reads its arguments) and mounts the path, and
its check afterwards (the destination's inode against the descriptor's) misses the mount when the
destination was a symlink too: bwrap first creates the file the symlink names (`/web_token` in the
sandbox's own root), mounts onto it, then finds the real file back in place by the time it checks
(decision 283). So no source here lies in the workspace: each file is opened beneath it (tools/beneath.py),
copied from that descriptor into a folder of klaw's own (0700, removed after the run) and the copy is
bound. Whatever is swapped meanwhile, what any mount shows is a copy of a file klaw checked; a swap can at
worst move where the copy lands inside the sandbox, never show what lies outside the workspace.

A prompt file the person deleted is covered too: else code could create it, and its text would go into
every later system prompt. An empty placeholder is made at its name beneath the workspace (O_EXCL, 0600)
and an empty copy bound over it; after the run the placeholder is removed if it is still that empty
file. Runs at once share one placeholder (counted here), removed by the last: unlinking it while another
run has it as a mount point would lift that mount, and that run's code could then create the file.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import threading
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from klaw.private_files import private_dirs
from klaw.tools.beneath import open_directory, walk
from klaw.tools.calls import ToolRefusal
from klaw.tools.sandbox.backend import SANDBOX_WORKSPACE, Job

MAX_ENTRIES = 2000  # files, folders and links copied for one run: skills hold a few files each
MAX_BYTES = 64 * 1024 * 1024
MAX_DEPTH = 32
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO swapped in does not hang the copy
_CHUNK = 1024 * 1024


_Key = tuple[int, int, str]  # the workspace's device and inode, a prompt file's name in it
_PLACEHOLDERS: dict[_Key, list[int]] = {}  # placeholder's device, inode, runs holding it
_PLACEHOLDERS_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class ReadOnlyCopies:
    """The copies made for one run: `binds` (private copy, path inside the sandbox); `remove` after the
    run (it also removes the placeholders of missing prompt files this run was the last to hold)."""

    folder: Path | None
    binds: list[tuple[Path, str]]
    workspace: Path | None = None
    placeholders: tuple[_Key, ...] = ()

    def remove(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
        if self.workspace is not None:
            _release(self.workspace, self.placeholders)


def copy_read_only(job: Job) -> ReadOnlyCopies:
    """A private copy of each of `job.read_only` that exists beneath the workspace as a regular file (a
    folder for a name ending in "/"), a symlink inside followed, one leading out left alone. ToolRefusal
    when a folder holds more than MAX_ENTRIES entries or MAX_BYTES bytes, or is nested too deep."""
    if not job.read_only:
        return ReadOnlyCopies(None, [])
    folder = Path(tempfile.mkdtemp(prefix="klaw-read-only-"))  # 0700, a fresh name: nothing else writes there
    workspace = job.workspace.resolve()
    held: list[_Key] = []
    try:
        return ReadOnlyCopies(folder, _copy_all(job, workspace, folder, held), workspace, tuple(held))
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        _release(workspace, held)
        raise


def _copy_all(job: Job, root_path: Path, stage: Path, held: list[_Key]) -> list[tuple[Path, str]]:
    root = open_directory(root_path)
    budget = _Budget()
    copies = []
    try:
        for number, entry in enumerate(job.read_only):
            name = entry.rstrip("/")
            if not entry.endswith("/") and "/" not in name and (key := _hold_placeholder(root, name)):
                held.append(key)  # was missing: now an empty file klaw made, copied and bound below
            fd = _open_beneath(root, root_path, name, folder=entry.endswith("/"))
            if fd is None:
                continue
            copy = stage / str(number)
            try:
                if entry.endswith("/"):
                    private_dirs(copy)
                    _copy_folder(fd, copy, budget, entry)
                else:
                    _copy_file(fd, copy, budget, entry)
            finally:
                os.close(fd)
            copies.append((copy, f"{SANDBOX_WORKSPACE}/{name}"))
    finally:
        os.close(root)
    return copies


def _open_beneath(root: int, root_path: Path, name: str, *, folder: bool) -> int | None:
    """`name` opened beneath `root` if it is a regular file there (a folder other than the workspace
    when `folder`); None when missing, leading out, or not of that kind."""
    try:
        found = walk(root, root_path, name)
        try:
            fd = found.open(os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_DIRECTORY if folder else 0))
        finally:
            found.close()
    except OSError:  # missing, outside (PermissionError), a loop of links, not a folder
        return None
    opened, workspace = os.fstat(fd), os.fstat(root)
    is_workspace = (opened.st_dev, opened.st_ino) == (workspace.st_dev, workspace.st_ino)
    if not (stat.S_ISDIR(opened.st_mode) and not is_workspace if folder else stat.S_ISREG(opened.st_mode)):
        os.close(fd)
        return None
    return fd


def _hold_placeholder(root: int, name: str) -> _Key | None:
    """The placeholder at `name` in the workspace open as `root` when the prompt file is missing there
    (made now, O_EXCL) or is one another run holds; None when something else stands there."""
    workspace = os.fstat(root)
    key = (workspace.st_dev, workspace.st_ino, name)
    with _PLACEHOLDERS_LOCK:
        if (holding := _PLACEHOLDERS.get(key)) is not None:
            holding[2] += 1
            return key
        try:  # O_EXCL with O_CREAT follows no symlink: one there is "exists", judged by the caller
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=root)
        except OSError:
            return None
        made = os.fstat(fd)
        os.close(fd)
        _PLACEHOLDERS[key] = [made.st_dev, made.st_ino, 1]
        return key


def _release(workspace: Path, keys: list[_Key] | tuple[_Key, ...]) -> None:
    """Let go of `keys`; a placeholder no run holds any more is removed if it is still the empty regular
    file klaw made (never a file the person put there meanwhile)."""
    with _PLACEHOLDERS_LOCK:
        for key in keys:
            holding = _PLACEHOLDERS[key]
            holding[2] -= 1
            if holding[2] > 0:
                continue
            del _PLACEHOLDERS[key]
            with suppress(OSError):
                root = open_directory(workspace)
                try:
                    info = os.stat(key[2], dir_fd=root, follow_symlinks=False)
                    ours = (info.st_dev, info.st_ino) == (holding[0], holding[1])
                    if ours and stat.S_ISREG(info.st_mode) and info.st_size == 0:
                        os.unlink(key[2], dir_fd=root)
                finally:
                    os.close(root)


@dataclass(slots=True)
class _Budget:
    entries: int = 0
    bytes: int = 0

    def take(self, name: str, size: int = 0) -> None:
        self.entries += 1
        self.bytes += size
        if self.entries > MAX_ENTRIES or self.bytes > MAX_BYTES:
            raise ToolRefusal(
                f"the code did not run: {name} is copied read-only into each run, and it holds more than"
                f" {MAX_ENTRIES} entries or {MAX_BYTES // (1024 * 1024)} MiB; move large files out of it"
            )


def _copy_file(fd: int, copy: Path, budget: _Budget, name: str) -> None:
    """The regular file open at `fd` copied to `copy` (0600, 0700 when it was executable), at most the
    size it had when opened (one growing meanwhile is cut there)."""
    info = os.fstat(fd)
    budget.take(name, info.st_size)
    mode = 0o700 if info.st_mode & 0o111 else 0o600
    out = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        left = info.st_size
        while left > 0 and (chunk := os.read(fd, min(left, _CHUNK))):
            left -= len(chunk)
            while chunk:
                chunk = chunk[os.write(out, chunk) :]
    finally:
        os.close(out)


def _copy_folder(fd: int, copy: Path, budget: _Budget, name: str, depth: int = 0) -> None:
    """The folder open at `fd` copied into the existing `copy`, one entry at a time relative to the
    descriptors held (O_NOFOLLOW): symlinks are copied as symlinks (inside the sandbox they lead where
    their target names there, never to the host), other kinds (FIFOs, sockets, devices) left out."""
    if depth > MAX_DEPTH:
        raise ToolRefusal(
            f"the code did not run: {name} is copied read-only into each run, and it has folders nested more"
            f" than {MAX_DEPTH} deep; move them out of it"
        )
    for entry in sorted(os.listdir(fd)):
        target = copy / entry
        try:
            child = os.open(entry, _READ, dir_fd=fd)
        except OSError:  # a symlink (ELOOP), gone meanwhile, unreadable
            with suppress(OSError):
                link = os.readlink(entry, dir_fd=fd)
                budget.take(name)
                os.symlink(link, target)
            continue
        try:
            kind = os.fstat(child).st_mode
            if stat.S_ISDIR(kind):
                budget.take(name)
                private_dirs(target)
                _copy_folder(child, target, budget, name, depth + 1)
            elif stat.S_ISREG(kind):
                _copy_file(child, target, budget, name)
        finally:
            os.close(child)
