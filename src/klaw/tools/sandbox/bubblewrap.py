"""The bubblewrap backend: each run in fresh namespaces (user, mount, pid, network, ipc, uts, cgroup).

What the code sees is built from nothing: /usr (and the /bin, /lib… links or directories) read-only,
a few named files of /etc (not the whole of it: as root, files only root may read would be readable)
and passwd, group, hostname and hosts written by klaw (bwrap_data.py: the host's name none of its users
or machines), a new /proc and /dev, a private tmpfs /tmp of bounded size, the workspace read-write at
/workspace, and the sandbox virtualenv read-only at /opt/klaw-venv when `klaw sandbox install` made
one. KLAW_HOME is never mounted, only its workspace. The network namespace holds only an unconfigured
loopback unless `sandbox.network`. The environment is cleared. Capabilities are dropped, and nested user
namespaces are refused. bwrap's options reach it by descriptor (`--args`), so its command line, which
the code can read as /proc/1/cmdline, names no host path (decision 391).

Limits are set inside the sandbox by `prlimit` (address space, CPU seconds, file size, open files,
no core files, processes): set there, RLIMIT_NPROC counts only the sandbox's own processes in its
user namespace. As root the kernel ignores that limit, so the run is started in a pids cgroup
(pids_cgroup.py); where root cannot make one, the backend is unavailable rather than unbounded. That
cgroup also caps the memory of the run's processes together where the memory controller is available;
elsewhere only each process's address space is capped (decision 224). Memory no limit sees (memfd_create
files, SysV shared memory, keyrings) is refused by a seccomp filter (seccomp_filter.py, decision 419).
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import subprocess
import tempfile
from dataclasses import KW_ONLY, dataclass, replace
from pathlib import Path
from typing import ClassVar

from klaw.tools.bounded_process import ProcessOutcome, run_bounded
from klaw.tools.sandbox.backend import KEEP_BYTES, SANDBOX_WORKSPACE, Job, SandboxLimits, Unavailable
from klaw.tools.sandbox.bwrap_data import HOSTNAME, Descriptors, data_options, generated_files
from klaw.tools.sandbox.pids_cgroup import PidsCgroups, enter_argv
from klaw.tools.sandbox.read_only_copies import copy_read_only
from klaw.tools.sandbox.seccomp_filter import SeccompFilter, seccomp_filter, without_filter

VENV_MOUNT = "/opt/klaw-venv"
_SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "nsswitch.conf",
    "host.conf",
    "gai.conf",
    "localtime",
    "timezone",
    "mime.types",
    "protocols",
    "services",
    "ssl/certs",
    "ssl/openssl.cnf",
    "ca-certificates",
    "ca-certificates.conf",
    "fonts",
    "matplotlibrc",
)
_NETWORK_ETC = ("hosts", "resolv.conf")  # the host's, only with sandbox.network: how names resolve there
_PROBE_WORDS = 400  # characters of bwrap's complaint kept: the end says why
_PROBE_SECONDS = 10


@dataclass(frozen=True, slots=True)
class BubblewrapBackend:
    """Runs jobs under `bwrap`; build with `bubblewrap_backend`, which checks it works here."""

    name: ClassVar[str] = "bubblewrap"

    bwrap: str
    limits: SandboxLimits
    _: KW_ONLY
    home_root: Path
    venv: Path | None
    cgroups: PidsCgroups | None
    seccomp: SeccompFilter

    async def run(self, job: Job) -> ProcessOutcome:
        group = None
        if self.cgroups is not None:
            group = await asyncio.to_thread(self.cgroups.create, self.limits.max_processes, self.limits.memory_bytes)
        copies = None
        try:
            copies = await asyncio.to_thread(copy_read_only, job)
            with Descriptors() as descriptors:
                argv = (enter_argv(group) if group is not None else []) + self.argv(job, descriptors, copies.binds)
                outcome = await run_bounded(
                    argv,
                    env={"PATH": "/usr/bin:/bin"},
                    cwd=Path("/"),  # not klaw's own: the shells before bwrap export it, as PWD in /proc/1/environ
                    timeout_seconds=job.timeout_seconds,
                    max_output_bytes=self.limits.max_output_bytes,
                    keep_bytes=KEEP_BYTES,
                    pass_fds=descriptors.numbers,
                    stop_when=job.stop_when,
                )
            killed = group.oom_kills() if group is not None else 0
            if killed and outcome.stopped is None:
                mib = self.limits.memory_bytes // (1024 * 1024)
                said = f"memory: the run's processes together passed sandbox.memoryMb ({mib} MiB), so the kernel"
                said += f" killed {killed} of them (then the run ended with {outcome.status()})"
                outcome = replace(outcome, stopped=said)
            return outcome
        finally:
            if copies is not None:
                await asyncio.to_thread(copies.remove)
            if group is not None and self.cgroups is not None:
                await asyncio.to_thread(self.cgroups.remove, group)

    def kernel_memory(self) -> str:
        said = self.seccomp.describe()
        if self.cgroups is not None and self.cgroups.memory_parent is not None:
            said += "; the run's memory cgroup counts such memory within sandbox.memoryMb"
        return said

    def argv(self, job: Job, descriptors: Descriptors, copies: list[tuple[Path, str]] | None = None) -> list[str]:
        """The whole `bwrap --args N -- prlimit … -- interpreter` command line for `job`: bwrap's options
        are written to memory files in `descriptors` (the child must inherit them); `copies`: (private
        copy, path inside) of its read-only files (read_only_copies.py), bound read-only there."""
        venv = self.venv if self.venv is not None and self.venv.is_dir() else None
        python = f"{VENV_MOUNT}/bin/python" if venv is not None else "python3"
        inner = [python, "-c", job.code] if job.language == "python" else ["/bin/sh", "-c", job.code]
        options = [*self._mounts(job.workspace, venv, copies or [], descriptors), *self._environment(venv)]
        if self.seccomp.program is not None:  # loaded by bwrap last, just before prlimit starts (decision 419)
            options += ["--seccomp", str(descriptors.add("seccomp", self.seccomp.program))]
        return [self.bwrap, *descriptors.options(options), "--", *self._rlimits(job), *inner]

    def _mounts(
        self, workspace: Path, venv: Path | None, copies: list[tuple[Path, str]], descriptors: Descriptors
    ) -> list[str]:
        uid = os.getuid() or 1000  # never 0 inside: nothing there is root, even when klaw is
        gid = os.getgid() or 1000
        args = ["--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session"]
        args += ["--uid", str(uid), "--gid", str(gid), "--hostname", HOSTNAME, "--cap-drop", "ALL"]
        if self.limits.network:
            args.append("--share-net")
        args += ["--ro-bind", "/usr", "/usr"]
        for path in _SYSTEM_LINKS:
            if os.path.islink(path):
                args += ["--symlink", os.readlink(path), path]
            elif os.path.isdir(path):
                args += ["--ro-bind", path, path]
        for name in _ETC + (_NETWORK_ETC if self.limits.network else ()):
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        args += ["--proc", "/proc", "--dev", "/dev"]
        args += data_options(descriptors, generated_files(uid, gid, network=self.limits.network))
        args += ["--size", str(self.limits.tmp_bytes), "--tmpfs", "/tmp"]
        # bwrap's /dev is a tmpfs of half the host's RAM, outside every limit: /dev/shm gets tmpMb, /dev is
        # made read-only below (decision 377)
        args += ["--size", str(self.limits.tmp_bytes), "--tmpfs", "/dev/shm"]
        home = self.home_root.resolve()
        if home.is_relative_to("/usr"):  # a home under a system directory stays hidden all the same, and
            args += ["--tmpfs", str(home), "--remount-ro", str(home)]  # is no unbounded tmpfs (decision 377)
        args += ["--bind", str(workspace.resolve()), SANDBOX_WORKSPACE, "--chdir", SANDBOX_WORKSPACE]
        # each a mount point: cannot be written, renamed or deleted. A copy klaw made, never a path in the
        # workspace, which code in another run could swap for a symlink out before bwrap mounts it (decision 283)
        for copy, inside in copies:
            args += ["--ro-bind", str(copy), inside]
        if venv is not None:
            args += ["--ro-bind", str(venv.resolve()), VENV_MOUNT]
        args += ["--remount-ro", "/"]  # the sandbox's own root (its /etc, /opt…): only /tmp and /workspace are writable
        args += ["--remount-ro", "/dev"]  # its device nodes still work; no file can be made beside them
        return args

    def _environment(self, venv: Path | None) -> list[str]:
        path = "/usr/local/bin:/usr/bin:/bin"
        if venv is not None:
            path = f"{VENV_MOUNT}/bin:{path}"
        env = {
            "PATH": path,
            "HOME": "/tmp",
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
            "PYTHONUNBUFFERED": "1",  # what was printed before a limit stopped it is not lost in a buffer
            "PYTHONDONTWRITEBYTECODE": "1",
            "MPLBACKEND": "Agg",
            # glibc gives each thread a malloc arena of 64 MiB address space, which `prlimit --as` counts:
            # the 15th thread could not start under the default memoryMb (adversary20); two arenas suffice
            "MALLOC_ARENA_MAX": "2",
        }
        args = ["--clearenv"]
        for key, value in env.items():
            args += ["--setenv", key, value]
        return args

    def _rlimits(self, job: Job) -> list[str]:
        limits = self.limits
        return [
            "prlimit",
            f"--as={limits.memory_bytes}",
            f"--cpu={job.timeout_seconds}",
            f"--fsize={job.file_bytes(limits)}",
            "--nofile=256",
            "--core=0",
            f"--nproc={limits.max_processes}",
            "--",
        ]


def bubblewrap_backend(
    limits: SandboxLimits, *, home_root: Path, venv: Path | None = None
) -> BubblewrapBackend | Unavailable:
    """The backend when `bwrap` is installed and really isolates a run here, else why not."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Unavailable(
            "bwrap (bubblewrap) is not installed",
            "install the package bubblewrap (apt install bubblewrap, or dnf install bubblewrap), then restart klaw",
        )
    cgroups = None
    if os.geteuid() == 0:
        cgroups = _root_cgroups()
        if cgroups is None:
            return Unavailable(
                "klaw runs as root, where the kernel does not limit processes, and no pids cgroup could be made"
                " to limit them",
                "run klaw as a normal user",
            )
    seccomp = seccomp_filter()
    backend = BubblewrapBackend(bwrap, limits, home_root=home_root, venv=venv, cgroups=cgroups, seccomp=seccomp)
    failure = _probe(backend)
    if failure is not None and seccomp.program is not None:  # a kernel without seccomp: run, and say so
        bare = replace(backend, seccomp=without_filter(f"bwrap could not load it here: {failure.said}"))
        if _probe(bare) is None:
            return bare
    return Unavailable(*failure.words()) if failure is not None else backend


