"""`klaw serve`, `klaw engine` and `klaw gateway` run as a person runs them, for the tests that start them
as subprocesses: the home's engine.yaml, the environment, waiting for the web page's address, for a line
of the log or for the engine's socket, and stopping with a signal. Every wait is on what the process says
or does; the deadlines are safety nets only, generous because CI runs the suite on two loaded CPUs
(decision 271), where a `klaw serve` took over 30 s to start (docs/decisions/289-test-waits-are-safety-nets.md)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import yaml

from klaw.home import KlawHome

STARTS_WITHIN = 120.0  # seconds: a safety net for a subprocess to start and say something
STOPS_WITHIN = 60.0  # seconds: a safety net for a subprocess to stop once signalled
SERVE = ("-m", "klaw", "serve")


def serve_config(model_url: str, **sections: Any) -> dict[str, Any]:
    """engine.yaml's settings for `klaw serve`: the model `fake/small` at `model_url`, the fake embedder, no
    summaries, the web page on a port the kernel picks; each keyword replaces that top-level section (None
    leaves it out)."""
    config: dict[str, Any] = {
        "models": {"fake/small": {"baseUrl": model_url, "contextBudget": 4000, "maxRetries": 0}},
        "routing": {"default": "fake/small"},
        "embedder": {"backend": "fake", "dim": 32},
        "summarizer": {"enabled": False},
        "channels": {"web": {"port": 0}},
    }
    return {key: value for key, value in {**config, **sections}.items() if value is not None}


def write_serve_home(home: Path, config: dict[str, Any]) -> Path:
    """`home` (made if missing) with `config` as its engine.yaml."""
    home.mkdir(exist_ok=True)
    (home / "engine.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return home


def serve_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment for a klaw subprocess on `home`: output unbuffered, lines wide enough not to wrap."""
    return {**os.environ, "KLAW_HOME": str(home), "PYTHONUNBUFFERED": "1", "COLUMNS": "300", **extra}


@asynccontextmanager
async def running(
    *argv: str,
    env: dict[str, str],
    stdout: int | None = asyncio.subprocess.PIPE,
    stderr: int | None = asyncio.subprocess.PIPE,
    preexec_fn: Callable[[], object] | None = None,
) -> AsyncIterator[asyncio.subprocess.Process]:
    """`python argv…` (`klaw serve` by default) as a subprocess; killed at the end if it still runs, so a
    failing test leaves nothing behind."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, *(argv or SERVE), env=env, stdout=stdout, stderr=stderr, preexec_fn=preexec_fn
    )
    try:
        yield process
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def read_until(
    stream: asyncio.StreamReader | None, text: str, *, who: str = "klaw serve", folded: bool = True
) -> str:
    """What `stream` says up to the line that holds `text`, its white space folded (a terminal wraps a long
    line) unless `folded` is False."""
    assert stream is not None
    seen = ""
    async with asyncio.timeout(STARTS_WITHIN):
        while text not in " ".join(seen.split()):
            line = (await stream.readline()).decode()
            assert line, f"{who} ended before saying {text!r}: {seen}"
            seen += line
    return " ".join(seen.split()) if folded else seen


async def web_page(process: asyncio.subprocess.Process, lines: list[str] | None = None) -> str:
    """The web page's address, from the `web page: URL` line `klaw serve` prints once it listens; the lines
    read up to it are added to `lines`."""
    assert process.stdout is not None
    async with asyncio.timeout(STARTS_WITHIN):
        while not (line := (await process.stdout.readline()).decode()).startswith("web page:"):
            assert line, "klaw serve exited early"
            if lines is not None:
                lines.append(line)
    if lines is not None:
        lines.append(line)
    return line.split()[-1]


async def exit_status(process: asyncio.subprocess.Process) -> int:
    """Wait for the process to exit; its exit status. One that does not exit in time is killed, and
    TimeoutError raised."""
    try:
        async with asyncio.timeout(STOPS_WITHIN):
            return await process.wait()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise


async def stop(process: asyncio.subprocess.Process, sent: signal.Signals = signal.SIGTERM) -> int:
    """Send `sent` (unless the process has ended) and wait for it to exit: `exit_status`."""
    if process.returncode is None:
        with suppress(ProcessLookupError):
            process.send_signal(sent)
    return await exit_status(process)


class Lines:
    """A process's stream read line by line, everything read kept."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self.stream = stream
        self.seen: list[str] = []

    async def until(self, words: str, seconds: float = STARTS_WITHIN) -> str:
        """The next line holding `words`; `seconds` is a safety net only."""
        async with asyncio.timeout(seconds):
            while True:
                line = (await self.stream.readline()).decode()
                assert line, f"the process closed its output; it said: {self.seen}"
                self.seen.append(line)
                if words in line:
                    return line


class EngineProcess:
    """`klaw engine` on `home`, started (again) and stopped by the test; its stderr goes to
    engine-N.err in the home, N counting the starts."""

    def __init__(self, home: KlawHome) -> None:
        self.home = home
        self.process: asyncio.subprocess.Process | None = None
        self.starts = 0

    async def start(self) -> None:
        """Start it and wait until its socket takes a connection."""
        self.starts += 1
        env = {**os.environ, "KLAW_HOME": str(self.home.root)}
        stderr = (self.home.root / f"engine-{self.starts}.err").open("wb")
        self.process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "klaw", "engine", env=env, stdout=asyncio.subprocess.DEVNULL, stderr=stderr
        )
        stderr.close()
        async with asyncio.timeout(STARTS_WITHIN):
            while True:
                if self.process.returncode is not None:
                    raise AssertionError((self.home.root / f"engine-{self.starts}.err").read_text())
                try:
                    _, writer = await asyncio.open_unix_connection(str(self.home.socket_path))
                except OSError:
                    await asyncio.sleep(0.05)
                    continue
                writer.close()
                return

    async def stop(self, sig: signal.Signals) -> int:
        """Send `sig` and wait for it to exit: `exit_status`."""
        assert self.process is not None
        return await stop(self.process, sig)
