"""The Docker backend: each run in a fresh container of the configured image (`sandbox.dockerImage`).

The same promises as bubblewrap, in Docker's words: the workspace bound at /workspace, the image's
root file system read-only, a tmpfs /tmp, `--network none` unless `sandbox.network`, every capability
dropped, no new privileges, klaw's own uid (root stays root, without a capability: it can write the
workspace klaw owns and nothing of the host it does not), and the limits as `--memory`, `--pids-limit`
and ulimits. A container killed by a signal (the memory limit's SIGKILL) exits with 128 + the signal,
read back as the signal, as bubblewrap's runs report it. The container is named, so a run that must be
stopped is killed through the daemon (killing the `docker run` client alone would leave it running).
Used only when named in engine.yaml and the daemon answers; the sandbox virtualenv is not mounted (the
image brings its own Python and packages). The container's start counts against the call's wall time.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import secrets
import shutil
import subprocess
from pathlib import Path

from klaw.tools.bounded_process import ProcessOutcome, run_bounded
from klaw.tools.sandbox.backend import KEEP_BYTES, SANDBOX_WORKSPACE, Job, SandboxLimits, Unavailable
from klaw.tools.sandbox.read_only_copies import copy_read_only

_PROBE_SECONDS = 5
_SIGNALLED = 128


class DockerBackend:
    name = "docker"

    def __init__(self, docker: str, image: str, limits: SandboxLimits) -> None:
        self._docker = docker
        self._image = image
        self._limits = limits

    def kernel_memory(self) -> str:
        return (
            "Docker's memory cgroup (--memory) counts memfd files and shared memory within sandbox.memoryMb;"
            " Docker's default seccomp profile refuses keyrings (and io_uring from Docker 25)"
        )

    async def run(self, job: Job) -> ProcessOutcome:
        container = f"klaw-sandbox-{secrets.token_hex(6)}"

        async def kill() -> None:
            await run_bounded(
                [self._docker, "kill", container],
                env=_client_env(),
                cwd=None,
                timeout_seconds=_PROBE_SECONDS,
                max_output_bytes=65536,
                keep_bytes=(0, 0),
            )

        copies = await asyncio.to_thread(copy_read_only, job)
        try:
            outcome = await run_bounded(
                self.argv(job, container, copies.binds),
                env=_client_env(),
                cwd=None,
                timeout_seconds=job.timeout_seconds,
                max_output_bytes=self._limits.max_output_bytes,
                keep_bytes=KEEP_BYTES,
                kill=kill,
                stop_when=job.stop_when,
            )
        finally:
            await asyncio.to_thread(copies.remove)
        return _signal_from_exit_code(outcome)

    def argv(self, job: Job, container: str, copies: list[tuple[Path, str]] | None = None) -> list[str]:
        """`docker run …` for `job`; `copies`: (private copy, path inside) of its read-only files, bound
        read-only there (read_only_copies.py: never a path in the workspace, decision 283)."""
        limits = self._limits
        inner = ["python3", "-c", job.code] if job.language == "python" else ["/bin/sh", "-c", job.code]
        return [
            self._docker,
            "run",
            "--rm",
            "--name",
            container,
            "--network",
            "bridge" if limits.network else "none",
            "--read-only",
            "--tmpfs",
            f"/tmp:rw,size={limits.tmp_bytes},mode=1777",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--user",
            f"{os.getuid()}:{os.getgid()}",
            "--memory",
            str(limits.memory_bytes),
            "--memory-swap",
            str(limits.memory_bytes),
            "--pids-limit",
            str(limits.max_processes),
            "--ulimit",
            f"cpu={job.timeout_seconds}",
            "--ulimit",
            f"fsize={job.file_bytes(limits)}",
            "--ulimit",
            "core=0",
            "--env",
            "HOME=/tmp",
            "--env",
            "PYTHONUNBUFFERED=1",
            "--volume",
            f"{job.workspace.resolve()}:{SANDBOX_WORKSPACE}:rw",
            *[part for source, inside in copies or [] for part in ("--volume", f"{source}:{inside}:ro")],
            "--workdir",
            SANDBOX_WORKSPACE,
            self._image,
            *inner,
        ]


def _signal_from_exit_code(outcome: ProcessOutcome) -> ProcessOutcome:
    """`docker run` exits with 128 + N when the container's process was killed by signal N."""
    if outcome.stopped is None and _SIGNALLED < outcome.returncode < _SIGNALLED + 65:
        return dataclasses.replace(outcome, returncode=_SIGNALLED - outcome.returncode)
    return outcome


def docker_backend(image: str, limits: SandboxLimits) -> DockerBackend | Unavailable:
    """The backend when the `docker` client is installed and its daemon answers, else why not."""
    docker = shutil.which("docker")
    if docker is None:
        return Unavailable(
            "sandbox.backend is docker but the docker command is not installed",
            "install Docker (apt install docker.io) and restart klaw, or set sandbox.backend to auto in engine.yaml"
            " for bubblewrap",
        )
    try:
        done = subprocess.run(
            [docker, "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            timeout=_PROBE_SECONDS,
            check=False,
            env=_client_env(),
        )
    except (OSError, subprocess.TimeoutExpired):
        done = None
    if done is None or done.returncode != 0 or not done.stdout.strip():
        return Unavailable(
            "sandbox.backend is docker but no Docker daemon answers",
            "start the daemon (systemctl start docker) and let klaw's user reach it (the docker group, or"
            " DOCKER_HOST), then restart klaw; or set sandbox.backend to auto in engine.yaml for bubblewrap",
        )
    return DockerBackend(docker, image, limits)


def _client_env() -> dict[str, str]:
    """The docker client needs to find its daemon and config, and nothing else of klaw's environment."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    for name in ("DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CONTEXT", "HOME", "XDG_RUNTIME_DIR"):
        with contextlib.suppress(KeyError):
            env[name] = os.environ[name]
    return env
