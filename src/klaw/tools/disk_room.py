"""How much a tool may still write: the workspace's quota and the free space klaw keeps for itself.

The workspace (`KLAW_HOME/workspace`) usually sits on the disk that holds klaw.db and the conversation
log. A program the agent runs, or a model looping on `file_write`, could fill that disk, and then no
chat could be written any more. So every tool write is bounded twice (decision 327):

* the workspace's **quota** (`tools.workspaceQuotaMb`): what all its files and folders take on disk
  (allocated blocks, as `du` counts them: a sparse file counts what it really holds);
* the **free-space floor** (`tools.diskFloorMb`): a write that would leave less free on the workspace's
  file system is refused, so klaw's own files always have room.

Measuring the workspace walks it (`used`, blocking: call it in a thread); the free space is one
`statvfs`, cheap enough to ask several times a second while a sandbox run goes on (sandbox/disk_watch.py).
The answers are sentences for the model: what used how much, the limit, and what to do.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from klaw.config import ToolsConfig
from klaw.disk_trouble import mount_point

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class DiskRoom:
    """The two bounds of every tool write, in bytes; from `tools:` in engine.yaml."""

    quota_bytes: int
    floor_bytes: int

    @classmethod
    def from_config(cls, config: ToolsConfig) -> DiskRoom:
        return cls(quota_bytes=config.workspace_quota_mb * MIB, floor_bytes=config.disk_floor_mb * MIB)

    def measure(self, workspace: Path) -> Room:
        """What the workspace holds and its disk has free now. Blocking: it walks the workspace."""
        return Room(self, workspace, used(workspace), free(workspace))


@dataclass(frozen=True, slots=True)
class Room:
    """One measurement: `used` by the workspace, `free` on its file system, against `limits`."""

    limits: DiskRoom
    workspace: Path
    used: int
    free: int

    @property
    def may_add(self) -> int:
        """The most bytes a write may add now (0 or less: none)."""
        return min(self.limits.quota_bytes - self.used, self.free - self.limits.floor_bytes)

    def over(self) -> str | None:
        """Which bound is passed now, in words (None: neither)."""
        if self.used > self.limits.quota_bytes:
            return self.quota_words()
        if self.free < self.limits.floor_bytes:
            return self.floor_words()
        return None

    def refusal(self, adding: int) -> str | None:
        """Why a write of `adding` bytes may not happen (None: it may); 0: a write of unknown size (a
        sandbox run), which needs at least a byte of room."""
        need = max(adding, 1)
        if self.used + need > self.limits.quota_bytes:
            return self.quota_words(adding)
        if self.free - need < self.limits.floor_bytes:
            return self.floor_words(adding)
        return None

    def quota_words(self, adding: int | None = None) -> str:
        write = f"; this write adds {size(adding)}" if adding else ""
        return (
            f"the workspace holds {size(self.used)}{write}, and its quota is {size(self.limits.quota_bytes)}"
            " (tools.workspaceQuotaMb in engine.yaml). Delete files you no longer need (file_list shows them,"
            " code_execute can remove them), or tell the person, who can raise tools.workspaceQuotaMb"
        )

    def floor_words(self, adding: int | None = None) -> str:
        write = f"; this write needs {size(adding)} of it" if adding else ""
        return (
            f"the disk holding the workspace (mounted at {mount_point(self.workspace)}) has {size(max(self.free, 0))}"
            f" free{write}, and klaw keeps {size(self.limits.floor_bytes)} free for its own memory and"
            " conversation log (tools.diskFloorMb in engine.yaml). Delete files you no longer need, or tell the"
            " person, who can free space on that disk"
        )


def used(workspace: Path) -> int:
    """Bytes the files and folders under `workspace` take on disk (their allocated blocks), symlinks not
    followed; an entry that vanishes meanwhile is skipped. Blocking."""
    total = 0
    folders = [str(workspace)]
    while folders:
        try:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += info.st_blocks * 512
                    if stat.S_ISDIR(info.st_mode):
                        folders.append(entry.path)
        except OSError:
            continue
    return total


def free(path: Path) -> int:
    """Bytes an unprivileged writer may still use on the file system holding `path` (root's reserve left
    out, so a klaw running as root keeps the same floor)."""
    info = os.statvfs(path)
    return info.f_bavail * info.f_frsize


def size(count: int) -> str:
    """`count` bytes for a person: GiB, MiB or KiB with one decimal where it helps."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}".replace(".0 ", " ")
    return f"{count} bytes"
