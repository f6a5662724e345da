"""The sections of code the agent runs: `sandbox:` (code_execute) and `hostExec:` (host_exec).

`code_execute` is on when a sandbox backend is available (bubblewrap by default on Linux, Docker when
configured); `host_exec` runs on the host itself, so it is offered only with an allow-list here.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from klaw.config.base import Section

SandboxBackendName = Literal["auto", "bubblewrap", "docker", "none"]
MAX_CALL_SECONDS = 55  # the engine cancels any tool after 60 s; a sandbox run must end before that


class SandboxConfig(Section):
    """Where and within what limits `code_execute` runs code (docs/sandbox.md).

    `auto` is bubblewrap when `bwrap` is installed and works here, else none; Docker is used only when
    named, because its daemon and image are a choice the person makes.
    """

    backend: SandboxBackendName = Field(
        default="auto", description="auto (bubblewrap if it works here), bubblewrap, docker, or none."
    )
    network: bool = Field(default=False, description="Let sandboxed code use the network (off: no network at all).")
    docker_image: str = Field(default="python:3.12-slim", description="The image code runs in with backend docker.")
    timeout_seconds: int = Field(default=30, ge=1, le=MAX_CALL_SECONDS, description="Wall time of a call by default.")
    max_timeout_seconds: int = Field(
        default=MAX_CALL_SECONDS, ge=1, le=MAX_CALL_SECONDS, description="The most wall time a call may ask for."
    )
    memory_mb: int = Field(default=1024, ge=64, description="Address space of each sandboxed process, in MiB.")
    tmp_mb: int = Field(default=256, ge=1, description="Size of the sandbox's private /tmp, in MiB.")
    max_processes: int = Field(default=64, ge=4, description="Processes (and threads) the code may run at once.")
    max_file_mb: int = Field(default=100, ge=1, description="Largest file the code may write, in MiB.")
    max_output_mb: int = Field(
        default=8, ge=1, description="Output (stdout + stderr) read before the code is stopped, in MiB."
    )
    max_concurrent_runs: int = Field(
        default=2, ge=1, description="Sandbox runs at once in this engine; further calls wait their turn."
    )
    max_concurrent_runs_per_chat: int = Field(
        default=1, ge=1, description="Sandbox runs at once for one chat: its many calls do not starve another's."
    )


class HostExecConfig(Section):
    """`host_exec`: commands on the host, not sandboxed; offered only when `allow` lists patterns.

    A pattern is words matched one-to-one against the command's arguments (shell-style globs within a
    word: `git log -n *`); a final `*` word matches any further arguments. The command runs as an
    argument vector without a shell, so `;`, `&&`, `|`, `$(…)` and redirections are refused, unless the
    pattern starts with `shell:`, which runs the whole command line by `/bin/sh -c` when it matches the
    rest of the pattern (docs/sandbox.md warns what that allows).
    """

    allow: tuple[str, ...] = Field(default=(), description="Command patterns host_exec may run; empty: not offered.")
    timeout_seconds: int = Field(default=30, ge=1, le=MAX_CALL_SECONDS, description="Wall time of a command.")
    max_output_kb: int = Field(default=1024, ge=1, description="Output read before the command is stopped, in KiB.")

    @field_validator("allow")
    @classmethod
    def _patterns_have_words(cls, patterns: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in patterns:
            body = pattern.removeprefix("shell:") if pattern.startswith("shell:") else pattern
            if not body.split():
                raise ValueError(f"the pattern {pattern!r} is empty: write the command it allows, e.g. 'git status'")
        return patterns
