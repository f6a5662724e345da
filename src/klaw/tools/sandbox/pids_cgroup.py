"""A cap on the sandbox's processes when klaw runs as root: a pids cgroup per run.

The kernel never applies RLIMIT_NPROC to uid 0 (the check in fork skips the root user, even inside a
user namespace whose uid maps to 0), so a fork bomb in a sandbox started by root would fill the
machine. Root can instead make a cgroup with `pids.max`: the sandbox is started inside it (a small
`sh` writes its own pid to `cgroup.procs`, then execs bwrap, so nothing runs outside it), and the
group is emptied and removed when the run ends. cgroup v2 is used where this process's cgroup may
have children with the pids controller, else the v1 pids hierarchy. A normal user needs none of
this: RLIMIT_NPROC, set inside the sandbox's own user namespace, counts only the sandbox's processes.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import time
from pathlib import Path

_ROOT = Path("/sys/fs/cgroup")
_counter = itertools.count()


class PidsCgroups:
    """Where this process may make pids cgroups, found by `find` (None when nowhere)."""

    def __init__(self, parent: Path, version: int) -> None:
        self.parent = parent
        self.version = version

    @classmethod
    def find(cls, proc_cgroup: Path = Path("/proc/self/cgroup")) -> PidsCgroups | None:
        """A parent cgroup under which a child with `pids.max` can really be made, or None."""
        try:
            lines = proc_cgroup.read_text(encoding="utf-8").splitlines()
        except OSError:
            return None
        candidates: list[PidsCgroups] = []
        for line in lines:
            number, controllers, path = [*line.split(":", 2), "", ""][:3]
            relative = path.lstrip("/")
            if number == "0" and (_ROOT / "cgroup.controllers").exists():
                parent = _ROOT / relative
                if "pids" in _words(parent / "cgroup.subtree_control"):
                    candidates.append(cls(parent, 2))
            elif "pids" in controllers.split(","):
                candidates.append(cls(_ROOT / "pids" / relative, 1))
        for candidate in candidates:
            if candidate._works():
                return candidate
        return None

    def _works(self) -> bool:
        try:
            group = self.create(4)
        except OSError:
            return False
        self.remove(group)
        return True

    def create(self, max_pids: int) -> Path:
        """A new empty cgroup allowing `max_pids` tasks; OSError when it cannot be made."""
        group = self.parent / f"klaw-sandbox-{os.getpid()}-{next(_counter)}"
        group.mkdir()
        try:
            (group / "pids.max").write_text(str(max_pids), encoding="ascii")
        except OSError:
            group.rmdir()
            raise
        return group

    def remove(self, group: Path) -> None:
        """Kill whatever is left in `group` and remove it (best effort: a stray group is only a name).
        Blocking (it waits for killed tasks to be reaped): call it in a thread."""
        for _ in range(50):
            pids = [int(word) for word in _words(group / "cgroup.procs") if word.isdigit()]
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        for _ in range(100):
            try:
                group.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:  # EBUSY while the killed tasks are reaped
                time.sleep(0.02)


def enter_argv(group: Path) -> list[str]:
    """The prefix that starts a command inside `group`: nothing it starts can run outside it."""
    return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(group / "cgroup.procs")]


def _words(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="ascii").split()
    except OSError:
        return []
