"""Caps on the whole sandbox run when klaw runs as root: a cgroup per run, for processes and memory.

The kernel never applies RLIMIT_NPROC to uid 0 (the check in fork skips the root user, even inside a
user namespace whose uid maps to 0), so a fork bomb in a sandbox started by root would fill the
machine. Root can instead make a cgroup with `pids.max`: the sandbox is started inside it (a small
`sh` writes its own pid to `cgroup.procs`, then execs bwrap, so nothing runs outside it), and the
group is emptied and removed when the run ends. cgroup v2 is used where this process's cgroup may
have children with the pids controller, else the v1 pids hierarchy. A normal user needs none of
this: RLIMIT_NPROC, set inside the sandbox's own user namespace, counts only the sandbox's processes.

Where the memory controller is there too (v2: enabled for the same children; v1: its own hierarchy,
where the run gets a second group), the run's group also gets its memory limit, without swap, so its
processes together, not only each one by RLIMIT_AS, stay within `sandbox.memoryMb` (decision 224).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shlex
import signal
import time
from dataclasses import dataclass
from pathlib import Path

_ROOT = Path("/sys/fs/cgroup")
_counter = itertools.count()
_PROBE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class RunGroup:
    """One run's cgroups: `pids` (always) and `memory` (the same directory in v2, None without one)."""

    pids: Path
    memory: Path | None
    version: int

    def dirs(self) -> list[Path]:
        return [self.pids] + ([self.memory] if self.memory is not None and self.memory != self.pids else [])

    def oom_kills(self) -> int:
        """How many of the run's processes the kernel killed for passing the memory limit."""
        if self.memory is None:
            return 0
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        words = _words(self.memory / name)
        for key, value in itertools.pairwise(words):
            if key == "oom_kill" and value.isdigit():
                return int(value)
        return 0


class PidsCgroups:
    """Where this process may make a run's cgroups, found by `find` (None when nowhere); `memory_parent`
    is where its memory cgroup goes (None: no memory controller to be had, each process is capped alone)."""

    def __init__(self, parent: Path, version: int, memory_parent: Path | None = None) -> None:
        self.parent = parent
        self.version = version
        self.memory_parent = memory_parent

    @classmethod
    def find(cls, proc_cgroup: Path = Path("/proc/self/cgroup")) -> PidsCgroups | None:
        """A parent cgroup under which a child with `pids.max` can really be made, or None."""
        try:
            lines = proc_cgroup.read_text(encoding="utf-8").splitlines()
        except OSError:
            return None
        candidates: list[PidsCgroups] = []
        v1_memory = None
        for line in lines:
            number, controllers, path = [*line.split(":", 2), "", ""][:3]
            relative = path.lstrip("/")
            if number == "0" and (_ROOT / "cgroup.controllers").exists():
                parent = _ROOT / relative
                delegated = _words(parent / "cgroup.subtree_control")
                if "pids" in delegated:
                    candidates.append(cls(parent, 2, parent if "memory" in delegated else None))
            elif "pids" in controllers.split(","):
                candidates.append(cls(_ROOT / "pids" / relative, 1))
            if "memory" in controllers.split(","):
                v1_memory = _ROOT / "memory" / relative
        for candidate in candidates:
            if candidate.version == 1:
                candidate.memory_parent = v1_memory
            if candidate._works():
                return candidate
            if candidate.memory_parent is not None:  # pids alone may still work
                candidate.memory_parent = None
                if candidate._works():
                    return candidate
        return None

    def _works(self) -> bool:
        try:
            group = self.create(4, _PROBE_BYTES)
        except OSError:
            return False
        self.remove(group)
        return True

    def create(self, max_pids: int, memory_bytes: int) -> RunGroup:
        """New empty cgroups allowing `max_pids` tasks and `memory_bytes` of memory (where there is a
        memory controller) for them together; OSError when they cannot be made."""
        name = f"klaw-sandbox-{os.getpid()}-{next(_counter)}"
        pids = self.parent / name
        memory = None if self.memory_parent is None else self.memory_parent / name
        group = RunGroup(pids, memory, self.version)
        made: list[Path] = []
        try:
            for directory in group.dirs():
                directory.mkdir()
                made.append(directory)
            _write(pids / "pids.max", str(max_pids))
            if memory is not None:
                _limit_memory(memory, self.version, memory_bytes)
        except OSError:
            for directory in reversed(made):
                with contextlib.suppress(OSError):
                    directory.rmdir()
            raise
        return group

    def remove(self, group: RunGroup) -> None:
        """Kill whatever is left in `group` and remove it (best effort: a stray group is only a name).
        Blocking (it waits for killed tasks to be reaped): call it in a thread."""
        for _ in range(50):
            pids = [int(word) for word in _words(group.pids / "cgroup.procs") if word.isdigit()]
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        for directory in reversed(group.dirs()):
            _rmdir(directory)


def enter_argv(group: RunGroup) -> list[str]:
    """The prefix that starts a command inside `group`: nothing it starts can run outside it."""
    joins = " && ".join(f"echo $$ > {shlex.quote(str(directory / 'cgroup.procs'))}" for directory in group.dirs())
    return ["/bin/sh", "-c", f'{joins} && exec "$@"', "sh"]


def _limit_memory(group: Path, version: int, memory_bytes: int) -> None:
    """The memory limit, and no swap beyond it where the kernel accounts swap (else memory alone)."""
    if version == 2:
        _write(group / "memory.max", str(memory_bytes))
        with contextlib.suppress(FileNotFoundError):  # no swap file: no swap to forbid
            _write(group / "memory.swap.max", "0")
    else:
        _write(group / "memory.limit_in_bytes", str(memory_bytes))
        with contextlib.suppress(FileNotFoundError):  # swap accounting off (swapaccount=0)
            _write(group / "memory.memsw.limit_in_bytes", str(memory_bytes))


def _write(path: Path, value: str) -> None:
    path.write_text(value, encoding="ascii")


def _rmdir(group: Path) -> None:
    for _ in range(100):
        try:
            group.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:  # EBUSY while the killed tasks are reaped
            time.sleep(0.02)


def _words(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="ascii").split()
    except OSError:
        return []
