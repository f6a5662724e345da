"""Running a program whose output and duration the model does not control: wall time and output capped.

`code_execute` (in its sandbox) and `host_exec` (on the host) both start a program, read what it
prints and must come back within the call's time whatever the program does: loop forever, print
100 MB, leave children behind. Output is read as it comes (never buffered whole): the first and last
`keep_bytes` of each stream are kept and the rest only counted, so the model sees the beginning and the
end and how much was cut. Past `max_output_bytes` in all, or past the wall time, the program's whole
process group is killed and the outcome says which limit stopped it. Timing is real time: these are
limits on a real process, not engine waits a test would fast-forward.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import signal
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from klaw.private_files import CHILD_UMASK

_CHUNK = 65536
_DRAIN_AFTER_KILL_SECONDS = 2.0
# The child's umask is set by /bin/sh, which then becomes the program (`exec`: same pid, same group).
_UNDER_PRIVATE_UMASK = ("/bin/sh", "-c", f'umask {CHILD_UMASK:03o} && exec "$@"', "klaw-child")


@dataclass(frozen=True, slots=True)
class Captured:
    """One stream as kept: its head and tail, and how many bytes it had in all."""

    head: bytes
    tail: bytes
    total: int

    def text(self) -> str:
        """The kept text, with a line saying how much of the middle was cut when anything was."""
        cut = self.total - len(self.head) - len(self.tail)
        head = self.head.decode("utf-8", errors="replace")
        if cut <= 0:
            return head + self.tail.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        return f"{head}\n[… {cut} of {self.total} bytes cut …]\n{tail}"


class _Capture:
    def __init__(self, keep_bytes: int) -> None:
        self._head_limit = keep_bytes // 2
        self._tail_limit = keep_bytes - self._head_limit
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            if len(self._tail) > self._tail_limit:
                del self._tail[: len(self._tail) - self._tail_limit]

    def result(self) -> Captured:
        return Captured(bytes(self._head), bytes(self._tail), self.total)


@dataclass(frozen=True, slots=True)
class ProcessOutcome:
    """How a program ended. `stopped` names the limit that ended it (None: it ended by itself)."""

    returncode: int  # negative: killed by that signal
    stdout: Captured
    stderr: Captured
    stopped: str | None
    seconds: float

    def status(self) -> str:
        """One line for the model: the exit code, the signal, or the limit that stopped it."""
        if self.stopped is not None:
            return f"stopped: {self.stopped}"
        if self.returncode < 0:
            return f"killed by signal {_signal_name(-self.returncode)}"
        return f"exit code {self.returncode}"

    def report(self) -> list[str]:
        """The lines the model reads: how it ended and when, then each stream that said anything."""
        lines = [f"{self.status()} after {self.seconds:.2f} s"]
        for label, stream in (("stdout", self.stdout), ("stderr", self.stderr)):
            if stream.total:
                lines.append(f"{label}:\n{stream.text().rstrip()}")
        if not self.stdout.total and not self.stderr.total:
            lines.append("(no output)")
        return lines


async def run_bounded(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: Path | None,
    timeout_seconds: float,
    max_output_bytes: int,
    keep_bytes: tuple[int, int],
    kill: Callable[[], Awaitable[None]] | None = None,
    pass_fds: Sequence[int] = (),
    stop_when: Callable[[], Awaitable[str]] | None = None,
) -> ProcessOutcome:
    """Run `argv` (no shell) with stdin closed; `keep_bytes` is (stdout, stderr) kept for the model.
    `kill` is what else must happen to stop it (a container the CLI started), after the group is killed;
    `pass_fds` are descriptors the program inherits (files bubblewrap binds by descriptor); `stop_when`,
    awaited beside the program, ends it when it returns, with its words as the limit that stopped it (a
    sandbox run filling the disk: decision 327)."""
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        *_under_private_umask(argv, env, cwd),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd,
        env=dict(env),
        start_new_session=True,  # its own process group: one kill reaches its children
        pass_fds=tuple(pass_fds),
    )
    out, err = _Capture(keep_bytes[0]), _Capture(keep_bytes[1])
    over_limit = asyncio.Event()

    async def read(stream: asyncio.StreamReader | None, capture: _Capture) -> None:
        assert stream is not None
        while chunk := await stream.read(_CHUNK):
            if over_limit.is_set():
                continue  # the program is being killed: read on to the end, so the pipe closes
            capture.feed(chunk)
            if out.total + err.total > max_output_bytes:
                over_limit.set()

    readers = asyncio.gather(read(process.stdout, out), read(process.stderr, err))
    limit = asyncio.ensure_future(over_limit.wait())
    done_reading = asyncio.ensure_future(_finish(readers, process))
    watch = asyncio.ensure_future(stop_when() if stop_when is not None else asyncio.Event().wait())
    stopped: str | None = None
    try:
        done, _ = await asyncio.wait(
            {limit, done_reading, watch}, timeout=timeout_seconds, return_when="FIRST_COMPLETED"
        )
        if done_reading not in done:
            if watch in done:
                stopped = f"{watch.result()}, and the program was killed"
            elif over_limit.is_set():
                stopped = f"the output passed {_size(max_output_bytes)} and the program was killed"
            else:
                stopped = f"the wall time of {timeout_seconds:g} s ran out and the program was killed"
            await _stop(process, kill)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_DRAIN_AFTER_KILL_SECONDS):
                    await asyncio.shield(done_reading)
    finally:
        for task in (limit, done_reading, readers, watch):
            task.cancel()
        if process.returncode is None:  # cancelled (engine tool timeout, shutdown): nothing left running
            await _stop(process, kill)
    returncode = process.returncode if process.returncode is not None else -signal.SIGKILL
    return ProcessOutcome(returncode, out.result(), err.result(), stopped, time.monotonic() - started)


def _under_private_umask(argv: Sequence[str], env: Mapping[str, str], cwd: Path | None) -> list[str]:
    """`argv` run with umask 077, so what it writes in the workspace is private whatever this process's
    umask (a library program's own, decision 237). Not subprocess's `umask=`: uvloop, which every
    long-running `klaw` command runs on and a library program may too, refuses it ("unexpected kwargs");
    not `preexec_fn`: Python code in a forked child is unsafe beside the engine's threads. The program is
    looked up here as the exec itself would (PATH from `env`), so a missing or non-executable one is
    still FileNotFoundError / PermissionError rather than the shell's exit status 127 / 126."""
    program = argv[0]
    if "/" not in program:
        found = shutil.which(program, path=env.get("PATH", os.defpath))
        if found is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        program = found
    else:
        where = Path(cwd or ".") / program  # a relative path is the child's, from its working directory
        if not where.exists():
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
        if where.is_dir() or not os.access(where, os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), program)
    return [*_UNDER_PRIVATE_UMASK, program, *argv[1:]]


async def _finish(readers: asyncio.Future[tuple[None, None]], process: asyncio.subprocess.Process) -> None:
    await readers
    await process.wait()


async def _stop(process: asyncio.subprocess.Process, kill: Callable[[], Awaitable[None]] | None) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    if kill is not None:
        with contextlib.suppress(Exception):
            await kill()
    with contextlib.suppress(TimeoutError, ProcessLookupError):
        async with asyncio.timeout(_DRAIN_AFTER_KILL_SECONDS):
            await process.wait()


def _size(count: int) -> str:
    if count >= 1024 * 1024:
        return f"{count / (1024 * 1024):g} MiB"
    return f"{count / 1024:g} KiB"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
