"""The `code_execute` tool: the model's code run by the configured backend, the outcome as text.

The result is what the model needs to go on and little more: how the run ended (exit code, signal or
the limit that stopped it), its output (head and tail of each stream, with how much was cut), and
which workspace files it created, changed or deleted. Code the model wrote that fails is an ordinary
result (a traceback in stderr, exit code 1), not a tool error: the model reads it and fixes its code.
"""

from __future__ import annotations

import asyncio
import os
import stat
from contextlib import suppress
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field

from klaw.config import MAX_CALL_SECONDS, SandboxConfig
from klaw.private_files import private_dir_at, private_dirs
from klaw.tools.beneath import open_directory
from klaw.tools.bounded_process import ProcessOutcome
from klaw.tools.calls import ToolRefusal
from klaw.tools.disk_room import MIB, DiskRoom, size
from klaw.tools.registry import ToolRegistry
from klaw.tools.running_call import narrow_limit
from klaw.tools.sandbox.backend import Job, SandboxBackend, Unavailable
from klaw.tools.sandbox.disk_watch import undo, watch
from klaw.tools.sandbox.run_slots import NoSlot, RunSlots
from klaw.tools.sandbox.workspace_changes import Changes, Snapshot, compare, snapshot
from klaw.tools.schema import ToolContext, ToolFunction

MAX_CODE_BYTES = 100_000  # one argument of the command line: Linux allows 128 KiB


def code_execute_tool(
    backend: SandboxBackend, config: SandboxConfig, read_only: tuple[str, ...] = (), room: DiskRoom | None = None
) -> ToolFunction:
    """`code_execute` bound to `backend` and the limits of `config`; `read_only`: workspace files the
    code may not change (the prompt files and skills/, unless `tools.allowPromptEdits`). At most
    `sandbox.maxConcurrentRuns` calls run at once (`maxConcurrentRunsPerChat` for one chat); the others
    wait their turn (run_slots.py). With `room`, a run must fit the workspace's quota and leave the disk's
    floor free: watched while it runs, stopped when it adds past them (even a run started over them, which
    may only remove), what it wrote named when it passed (disk_watch.py, decisions 327, 361 and 370)."""
    slots = RunSlots(config.max_concurrent_runs, config.max_concurrent_runs_per_chat)

    async def code_execute(
        context: ToolContext,
        language: Literal["python", "shell"],
        code: str,
        timeout_seconds: Annotated[int, Field(ge=1)] | None = None,
    ) -> str:
        size = len(code.encode("utf-8"))
        if size > MAX_CODE_BYTES:
            raise ToolRefusal(
                f"the code is {size} bytes; at most {MAX_CODE_BYTES} run at once: write a file with"
                " file_write and run it (python /workspace/NAME.py)"
            )
        if "\0" in code:
            raise ToolRefusal("the code holds a NUL character, which no interpreter accepts")
        seconds = min(timeout_seconds or config.timeout_seconds, config.max_timeout_seconds)
        narrow_limit(seconds, "sandbox limit")  # what a waiting console shows (decision 527)
        private_dirs(context.workspace)
        replaceable = await asyncio.to_thread(_guard_read_only, context.workspace, read_only)
        if replaceable:
            raise ToolRefusal(replaceable_message(replaceable))
        wait = max(1, MAX_CALL_SECONDS - seconds)  # the engine cancels a call after 60 s, waiting included
        try:
            async with slots.turn(context.chat, wait):
                job = Job(language, code, context.workspace, seconds, read_only)
                if room is not None:
                    job = await _within(room, job)
                before = await asyncio.to_thread(snapshot, context.workspace)
                outcome = await backend.run(job)
                after = await asyncio.to_thread(partial(snapshot, clear_setid=True), context.workspace)
                kept = await asyncio.to_thread(_not_kept, room, context.workspace, before, after) if room else []
                if job.max_file_bytes is not None and job.max_file_bytes < config.max_file_mb * MIB:
                    kept.insert(0, _files_bounded(job.max_file_bytes))
        except NoSlot:
            raise ToolRefusal(
                f"the code did not run: after {wait} s every sandbox slot was still taken by other calls"
                f" (sandbox.maxConcurrentRuns: {slots.total}, {slots.per_chat} per chat); call it again,"
                " or ask for fewer runs at once"
            ) from None
        return "\n".join([describe(outcome, compare(before, after), capped=(timeout_seconds or 0) > seconds), *kept])

    return code_execute


