"""A sandbox run kept within the disk room (decisions 327, 361): watched while it runs, named when it passed.

Before a run `code_execute` measures the room (tools/disk_room.py); a run starts even without any (it may
delete, decision 370) and is then stopped as soon as it adds past where the workspace was at its start. The
run's file-size limit (RLIMIT_FSIZE, set by the backend) is lowered to that room, so no single file passes it.
Many files (or many processes) could, so while the run goes on `watch` asks the file system for its free space
and free inodes every `POLL_SECONDS` (one `statvfs`, microseconds): under the floor, the run is stopped at
once; once the disk has lost more bytes than the quota had left since the start, or more inodes than the file
quota had left (others' writes count there too), the workspace is counted to be sure and the run stopped if it
passed; it is counted every so often anyway (`UNPROMPTED_WALK_SECONDS` past the gap), since others freeing
space on that disk hide what the run adds. Bytes need the full walk (`usage`, an `lstat` per entry); files
first only the names (`names`, the folders' listings: a sixth of the cost), the full walk only when the names
pass (a hard-linked file is one name per link, one inode). On a file system that does not count inodes (btrfs)
the names are counted all along. Each count waits at least `WALK_GAP_SECONDS` after the last and `WALK_SHARE`
times as long as that one took, so a huge workspace costs the watch at most a tenth of a CPU. Between two
polls a program can still write what the disk takes in that time (about 60 MB at the 270 MB/s measured in
decision 327), which the floor's margin absorbs.

After a run that passed a bound, what it wrote is named (`undo`) but not removed: a snapshot of
names and sizes cannot tell the run's files from a file it renamed or one another chat wrote meanwhile,
and removing those deleted the person's data (decision 327's addendum).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from klaw.tools.disk_room import Free, Room, Usage, count, free_space, names, size, usage
from klaw.tools.sandbox.workspace_changes import MAX_NAMED, Snapshot

POLL_SECONDS = 0.2
WALK_GAP_SECONDS = 1.0
WALK_SHARE = 10
OVER_SLACK_BYTES = 16 * 1024 * 1024  # what others may write on a disk already under the floor before a run stops
# A walk even when the disk's free space says nothing was added: files others delete on the same disk (a busy
# machine's temporary files) give back room as fast as the run takes it, and the run passed its quota unseen
# to its end (CI80: 40 MiB past a 4 MiB quota). Still within the walks' CPU share.
UNPROMPTED_WALK_SECONDS = 0.5

T = TypeVar("T")


def watch(room: Room) -> Callable[[], Awaitable[str]]:
    """What the backend awaits beside the run (`Job.stop_when`): returns why the run must stop. A run
    started over a bound may stay there (it is how files get deleted, decision 370), not add to it."""
    limits = room.limits
    floor = min(limits.floor_bytes, room.free - OVER_SLACK_BYTES)  # under it at the start: no further
    poll = POLL_SECONDS if room.over() is None else POLL_SECONDS / 4  # over a bound: it may only remove

    async def stop_when() -> str:
        allowance = max(limits.quota_bytes - room.used, 0)
        walk_after = names_after = float("-inf")
        while True:
            await asyncio.sleep(poll)
            try:
                now = free_space(room.workspace)
            except OSError:
                continue
            if now.bytes < floor:
                return (
                    f"the disk holding the workspace had only {size(max(now.bytes, 0))} free, under the"
                    f" {size(limits.floor_bytes)} klaw keeps for its own files (tools.diskFloorMb)"
                )
            if room.unreadable and (blind := _blind_growth(room, now, allowance)) is not None:
                return blind
            held = None
            moment = time.monotonic()
            if moment >= walk_after and (
                room.free - now.bytes > allowance or moment >= walk_after + UNPROMPTED_WALK_SECONDS
            ):
                held, walk_after = await _counted(usage, room.workspace)
            elif _may_pass_files(room, now) and time.monotonic() >= names_after:
                found, names_after = await _counted(names, room.workspace)
                if found.found > max(limits.quota_files, room.files) or found.unreadable:
                    held, walk_after = await _counted(usage, room.workspace)  # names are only at least the inodes
            if held is not None and (passed := _passed(room, held)) is not None:
                return passed

    return stop_when


def _passed(room: Room, held: Usage) -> str | None:
    """Why the run must stop, by what a walk found the workspace holds (None: within both quotas, or no
    further past them than at the start)."""
    limits = room.limits
    hidden = [folder for folder in held.unreadable if folder not in room.unreadable]
    if hidden:
        return (
            f"klaw could not look into {', '.join(hidden)} in the workspace, so what it holds could not be"
            " counted against tools.workspaceQuotaMb and tools.workspaceQuotaFiles"
        )
    if held.bytes > max(limits.quota_bytes, room.used):
        quota = size(limits.quota_bytes)
        return f"the workspace passed its quota of {quota} (tools.workspaceQuotaMb) with {size(held.bytes)}"
    if held.files > max(limits.quota_files, room.files):
        most = count(limits.quota_files)
        return f"the workspace passed its limit of {most} (tools.workspaceQuotaFiles) with {held.files:,}"
    return None


def _blind_growth(room: Room, now: Free, allowance: int) -> str | None:
    """With folders the walk cannot look into at the start, the disk's own counts since then stand in for
    the walk (others' writes count there too): the run is stopped once the file system lost more bytes or
    inodes than the quotas had left."""
    lost_inodes = 0 if room.free_inodes is None or now.inodes is None else room.free_inodes - now.inodes
    if room.free - now.bytes <= allowance and lost_inodes <= max(room.limits.quota_files - room.files, 0):
        return None
    return (
        f"klaw cannot look into {', '.join(room.unreadable)} in the workspace, and its disk lost"
        f" {size(max(room.free - now.bytes, 0))} and {lost_inodes:,} inodes while the run went on, more than"
        " tools.workspaceQuotaMb and tools.workspaceQuotaFiles had left"
    )


def _may_pass_files(room: Room, now: Free) -> bool:
    """Whether the run may have passed the file quota: the file system lost more inodes than the quota
    had left at the start; always, when it does not count inodes."""
    if room.free_inodes is None or now.inodes is None:
        return True
    return room.free_inodes - now.inodes > max(room.limits.quota_files - room.files, 0)


async def _counted(counting: Callable[[Path], T], workspace: Path) -> tuple[T, float]:
    """`counting(workspace)` in a thread, and the monotonic time before which not to count again."""
    started = time.monotonic()
    found = await asyncio.to_thread(counting, workspace)
    took = time.monotonic() - started
    return found, time.monotonic() + max(WALK_GAP_SECONDS, WALK_SHARE * took)


def undo(workspace: Path, before: Snapshot, after: Snapshot) -> list[str]:
    """The lines the model reads about what a run that passed a bound wrote: the files it created and those
    it made longer, named, and kept. Nothing is removed or cut back: the snapshots cannot tell the run's
    files from a file it renamed (the person's, under a new name) or one another chat wrote meanwhile, and
    removing those lost data (adversary11). Until files are deleted, `file_write` and new runs are refused
    by the room they measure. Blocking (`workspace` unused: kept for the caller's signature)."""
    if before is None or after is None:
        return ["what the run wrote could not be told apart (the workspace has too many files to track): it is kept"]
    created = sorted(name for name in after if name not in before)
    grown = sorted(name for name, mark in after.items() if name in before and mark[0] > before[name][0])
    lines = []
    if created:
        lines.append(f"kept, created while the run went on: {_names(created)}")
    if grown:
        lines.append(f"kept, made longer while the run went on: {_names(grown)}")
    lines.append("nothing was removed (klaw cannot tell the run's files from others'): delete what is not needed")
    return lines


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_NAMED])
    return shown + (f" … and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else "")
