"""A sandbox run kept within the disk room (decision 327): watched while it runs, undone when it passed.

Before a run `code_execute` measures the room (tools/disk_room.py) and refuses to start without any;
the run's file-size limit (RLIMIT_FSIZE, set by the backend) is lowered to that room, so no single file
passes it. Many files (or many processes) could, so while the run goes on `watch` asks the file system
for its free space every `POLL_SECONDS` (one `statvfs`, microseconds): under the floor, the run is
stopped at once; once the disk has lost more than the quota had left since the start (others' writes
count there too), the workspace is walked to be sure, at most once every `WALK_GAP_SECONDS`, and the
run stopped if it passed. Between two polls a program can still write what the disk takes in that
time (about 60 MB at the 270 MB/s measured in decision 327), which the floor's margin absorbs.

After a run that passed either bound, what it wrote is named (`undo`) but not removed: a snapshot of
names and sizes cannot tell the run's files from a file it renamed or one another chat wrote meanwhile,
and removing those deleted the person's data (decision 327's addendum).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from klaw.tools.disk_room import Room, free, size, used
from klaw.tools.sandbox.workspace_changes import MAX_NAMED, Snapshot

POLL_SECONDS = 0.2
WALK_GAP_SECONDS = 1.0


def watch(room: Room) -> Callable[[], Awaitable[str]]:
    """What the backend awaits beside the run (`Job.stop_when`): returns why the run must stop."""
    limits = room.limits

    async def stop_when() -> str:
        allowance = limits.quota_bytes - room.used
        walked = float("-inf")
        while True:
            await asyncio.sleep(POLL_SECONDS)
            try:
                now = free(room.workspace)
            except OSError:
                continue
            if now < limits.floor_bytes:
                return (
                    f"the disk holding the workspace had only {size(max(now, 0))} free, under the"
                    f" {size(limits.floor_bytes)} klaw keeps for its own files (tools.diskFloorMb)"
                )
            if room.free - now > allowance and time.monotonic() - walked >= WALK_GAP_SECONDS:
                walked = time.monotonic()
                holds = await asyncio.to_thread(used, room.workspace)
                if holds > limits.quota_bytes:
                    return (
                        f"the workspace passed its quota of {size(limits.quota_bytes)} (tools.workspaceQuotaMb)"
                        f" with {size(holds)}"
                    )

    return stop_when


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