async def _within(room: DiskRoom, job: Job) -> Job:
    """`job` bounded by the room the workspace and its disk have now. A run starts even with none left (over
    a quota, under the floor): it is how the agent deletes what the refusals tell it to (decision 370); its
    files cannot grow (RLIMIT_FSIZE of a byte), and the watch stops it if it adds to the workspace."""
    now = await asyncio.to_thread(room.measure, job.workspace)
    return replace(job, max_file_bytes=now.may_add, stop_when=watch(now))


def _files_bounded(room: int) -> str:
    return (
        f"(the workspace had {size(max(room, 0))} of room left, by tools.workspaceQuotaMb and tools.diskFloorMb, so no"
        " file could grow past that in this run: a write beyond it failed with 'File too large')"
    )


def _not_kept(room: DiskRoom, workspace: Path, before: Snapshot, after: Snapshot) -> list[str]:
    """After a run: nothing when the workspace is within its bounds; else which bound it passed and what
    of the run's output is kept (named, not removed). Blocking."""
    held = after.held  # counted by the walk that took the setuid bits off: not walked twice (decision 536)
    passed = (room.measure(workspace) if held is None else room.holding(workspace, held)).over()
    if passed is None:
        return []
    lines = undo(workspace, before, after)
    return [f"over the bounds: {passed}.", *lines]


def _guard_read_only(workspace: Path, read_only: tuple[str, ...]) -> list[str]:
    """Make each read-only folder (skills/) missing from the workspace (0700), so that it is mounted
    read-only: else code could make it and put a skill there. Returns `replaceable` then."""
    root = open_directory(workspace.resolve())
    try:
        for entry in read_only:
            if entry.endswith("/"):
                with suppress(FileExistsError):  # there already (a folder, or what `replaceable` judges)
                    private_dir_at(entry.rstrip("/"), root)
        return replaceable(root, read_only)
    finally:
        os.close(root)


def replaceable(root: int, read_only: tuple[str, ...]) -> list[str]:
    """What code could replace although it is read-only, each as "NAME is …", in the workspace open as
    `root`: an entry that is a symlink (no mount holds a symlink in place: a bind lands on its target, and
    code unlinks the link and puts its own file or folder there), or not of its kind (a folder named
    SOUL.md, a file named skills). A missing prompt file is not judged (decision 279). Decision 286."""
    found = []
    for entry in read_only:
        name, folder = entry.rstrip("/"), entry.endswith("/")
        try:
            mode = os.stat(name, dir_fd=root, follow_symlinks=False).st_mode
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(mode):
            found.append(f"{name} is a symlink")
        elif not (stat.S_ISDIR(mode) if folder else stat.S_ISREG(mode)):
            found.append(f"{name} is not a {'folder' if folder else 'regular file'}")
    return found


def replaceable_message(replaceable: list[str]) -> str:
    """Why code did not run while a protected entry is one code could replace, and what the person can do."""
    return (
        f"the code did not run: in the workspace, {'; '.join(replaceable)}, which code run in the sandbox could"
        " replace with its own (only a real file or folder can be mounted read-only); the prompt files and"
        " skills/ go into every turn of every chat, so code may not change them (tools.allowPromptEdits in"
        " engine.yaml allows it). Tell the person: put the file or folder itself in the workspace in its place"
        " (a symlink's target moved there), or set tools.allowPromptEdits: true, and code_execute runs again."
    )


def describe(outcome: ProcessOutcome, changes: Changes, *, capped: bool = False) -> str:
    lines = outcome.report()
    if capped:
        lines.insert(1, "(timeout_seconds was more than sandbox.maxTimeoutSeconds allows, so that was used)")
    lines += changes.lines()
    return "\n".join(lines)


def register_code_execute(
    registry: ToolRegistry,
    backend: SandboxBackend | Unavailable,
    config: SandboxConfig,
    *,
    read_only: tuple[str, ...] = (),
    room: DiskRoom | None = None,
) -> None:
    """Offer `code_execute` when a backend is available; else record why not (for /status). The
    `read_only` workspace files are mounted read-only over the writable workspace; `room` bounds what
    runs may write (decision 327)."""
    if isinstance(backend, Unavailable):
        registry.note_unavailable("code_execute", backend.reason, fix=backend.fix)
        return
    reach = "the network" if config.network else "no network"
    registry.register(
        code_execute_tool(backend, config, read_only, room),
        name="code_execute",
        description=f"Run code in a sandbox: cwd /workspace (your files), {reach}, {config.timeout_seconds} s"
        " unless timeout_seconds.",
    )
