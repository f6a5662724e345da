"""Which workspace files a run created, changed or deleted: a snapshot before, one after, compared.

The model needs to know what its code left behind (a plot, a CSV) without listing the folder again.
A snapshot is each regular file's (size, mtime in ns, inode) under the workspace, symlinks not
followed; a workspace with more than `MAX_ENTRIES` files is not tracked (the result says so) rather
than walked for seconds on every call.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MAX_ENTRIES = 20_000
MAX_NAMED = 30

Snapshot = dict[str, tuple[int, int, int]] | None  # None: too many files to track


def snapshot(workspace: Path) -> Snapshot:
    """Blocking (it walks the tree): call it in a thread."""
    seen: dict[str, tuple[int, int, int]] = {}
    root = str(workspace)
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            seen[os.path.relpath(path, root)] = (info.st_size, info.st_mtime_ns, info.st_ino)
            if len(seen) > MAX_ENTRIES:
                return None
    return seen


@dataclass(frozen=True, slots=True)
class Changes:
    created: list[str]
    changed: list[str]
    deleted: list[str]
    tracked: bool = True

    def lines(self) -> list[str]:
        """What the model reads: one line per kind that happened, at most `MAX_NAMED` names each."""
        if not self.tracked:
            return [f"workspace files: not tracked (more than {MAX_ENTRIES} files)"]
        out = []
        for label, names in (("created", self.created), ("changed", self.changed), ("deleted", self.deleted)):
            if names:
                shown = ", ".join(names[:MAX_NAMED])
                more = f" … and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else ""
                out.append(f"files {label}: {shown}{more}")
        return out


def compare(before: Snapshot, after: Snapshot) -> Changes:
    if before is None or after is None:
        return Changes([], [], [], tracked=False)
    created = sorted(name for name in after if name not in before)
    changed = sorted(name for name, mark in after.items() if name in before and before[name] != mark)
    deleted = sorted(name for name in before if name not in after)
    return Changes(created, changed, deleted)
