"""How much a tool may still write: the workspace's quotas and the free space klaw keeps for itself.

The workspace (`KLAW_HOME/workspace`) usually sits on the disk that holds klaw.db and the conversation
log. A program the agent runs, or a model looping on `file_write`, could fill that disk, and then no
chat could be written any more. So every tool write is bounded three ways (decisions 327 and 361):

* the workspace's **quota** (`tools.workspaceQuotaMb`): what all its files and folders take on disk
  (allocated blocks, as `du` counts them: a sparse file counts what it really holds, a file of several
  hard-linked names once);
* its **file quota** (`tools.workspaceQuotaFiles`): how many files, folders and symlinks it holds (an
  inode each, a hard-linked file once), so that empty files, which take no blocks, cannot use up the
  disk's inodes instead;
* the **free-space floor** (`tools.diskFloorMb`): a write that would leave less free on the workspace's
  file system is refused, so klaw's own files always have room.

Measuring the workspace walks it (`usage`, blocking: call it in a thread); the free space and the free
inodes are one `statvfs`, cheap enough to ask several times a second while a sandbox run goes on
(sandbox/disk_watch.py). The answers are sentences for the model: what used how much, the limit, and
what to do.
"""

from __future__ import annotations

import asyncio
import os
import stat
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from klaw.config import ToolsConfig
from klaw.disk_trouble import mount_point
from klaw.private_files import private_dirs
from klaw.tools.workspace_walk import Walk

MIB = 1024 * 1024


class Usage(NamedTuple):
    """What the workspace holds: `bytes` of allocated blocks, `files` (files, folders, symlinks), and the
    folders that could not be looked into (`unreadable`, each with why), whose content is unknown."""

    bytes: int
    files: int
    unreadable: tuple[str, ...] = ()


class Names(NamedTuple):
    """How many names the workspace's folders list (`found`), and the folders that could not be listed."""

    found: int
    unreadable: tuple[str, ...] = ()


class Free(NamedTuple):
    """What its file system has free for an unprivileged writer: `bytes`, and `inodes` (None: the file
    system does not count them, as btrfs, which makes inodes as it needs them)."""

    bytes: int
    inodes: int | None


@dataclass(frozen=True, slots=True)
class DiskRoom:
    """The bounds of every tool write, in bytes and files; from `tools:` in engine.yaml."""

    quota_bytes: int
    floor_bytes: int
    quota_files: int = 100_000

    @classmethod
    def from_config(cls, config: ToolsConfig) -> DiskRoom:
        return cls(
            quota_bytes=config.workspace_quota_mb * MIB,
            floor_bytes=config.disk_floor_mb * MIB,
            quota_files=config.workspace_quota_files,
        )

    def measure(self, workspace: Path) -> Room:
        """What the workspace holds and its disk has free now. Blocking: it walks the workspace. A missing
        workspace (a home `klaw init` never set up) is made first, as the write or run measured would make it:
        measuring none raised FileNotFoundError, which file_write's model saw as "tool raised" (webhost)."""
        private_dirs(workspace)
        return self.holding(workspace, usage(workspace))

    def holding(self, workspace: Path, held: Usage) -> Room:
        """The room with `held` counted already (by the walk after a sandbox run, decision 536) and the disk's
        free space read now."""
        disk = free_space(workspace)
        return Room(self, workspace, held.bytes, disk.bytes, held.files, disk.inodes, held.unreadable)