@functools.cache
def _root_cgroups() -> PidsCgroups | None:
    return PidsCgroups.find()


@dataclass(frozen=True, slots=True)
class _ProbeFailure:
    """A trivial run that failed: `said`, bwrap's own last line (or why it could not start)."""

    said: str
    started: bool = True

    def words(self) -> tuple[str, str]:
        """Why there is no sandbox, and what to do."""
        if not self.started:
            return self.said, "check that `bwrap --version` runs as klaw's user; reinstall bubblewrap if not"
        if "failed to set the NPROC resource limit" in self.said:
            # Not the namespaces: a limit above this account's hard one, which only root may raise (adversary21).
            return (
                f"the sandbox cannot start here ({self.said}): sandbox.maxProcesses in engine.yaml is above this"
                " account's hard limit of processes (`ulimit -Hu` shows it)",
                "lower sandbox.maxProcesses in engine.yaml to that limit or below, then restart klaw",
            )
        return (
            f"bwrap does not work here ({self.said}); unprivileged user namespaces are most likely disabled",
            "allow them (Debian: sysctl kernel.unprivileged_userns_clone=1; Ubuntu 23.10 and later: sysctl"
            " kernel.apparmor_restrict_unprivileged_userns=0; in a container: a runtime that allows them), or set"
            " sandbox.backend to docker in engine.yaml; then restart klaw (docs/sandbox.md)",
        )


