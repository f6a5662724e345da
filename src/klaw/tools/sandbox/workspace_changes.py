"""Which workspace files a run created, changed or deleted: a snapshot before, one after, compared.

The model needs to know what its code left behind (a plot, a CSV) without listing the folder again.
A snapshot is each regular file's and symbolic link's (size, mtime in ns, inode) under the workspace,
links not followed but named with their target (`rootlink -> /`: a link to a folder was missed when
the walk was os.walk's, which counts it among the folders, adversary31). The walk is workspace_walk's:
by descriptors, without recursion or a path-length limit. os.walk recursed once per level: code making a
1,100-deep folder raised RecursionError in every later snapshot, so code_execute failed for good and the
run's output was lost (decision 524). It is bounded: past `MAX_ENTRIES` entries the workspace is not
tracked, and folders deeper than `MAX_DEPTH` are not looked into; the result says so either way rather
than walking for seconds on every call.

After a run the walk goes everywhere, since it also takes setuid and setgid bits off (decision 524) and counts
what the workspace holds for its quotas (`Snapshot.held`, what disk_room.usage counts): one walk where there
were two, the quota's count after a run being that one (decision 536: a 100,000-entry workspace, ~490 ms of CPU
for the setuid walk and ~390 ms for the count, ~500 ms together). A folder it could not look into is named in the
result: no setuid file there was looked for.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from klaw.tools.disk_room import Usage
from klaw.tools.workspace_walk import Walk

MAX_ENTRIES = 20_000
MAX_DEPTH = 64
MAX_NAMED = 30

Mark = tuple[int, int, int]  # (size, mtime in ns, inode)


@dataclass
class Snapshot:
    """The files and links under the workspace; `untracked`: too many entries to say (the marks are empty);
    `too_deep`: folders past `MAX_DEPTH` levels, not looked into."""

    marks: dict[str, Mark] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)  # each link's target, as it reads
    untracked: bool = False
    too_deep: bool = False
    cleared: list[str] = field(default_factory=list)  # files whose setuid/setgid bits were taken away
    held: Usage | None = None  # after a run: what the workspace holds, counted as disk_room.usage counts it


def snapshot(workspace: Path, *, clear_setid: bool = False) -> Snapshot:
    """Blocking (it walks the tree): call it in a thread. Never raises for what the workspace holds: an entry
    that vanished or cannot be looked at is left out. `clear_setid` (after a run): a file with its setuid or
    setgid bit has them taken away, so that code run as root cannot leave a setuid-root program on the host
    (the sandbox mounts the workspace nosuid, the host does not)."""
    taken = Snapshot()
    walk = Walk(workspace, max_depth=None if clear_setid else MAX_DEPTH)  # after a run: every setuid file found
    seen = blocks = counted = 0
    linked: set[tuple[int, int]] = set()
    for entry in walk:
        seen += 1
        if seen > MAX_ENTRIES and not taken.untracked:
            taken.untracked = True
            taken.marks.clear()
            taken.links.clear()
            if not clear_setid:
                return taken
        tracked = not taken.untracked and walk.depth <= MAX_DEPTH
        taken.too_deep = taken.too_deep or walk.depth > MAX_DEPTH
        try:
            info = entry.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        except OSError:  # listed, yet not to be looked at (a folder readable but not searchable)
            walk.note(entry.name, "no permission to look at what it lists")
            continue
        if clear_setid and (taken_up := _blocks(info, linked)) is not None:
            blocks, counted = blocks + taken_up, counted + 1
        try:
            if stat.S_ISLNK(info.st_mode):
                if tracked:
                    taken.links[walk.path(entry.name)] = os.readlink(entry.name, dir_fd=walk.here)
            elif not stat.S_ISREG(info.st_mode):
                continue
            elif clear_setid and info.st_mode & (stat.S_ISUID | stat.S_ISGID):
                info = _setid_cleared(walk.here, entry.name, info)
                taken.cleared.append(walk.path(entry.name))
        except OSError:
            continue
        if tracked:
            taken.marks[walk.path(entry.name)] = (info.st_size, info.st_mtime_ns, info.st_ino)
    taken.too_deep = taken.too_deep or walk.too_deep > 0
    if clear_setid:
        taken.held = Usage(blocks, counted, tuple(walk.unreadable))
    return taken


def _blocks(info: os.stat_result, linked: set[tuple[int, int]]) -> int | None:
    """What `info` takes on disk, counted once for all the names of a hard-linked file (as `du` and
    disk_room.usage count it): None for its second name on."""
    if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
        if (info.st_dev, info.st_ino) in linked:
            return None
        linked.add((info.st_dev, info.st_ino))
    return int(info.st_blocks) * 512


def _setid_cleared(folder: int, name: str, seen: os.stat_result) -> os.stat_result:
    """The file `name` in `folder` without its setuid and setgid bits, opened without following a link and
    checked to be the file seen (a concurrent run may have swapped it); its stat after."""
    descriptor = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    try:
        info = os.fstat(descriptor)
        if (info.st_dev, info.st_ino) != (seen.st_dev, seen.st_ino):
            raise FileNotFoundError(name)
        os.fchmod(descriptor, stat.S_IMODE(info.st_mode) & ~(stat.S_ISUID | stat.S_ISGID))
        return os.fstat(descriptor)
    finally:
        os.close(descriptor)


@dataclass(frozen=True, slots=True)
class Changes:
    created: list[str]
    changed: list[str]
    deleted: list[str]
    tracked: bool = True
    too_deep: bool = False
    cleared: tuple[str, ...] = ()
    unlooked: tuple[str, ...] = ()  # folders the walk after the run could not look into

    def lines(self) -> list[str]:
        """What the model reads: one line per kind that happened, at most `MAX_NAMED` names each."""
        out = []
        if self.cleared:
            shown = ", ".join(sorted(self.cleared)[:MAX_NAMED])
            out.append(f"setuid/setgid bits taken off (klaw keeps none in the workspace): {shown}")
        if self.unlooked:
            out.append(
                f"klaw could not look into {', '.join(self.unlooked)}: a setuid or setgid file there was not"
                " looked for (klaw keeps none in the workspace): make it readable (chmod 700) or delete it"
            )
        if not self.tracked:
            return [f"workspace files: not tracked (more than {MAX_ENTRIES:,} files and folders)", *out]
        for label, names in (("created", self.created), ("changed", self.changed), ("deleted", self.deleted)):
            if names:
                shown = ", ".join(names[:MAX_NAMED])
                more = f" … and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else ""
                out.append(f"files {label}: {shown}{more}")
        if self.too_deep:
            out.append(f"(files more than {MAX_DEPTH} folders deep in the workspace are not tracked: some are there)")
        return out


def compare(before: Snapshot, after: Snapshot) -> Changes:
    unlooked = after.held.unreadable if after.held is not None else ()
    if before.untracked or after.untracked:
        return Changes([], [], [], tracked=False, cleared=tuple(after.cleared), unlooked=unlooked)
    old, new = before.marks, after.marks

    def shown(name: str, taken: Snapshot) -> str:
        return f"{name} -> {taken.links[name]}" if name in taken.links else name

    created = sorted(shown(name, after) for name in new if name not in old)
    changed = sorted(
        shown(name, after)
        for name, mark in new.items()
        if name in old and (old[name] != mark or before.links.get(name) != after.links.get(name))
    )
    deleted = sorted(shown(name, before) for name in old if name not in new)
    return Changes(created, changed, deleted, too_deep=after.too_deep, cleared=tuple(after.cleared), unlooked=unlooked)
