"""The one seam between `code_execute` and what isolates the code: a backend runs a `Job`.

Like an HTTP client's transports, a backend knows one way of starting an isolated process
(bubblewrap, Docker) and nothing about tools, models or results; `code_execute` knows nothing about
namespaces or containers. Every backend gives the same promises (docs/sandbox.md): the workspace at
/workspace read-write, system directories read-only, a private /tmp, no network unless configured,
nothing of KLAW_HOME but the workspace, and the limits in `SandboxLimits` (docs/decisions/131-code-sandbox.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from klaw.config import SandboxConfig
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
    (names ending in "/": skills/) nothing in which it may change (decision 279); a backend binds private
    copies of them (read_only_copies.py, decision 283). `max_file_bytes`, when given, lowers the size a
    file may grow to below `SandboxLimits.max_file_bytes` (the room the workspace and its disk have left);
    `stop_when` ends the run with its words when it returns (the disk watch: decision 327)."""

    language: Language
    code: str
    workspace: Path
    timeout_seconds: int
    read_only: tuple[str, ...] = ()
    max_file_bytes: int | None = None
    stop_when: Callable[[], Awaitable[str]] | None = None

    def file_bytes(self, limits: SandboxLimits) -> int:
        """The size a file of this run may grow to: the backend's limit, or less (at least 1 byte: a limit
        of 0 would mean none to prlimit)."""
        if self.max_file_bytes is None:
            return limits.max_file_bytes
        return max(1, min(limits.max_file_bytes, self.max_file_bytes))


class SandboxBackend(Protocol):
    """Runs jobs in isolation; `name` is what /status and the docs call it."""

    @property
    def name(self) -> str: ...

    async def run(self, job: Job) -> ProcessOutcome:
        """Run the job to its end or its limits; never raises for what the code does."""
        ...

    def kernel_memory(self) -> str:
        """What keeps code from holding memory outside its processes' address space (memfd files, SysV
        shared memory, keyrings), or that nothing does: a line for `klaw sandbox status` (decision 419)."""
        ...


@dataclass(frozen=True, slots=True)
class Unavailable:
    """No backend: why (`reason`), and exactly what to install or set so there is one (`fix`); both shown by
    /status, `/tools`, `klaw tools` and `klaw sandbox status`."""

    reason: str
    fix: str
