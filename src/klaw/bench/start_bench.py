"""`klaw bench start`: what a `klaw engine` (or `klaw serve`) costs from exec to its ready line.

The figure a Raspberry Pi's person waits for and the test suite pays hundreds of times: the CPU time the
process used (user + system, read from /proc at the moment it prints its ready line), the wall time to
that line, and its resident memory then. Each run is a fresh process on the same home, stopped with
SIGTERM once ready; a first run, not counted, builds what a home keeps between starts (the embedder's
ONNX graph, Python's bytecode). The model is the fake OpenAI server, so the start's model check answers
and nothing waits on a network.

`against` names another klaw source tree (an older checkout's `src`): its runs alternate with this one's,
run by run, so both share the machine's load of the same minutes (decision 410). `chats` fills the home
with that many idle chats first: a start's cost must not grow with them (decision 477).
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from klaw.bench.idle_chats import fill_idle_chats
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer

START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0
SETTLED_TIMEOUT_S = 60.0
SETTLED_QUIET_S = 0.5
"""A started process is settled once its CPU time has not moved for this long (its clock ticks are 10 ms)."""
READY_WORDS = {"engine": "klaw engine listening on", "serve": "klaw engine and gateway running"}
"""The line each command prints once it takes messages (what tests and service managers wait for)."""


@dataclass(frozen=True)
class StartRun:
    """One process's start: CPU seconds used and wall seconds elapsed at its ready line, resident MB then;
    CPU seconds once it settled (what it did in the background after its ready line included: the
    embedder's warm-up) and the resident MB then."""

    cpu_s: float | None
    wall_s: float
    rss_mb: float | None
    settled_cpu_s: float | None = None
    settled_rss_mb: float | None = None


@dataclass
class StartFigures:
    """The runs of one klaw source tree (`source` None: the klaw running this bench) and their medians."""

    source: str | None
    runs: list[StartRun] = field(default_factory=list)

    @property
    def cpu_s(self) -> float | None:
        return _median([run.cpu_s for run in self.runs])

    @property
    def wall_s(self) -> float:
        return statistics.median(run.wall_s for run in self.runs)

    @property
    def rss_mb(self) -> float | None:
        return _median([run.rss_mb for run in self.runs])

    @property
    def settled_cpu_s(self) -> float | None:
        return _median([run.settled_cpu_s for run in self.runs])

    @property
    def settled_rss_mb(self) -> float | None:
        return _median([run.settled_rss_mb for run in self.runs])


def _median(values: list[float | None]) -> float | None:
    known = [value for value in values if value is not None]
    return statistics.median(known) if known else None


@dataclass
class StartResult:
    command: str
    embedder: str
    runs: int
    figures: list[StartFigures]
    chats: int = 0  # idle chats the home held (`--chats`, decision 477)


def _proc_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a running process, from /proc (None where there is none)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _proc_rss_mb(pid: int) -> float | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return None


def _environment(home: KlawHome, base_url: str, embedder: str, source: str | None) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("KLAW")}
    env.update(
        KLAW_HOME=str(home.root),
        KLAW__MODELS__FAKE__BASEURL=base_url,
        KLAW__MODELS__FAKE__MAXRETRIES="0",
        KLAW__ROUTING__DEFAULT="FAKE",
        KLAW__EMBEDDER__BACKEND=embedder,
        KLAW__CHANNELS__WEB__PORT="0",  # klaw serve: any free port, never a person's own page
    )
    if embedder == "fake":
        env["KLAW__EMBEDDER__DIM"] = "32"
    if source is not None:
        env["PYTHONPATH"] = source
    return env


async def _settled_cpu_s(pid: int) -> float | None:
    """The process's CPU seconds once they stopped growing for `SETTLED_QUIET_S` (None without /proc)."""
    last = _proc_cpu_s(pid)
    deadline = time.monotonic() + SETTLED_TIMEOUT_S
    while last is not None and time.monotonic() < deadline:
        await asyncio.sleep(SETTLED_QUIET_S)
        now = _proc_cpu_s(pid)
        if now == last:
            break
        last = now
    return last


async def _one_start(command: str, env: dict[str, str]) -> StartRun:
    """Start `klaw command`, read its output until the ready line, take the figures, stop it."""
    began = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "klaw",
        command,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert process.stdout is not None
    said: list[str] = []
    drained: asyncio.Task[bytes] | None = None
    try:
        async with asyncio.timeout(START_TIMEOUT_S):
            while line := (await process.stdout.readline()).decode(errors="replace"):
                said.append(line)
                if READY_WORDS[command] in line:
                    ready = StartRun(_proc_cpu_s(process.pid), time.perf_counter() - began, _proc_rss_mb(process.pid))
                    break
            else:
                raise RuntimeError(f"klaw {command} exited at start: {''.join(said[-5:]).strip()}")
        drained = asyncio.create_task(process.stdout.read())  # its later lines never fill the pipe
        settled = await _settled_cpu_s(process.pid)
        run = StartRun(ready.cpu_s, ready.wall_s, ready.rss_mb, settled, _proc_rss_mb(process.pid))
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
        if drained is None:
            drained = asyncio.create_task(process.stdout.read())
        try:
            async with asyncio.timeout(STOP_TIMEOUT_S):  # not wait_for, which can drop a cancel (decision 428)
                await process.wait()
        except TimeoutError:
            process.kill()
            await process.wait()
        await drained
    return run


async def measure_start(
    root: Path,
    *,
    command: str = "engine",
    runs: int = 8,
    embedder: str = "minilm",
    against: str | None = None,
    chats: int = 0,
) -> StartResult:
    """`runs` starts of `klaw command` on one home under `root` (after one uncounted start), alternated run
    by run with the tree `against` when it is given; the home holds `chats` idle chats (bench/idle_chats.py)."""
    home = KlawHome(root / "home")
    initialise_home(home)
    if chats:
        await fill_idle_chats(home, chats)
    sources: list[str | None] = [None] if against is None else [None, against]
    figures = [StartFigures(source) for source in sources]
    async with FakeOpenAiServer() as model:
        envs = [_environment(home, model.base_url, embedder, source) for source in sources]
        for env in envs:
            await _one_start(command, env)  # builds the home's caches; not counted
        for number in range(runs):
            order = range(len(envs)) if number % 2 == 0 else reversed(range(len(envs)))
            for index in order:
                figures[index].runs.append(await _one_start(command, envs[index]))
    return StartResult(command=command, embedder=embedder, runs=runs, figures=figures, chats=chats)