@dataclass(frozen=True, slots=True)
class Room:
    """One measurement: `used` bytes and `files` in the workspace, `free` bytes and `free_inodes` on its
    file system, against `limits`; `unreadable`: folders the walk could not look into (what they hold is
    unknown, so it counts as over the quotas)."""

    limits: DiskRoom
    workspace: Path
    used: int
    free: int
    files: int = 0
    free_inodes: int | None = None
    unreadable: tuple[str, ...] = ()

    @property
    def may_add(self) -> int:
        """The most bytes a write may add now (0 or less: none). 0 while a folder cannot be looked into:
        what the workspace holds is then unknown, so nothing is allowed beyond what is known (decision 440)."""
        if self.unreadable:
            return 0
        return min(self.limits.quota_bytes - self.used, self.free - self.limits.floor_bytes)

    def over(self) -> str | None:
        """Which bound is passed now, in words (None: none)."""
        if self.unreadable:
            return self.blind_words()
        if self.used > self.limits.quota_bytes:
            return self.quota_words()
        if self.files > self.limits.quota_files:
            return self.files_words()
        if self.free < self.limits.floor_bytes:
            return self.floor_words()
        return None

    def refusal(self, adding: int, new_files: int = 0, needs: int | None = None) -> str | None:
        """Why a write adding `adding` bytes (its net change: a replaced file's blocks are freed) and
        `new_files` files or folders may not happen (None: it may). A write that adds nothing, or frees
        room, is not refused by the quotas, even over them: it is how the workspace gets back under them.
        `needs`: the bytes it must have free meanwhile (a replacement written beside the old file before
        it is renamed over it, decision 371), judged against the floor; `adding` when not given."""
        floor_needs = adding if needs is None else needs
        if self.unreadable and (adding > 0 or new_files > 0):
            return self.blind_words()
        if adding > 0 and self.used + adding > self.limits.quota_bytes:
            return self.quota_words(adding)
        if new_files > 0 and self.files + new_files > self.limits.quota_files:
            return self.files_words(new_files)
        if floor_needs > 0 and self.free - floor_needs < self.limits.floor_bytes:
            return self.floor_words(floor_needs)
        return None

    def quota_words(self, adding: int | None = None) -> str:
        write = f"; this write adds {size(adding)}" if adding else ""
        return (
            f"the workspace holds {size(self.used)}{write}, and its quota is {size(self.limits.quota_bytes)}"
            " (tools.workspaceQuotaMb in engine.yaml). Delete files you no longer need (file_list shows them,"
            " code_execute can remove them), or tell the person, who can raise tools.workspaceQuotaMb (then restart"
            " klaw)"
        )

    def files_words(self, adding: int | None = None) -> str:
        write = f"; this write adds {count(adding)}" if adding else ""
        return (
            f"the workspace holds {count(self.files)}{write}, and it may hold at most"
            f" {count(self.limits.quota_files)} (tools.workspaceQuotaFiles in engine.yaml). Delete files you no"
            " longer need (file_list shows them, code_execute can remove them: rm -r a folder of many), or tell"
            " the person, who can raise tools.workspaceQuotaFiles (then restart klaw)"
        )

    def blind_words(self) -> str:
        return (
            f"klaw cannot look into {', '.join(self.unreadable)} in the workspace, so what it holds cannot be"
            " counted against tools.workspaceQuotaMb and tools.workspaceQuotaFiles. Make it readable"
            " (code_execute: chmod -R u+rwx on it) or delete it, or tell the person"
        )

    def floor_words(self, adding: int | None = None) -> str:
        write = f"; this write needs {size(adding)} of it" if adding else ""
        return (
            f"the disk holding the workspace (mounted at {mount_point(self.workspace)}) has {size(max(self.free, 0))}"
            f" free{write}, and klaw keeps {size(self.limits.floor_bytes)} free for its own memory and"
            " conversation log (tools.diskFloorMb in engine.yaml). Delete files you no longer need, or tell the"
            " person, who can free space on that disk"
        )


_WRITING: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Path, asyncio.Lock]] = weakref.WeakKeyDictionary()


def one_writer(workspace: Path) -> asyncio.Lock:
    """The lock a bounded tool write holds from measuring to writing, one per workspace (and event loop):
    the file_write calls of one answer run at once, and each was measured before any wrote (adversary13:
    32 calls made 1,031 entries against a limit of 300). Other workspaces' writes do not wait."""
    return _WRITING.setdefault(asyncio.get_running_loop(), {}).setdefault(workspace, asyncio.Lock())


def usage(workspace: Path) -> Usage:
    """The blocks (in bytes) and the entries under `workspace`, each inode once (a file of several
    hard-linked names counts once, as `du` counts it), symlinks not followed, however deep (workspace_walk.py);
    an entry that vanishes meanwhile is skipped, a folder that cannot be looked into is named in `unreadable`.
    Blocking: one `lstat` per entry (about 130 ms of CPU for 20,000 files here)."""
    total = files = 0
    linked: set[tuple[int, int]] = set()
    walk = Walk(workspace)
    for entry in walk:
        try:
            info = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        except OSError:  # listed, yet not to be looked at (a folder readable but not searchable)
            walk.note(entry.name, "no permission to look at what it lists")
            continue
        if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
            if (info.st_dev, info.st_ino) in linked:
                continue
            linked.add((info.st_dev, info.st_ino))
        total += info.st_blocks * 512
        files += 1
    return Usage(total, files, tuple(walk.unreadable))


def used(workspace: Path) -> int:
    """Bytes the files and folders under `workspace` take on disk, each inode once. Blocking."""
    return usage(workspace).bytes


def names(workspace: Path) -> Names:
    """How many names (files, folders, symlinks) are under `workspace`: no `lstat`, the kind is the one
    the folder's listing gives (d_type), so it costs a sixth of `usage` (15–22 ms of CPU for 20,000 files
    here). A hard-linked file counts once per name, so this is at least the files `usage` counts. Blocking."""
    walk = Walk(workspace)
    found = sum(1 for _ in walk)
    return Names(found, tuple(walk.unreadable))


def free_space(path: Path) -> Free:
    """What an unprivileged writer may still use on the file system holding `path` (root's reserve left
    out, so a klaw running as root keeps the same floor): one `statvfs`."""
    info = os.statvfs(path)
    return Free(info.f_bavail * info.f_frsize, info.f_favail if info.f_files else None)


def size(count: int) -> str:
    """`count` bytes for a person: GiB, MiB or KiB with one decimal where it helps."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}".replace(".0 ", " ")
    return f"{count} bytes"


def count(files: int) -> str:
    """`files` for a person: "1 file or folder", "20,114 files and folders"."""
    return "1 file or folder" if files == 1 else f"{files:,} files and folders"