def _probe(backend: BubblewrapBackend) -> _ProbeFailure | None:
    """None when a trivial run works; else what failed, from bwrap's own words."""
    return _probe_once(backend.bwrap, backend.limits, backend.seccomp)


@functools.cache  # per command, limits and filter: engines start often (tests), the answer does not change
def _probe_once(bwrap: str, limits: SandboxLimits, seccomp: SeccompFilter) -> _ProbeFailure | None:
    backend = BubblewrapBackend(bwrap, limits, home_root=Path("/nonexistent"), venv=None, cgroups=None, seccomp=seccomp)
    with tempfile.TemporaryDirectory(prefix="klaw-sandbox-probe-") as workspace, Descriptors() as descriptors:
        argv = backend.argv(Job("shell", "echo ok", Path(workspace), _PROBE_SECONDS), descriptors)
        try:
            done = subprocess.run(
                argv, capture_output=True, timeout=_PROBE_SECONDS, check=False, env={}, pass_fds=descriptors.numbers
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return _ProbeFailure(f"bwrap could not be started ({type(exc).__name__}: {exc})", started=False)
    if done.returncode != 0 or done.stdout.strip() != b"ok":
        # all of it on one line: bwrap may write its words in pieces (a lone "bwrap:" was the last line seen)
        said = " ".join(done.stderr.decode("utf-8", errors="replace").split())[-_PROBE_WORDS:]
        return _ProbeFailure(said or f"exit code {done.returncode}")
    return None
