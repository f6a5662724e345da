"""A sandbox run kept within the disk room (decisions 327, 361, 440): watched while it runs, named when it passed.

Before a run `code_execute` measures the room (tools/disk_room.py); a run starts even without any (it may
delete, decision 370) and is then stopped as soon as it adds past where the workspace was at its start. The
run's file-size limit (RLIMIT_FSIZE, set by the backend) is lowered to that room, so no single file passes it.
Many files (or many processes) could, so while the run goes on `watch` asks the file system for its free space
and free inodes every `POLL_SECONDS` (one `statvfs`, microseconds): under the floor, the run is stopped at
once. Against the quotas it keeps an estimate that is never less than what the workspace holds (unless others
free space on that disk): the last count plus what the disk lost since it began. When the estimate passes a
quota the workspace is counted, in a thread while the polls go on, and the run stopped if the count passed
too; when it passes by more than the margin (`MARGIN_BYTES`, `MARGIN_FILES`: room for other programs' writes)
and no count can confirm it in time, the run is stopped on the estimate alone. So the quota holds within that
margin plus one poll's writes however long the workspace takes to count: before, each count waited ten times
as long as the last took and the polls waited for it, and a run beside 150,000 files wrote 2.7 GiB against a
64 MiB quota (adversary23). The workspace is counted every so often anyway (`UNPROMPTED_WALK_SECONDS` past the
gap), since others freeing space on that disk hide what the run adds. Bytes need the full walk (`usage`, an
`lstat` per entry); files first only the names (`names`, the folders' listings: a sixth of the cost), the full
walk only when the names pass (a hard-linked file is one name per link, one inode). On a file system that
does not count inodes (btrfs) the names are counted all along. A count waits `WALK_SHARE` times as long as the
last took (and an unprompted one at least `WALK_GAP_SECONDS`), so counting costs the watch at most a tenth of
a CPU however big the workspace.

After a run that passed a bound, what it wrote is named (`undo`) but not removed: a snapshot of
names and sizes cannot tell the run's files from a file it renamed or one another chat wrote meanwhile,
and removing those deleted the person's data (decision 327's addendum).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NamedTuple

from klaw.tools.disk_room import MIB, Free, Names, Room, Usage, count, free_space, names, size, usage
from klaw.tools.sandbox.workspace_changes import MAX_NAMED, Snapshot

POLL_SECONDS = 0.2
WALK_GAP_SECONDS = 1.0
WALK_SHARE = 10
OVER_SLACK_BYTES = 16 * MIB  # what others may write on a disk already under the floor before a run stops
# The quotas' margin (decision 440): how far past a bound the estimate may go before a run is stopped without a
# count to confirm it; room for other programs' writes on that disk meanwhile.
MARGIN_BYTES = 16 * MIB
MARGIN_FILES = 1_000
# A walk even when the disk's free space says nothing was added: files others delete on the same disk (a busy
# machine's temporary files) give back room as fast as the run takes it, and the run passed its quota unseen
# to its end (CI80: 40 MiB past a 4 MiB quota). Still within the walks' CPU share.
UNPROMPTED_WALK_SECONDS = 0.5


class _Mark(NamedTuple):
    """The last count of the workspace (`held`), and the disk's free space read just before it began: what
    the disk lost since then is at most what was added to the workspace since (and others' writes)."""

    held: Usage
    free: Free


def watch(room: Room) -> Callable[[], Awaitable[str]]:
    """What the backend awaits beside the run (`Job.stop_when`): returns why the run must stop. A run
    started over a bound may stay there (it is how files get deleted, decision 370), not add to it; with a
    folder klaw cannot look into, it may add nothing either (what the workspace holds is unknown)."""
    limits = room.limits
    floor = min(limits.floor_bytes, room.free - OVER_SLACK_BYTES)  # under it at the start: no further
    poll = POLL_SECONDS if room.over() is None else POLL_SECONDS / 4  # over a bound: it may only remove
    blind = bool(room.unreadable)
    most_bytes = room.used if blind else max(limits.quota_bytes, room.used)
    most_files = room.files if blind else max(limits.quota_files, room.files)

    async def stop_when() -> str:
        mark = _Mark(Usage(room.used, room.files), Free(room.free, room.free_inodes))
        counting: asyncio.Task[tuple[Usage | Names, float]] | None = None
        began = mark.free
        prompted = unprompted = names_due = float("-inf")  # when each kind of count may be made again
        try:
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
                if counting is not None and counting.done():
                    found, took = counting.result()
                    counting = None
                    moment = time.monotonic()
                    if isinstance(found, Names):
                        names_due = moment + max(WALK_GAP_SECONDS, WALK_SHARE * took)
                        if found.found > most_files or found.unreadable:  # names are only at least the inodes
                            counting, began = _count(usage, room.workspace), now
                        continue
                    if (passed := _passed(room, found, most_bytes, most_files)) is not None:
                        return passed
                    mark = _Mark(found, began)
                    prompted, unprompted = moment + WALK_SHARE * took, moment + max(WALK_GAP_SECONDS, WALK_SHARE * took)
                bytes_now, files_now = _estimate(mark, now)
                moment = time.monotonic()
                if counting is None:
                    passing = bytes_now > most_bytes or files_now > most_files + MARGIN_FILES
                    if (moment >= prompted and passing) or moment >= unprompted + UNPROMPTED_WALK_SECONDS:
                        counting, began = _count(usage, room.workspace), now
                        continue
                    if moment >= names_due and (now.inodes is None or files_now > most_files):
                        counting = _count(names, room.workspace)
                        continue
                if bytes_now > most_bytes + MARGIN_BYTES or files_now > most_files + MARGIN_FILES:
                    return _unconfirmed(room, mark, now, bytes_now)
        finally:
            if counting is not None:
                counting.cancel()

    return stop_when


def _count(counting: Callable[[Path], Usage | Names], workspace: Path) -> asyncio.Task[tuple[Usage | Names, float]]:
    """`counting(workspace)` in a thread, started now, with how long it took: the watch polls on meanwhile."""

    async def timed() -> tuple[Usage | Names, float]:
        started = time.monotonic()
        found = await asyncio.to_thread(counting, workspace)
        return found, time.monotonic() - started

    return asyncio.ensure_future(timed())


def _estimate(mark: _Mark, now: Free) -> tuple[int, int]:
    """At most what the workspace holds now, bytes and files: the last count and what the disk lost since it
    began (others' writes count there too; space others freed hides as much, which only a count sees)."""
    lost_inodes = 0 if mark.free.inodes is None or now.inodes is None else max(mark.free.inodes - now.inodes, 0)
    return mark.held.bytes + max(mark.free.bytes - now.bytes, 0), mark.held.files + lost_inodes


def _passed(room: Room, held: Usage, most_bytes: int, most_files: int) -> str | None:
    """Why the run must stop, by what a count found the workspace holds (None: within both quotas, or no
    further past them than at the start)."""
    limits = room.limits
    hidden = [folder for folder in held.unreadable if folder not in room.unreadable]
    if hidden:
        return (
            f"klaw could not look into {', '.join(hidden)} in the workspace, so what it holds could not be"
            " counted against tools.workspaceQuotaMb and tools.workspaceQuotaFiles"
        )
    if room.unreadable and (held.bytes > most_bytes or held.files > most_files):
        return (
            f"klaw cannot look into {', '.join(room.unreadable)} in the workspace, so a run may only remove"
            f" files until it can; this one added to it ({size(held.bytes)} and {held.files:,} files and folders"
            f" where it began with {size(room.used)} and {room.files:,})"
        )
    if held.bytes > most_bytes:
        quota = size(limits.quota_bytes)
        return f"the workspace passed its quota of {quota} (tools.workspaceQuotaMb) with {size(held.bytes)}"
    if held.files > most_files:
        most = count(limits.quota_files)
        return f"the workspace passed its limit of {most} (tools.workspaceQuotaFiles) with {held.files:,}"
    return None


def _unconfirmed(room: Room, mark: _Mark, now: Free, bytes_now: int) -> str:
    """Why the run was stopped before a count could confirm it: the last count and the disk's loss since it
    passed a bound by more than the margin, and no count could be made in time (a big workspace)."""
    lost_bytes = max(mark.free.bytes - now.bytes, 0)
    lost_inodes = 0 if mark.free.inodes is None or now.inodes is None else max(mark.free.inodes - now.inodes, 0)
    if room.unreadable:
        return (
            f"klaw cannot look into {', '.join(room.unreadable)} in the workspace, so a run may only remove files"
            f" until it can, and the workspace's disk lost {size(lost_bytes)} and {lost_inodes:,} inodes while this"
            f" one went on (more than the {size(MARGIN_BYTES)} and {MARGIN_FILES:,} klaw leaves for other programs'"
            " writes there)"
        )
    unsure = "as far as klaw can tell without counting it again (a big workspace takes a while to count)"
    if bytes_now > max(room.limits.quota_bytes, room.used) + MARGIN_BYTES:
        return (
            f"the workspace passed its quota of {size(room.limits.quota_bytes)} (tools.workspaceQuotaMb), {unsure}:"
            f" it held {size(mark.held.bytes)} at the last count and its disk lost {size(lost_bytes)} since, more"
            f" than the quota left plus {size(MARGIN_BYTES)} for other programs' writes on that disk"
        )
    return (
        f"the workspace passed its limit of {count(room.limits.quota_files)} (tools.workspaceQuotaFiles), {unsure}:"
        f" it held {mark.held.files:,} at the last count and its disk lost {lost_inodes:,} inodes since, more than"
        f" the limit left plus {MARGIN_FILES:,} for other programs' files on that disk"
    )


def undo(workspace: Path, before: Snapshot, after: Snapshot) -> list[str]:
    """The lines the model reads about what a run that passed a bound wrote: the files it created and those
    it made longer, named, and kept. Nothing is removed or cut back: the snapshots cannot tell the run's
    files from a file it renamed (the person's, under a new name) or one another chat wrote meanwhile, and
    removing those lost data (adversary11). Until files are deleted, `file_write` and new runs are refused
    by the room they measure. Blocking (`workspace` unused: kept for the caller's signature)."""
    if before.untracked or after.untracked:
        return ["what the run wrote could not be told apart (the workspace has too many files to track): it is kept"]
    old, new = before.marks, after.marks
    created = sorted(name for name in new if name not in old)
    grown = sorted(name for name, mark in new.items() if name in old and mark[0] > old[name][0])
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
