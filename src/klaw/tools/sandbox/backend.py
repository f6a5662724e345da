"""The one seam between `code_execute` and what isolates the code: a backend runs a `Job`.

Like an HTTP client's transports, a backend knows one way of starting an isolated process
(bubblewrap, Docker) and nothing about tools, models or results; `code_execute` knows nothing about
namespaces or containers. Every backend gives the same promises (docs/sandbox.md): the workspace at
/workspace read-write, system directories read-only, a private /tmp, no network unless configured,
nothing of KLAW_HOME but the workspace, and the limits in `SandboxLimits` (docs/decisions/131-code-sandbox.md).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from klaw.config import SandboxConfig
from klaw.tools.beneath import open_directory, walk
from klaw.tools.bounded_process import ProcessOutcome

Language = Literal["python", "shell"]
SANDBOX_WORKSPACE = "/workspace"
KEEP_BYTES = (6000, 4000)  # stdout, stderr kept for the model: under the registry's 16,000-character cap


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """What one run may use; from `sandbox:` in engine.yaml."""

    memory_bytes: int
    tmp_bytes: int
    max_processes: int
    max_file_bytes: int
    max_output_bytes: int
    network: bool

    @classmethod
    def from_config(cls, config: SandboxConfig) -> SandboxLimits:
        mib = 1024 * 1024
        return cls(
            memory_bytes=config.memory_mb * mib,
            tmp_bytes=config.tmp_mb * mib,
            max_processes=config.max_processes,
            max_file_bytes=config.max_file_mb * mib,
            max_output_bytes=config.max_output_mb * mib,
            network=config.network,
        )


@dataclass(frozen=True, slots=True)
class Job:
    """Code to run: `language` picks the interpreter (python, or /bin/sh for shell). `read_only` names
    workspace files the code may read but not change, move or delete (the prompt files), and folders
    (names ending in "/": skills/) nothing in which it may change (decision 279)."""

    language: Language
    code: str
    workspace: Path
    timeout_seconds: int
    read_only: tuple[str, ...] = ()

    def read_only_files(self) -> list[tuple[Path, str]]:
        """(host file or folder, path inside) for each `read_only` file or folder that exists and really
        lies in the workspace: a symlink pointing out is left alone (binding it would show its target
        inside). Checked, then used by path (Docker's mounts): `open_read_only` has no such window."""
        root = self.workspace.resolve()
        found = []
        for entry in self.read_only:
            name = entry.rstrip("/")
            target = (self.workspace / name).resolve()
            kind_ok = target.is_dir() if entry.endswith("/") else target.is_file()
            if kind_ok and target.is_relative_to(root) and target != root:
                found.append((target, f"{SANDBOX_WORKSPACE}/{name}"))
        return found

    def open_read_only(self) -> list[tuple[int, str]]:
        """(descriptor, path inside) for each `read_only` file that exists, is a regular file (a folder
        for a name ending in "/") and is reached beneath the workspace (tools/beneath.py: a symlink
        followed inside, one leading out left alone), for a backend that binds by descriptor: the file
        bound is the one opened, whatever code running meanwhile swaps in its place. The caller closes
        the descriptors."""
        root_path = self.workspace.resolve()
        root = open_directory(root_path)
        opened: list[tuple[int, str]] = []
        try:
            for entry in self.read_only:
                name = entry.rstrip("/")
                fd = _open_beneath(root, root_path, name, folder=entry.endswith("/"))
                if fd is not None:
                    opened.append((fd, f"{SANDBOX_WORKSPACE}/{name}"))
        except BaseException:
            for fd, _ in opened:
                os.close(fd)
            raise
        finally:
            os.close(root)
        return opened


def _open_beneath(root: int, root_path: Path, name: str, *, folder: bool = False) -> int | None:
    """`name` opened for reading beneath `root` if it is a regular file there (a folder when `folder`;
    O_NONBLOCK: a FIFO put in its place does not hang the call); None when missing, leading out, or
    not of that kind."""
    try:
        found = walk(root, root_path, name)
        try:
            fd = found.open(os.O_RDONLY | os.O_NONBLOCK | (os.O_DIRECTORY if folder else 0))
        finally:
            found.close()
    except OSError:  # missing, outside (PermissionError), a loop of links, not a folder
        return None
    opened, workspace = os.fstat(fd), os.fstat(root)
    is_workspace = (opened.st_dev, opened.st_ino) == (workspace.st_dev, workspace.st_ino)
    if not (stat.S_ISDIR(opened.st_mode) and not is_workspace if folder else stat.S_ISREG(opened.st_mode)):
        os.close(fd)
        return None
    return fd


class SandboxBackend(Protocol):
    """Runs jobs in isolation; `name` is what /status and the docs call it."""

    @property
    def name(self) -> str: ...

    async def run(self, job: Job) -> ProcessOutcome:
        """Run the job to its end or its limits; never raises for what the code does."""
        ...


@dataclass(frozen=True, slots=True)
class Unavailable:
    """No backend: why, in a sentence a person can act on (shown by /status and `klaw sandbox status`)."""

    reason: str
