"""One engine per KLAW_HOME, listening or not (docs/decisions/233-home-lock.md).

A library engine (`Klaw(home)`, no socket) used to go unseen: a second engine started beside it (two
schedulers firing every task twice) and `klaw reindex` replaced klaw.db under it. Real processes and
files: the holder is a Python program using klaw as a library, the refused are `klaw` subprocesses
and engines started here.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from klaw import EngineAlreadyRunningError, FunctionModel, Klaw, ManualClock
from klaw.home_lock import HomeLock, holder_of
from tests.cli.test_cli import klaw

CONFIG = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}
HOLDER = """
import asyncio, sys
from klaw import FunctionModel, Klaw

async def main() -> None:
    config = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}
    async with Klaw(sys.argv[1], config=config, model=FunctionModel(lambda messages, info: "ok")) as agent:
        assert await agent.ask("alice", "hello") == "ok"
        print("holding", flush=True)
        await asyncio.sleep(600)

asyncio.run(main())
"""


def a_library(home: Path) -> Klaw:
    return Klaw(home, config=CONFIG, model=FunctionModel(lambda messages, info: "ok"), clock=ManualClock())


@pytest.fixture
def library_program(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """A program that opened tmp_path/home with `Klaw(home)` (not listening) and keeps it open."""
    program = tmp_path / "my_bot.py"
    program.write_text(HOLDER, encoding="utf-8")
    command = [sys.executable, str(program), str(tmp_path / "home")]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line == "holding\n", process.stderr.read() if process.stderr else line
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=30)


async def test_a_second_engine_beside_a_library_engine_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    async with a_library(home) as first:
        assert first.engine.socket is None and not (home / "engine.sock").exists()
        with pytest.raises(EngineAlreadyRunningError) as refused:
            await a_library(home).start()
        message = str(refused.value)
        # this very program holds it: "end that program first (pid <our own>)" would be no advice at all
        assert message.startswith(
            f"cannot start: this program already has Klaw('{home.resolve()}') open: use that one, or close it first."
        )
        assert refused.value.open is first  # the Klaw it means, for a notebook that lost it (decision 513)
        assert stat.S_IMODE(os.stat(home / "engine.lock").st_mode) == 0o600
        assert await first.ask("alice", "still here?") == "ok"  # the refused start left the first alone
    async with a_library(home) as again:  # given back at shutdown
        assert await again.ask("alice", "hello") == "ok"
    assert holder_of(home) is None


async def test_klaw_refuses_to_run_beside_a_library_program_until_it_is_killed(
    tmp_path: Path, library_program: subprocess.Popen[str]
) -> None:
    home = tmp_path / "home"
    database = (home / "klaw.db").stat()
    reindex = klaw(home, "reindex")
    assert reindex.returncode == 1, reindex.stdout
    assert f"pid {library_program.pid}, program my_bot.py" in reindex.stderr and "Klaw(home)" in reindex.stderr
    assert "Traceback" not in reindex.stderr
    assert (home / "klaw.db").stat().st_ino == database.st_ino  # not replaced under the program
    forget = klaw(home, "memory", "forget", "segment", "1", "--yes")
    assert forget.returncode == 1 and f"pid {library_program.pid}, program my_bot.py" in forget.stderr
    with pytest.raises(EngineAlreadyRunningError, match=f"pid {library_program.pid}"):
        await a_library(home).start()
    serve = klaw(home, "mcp", "serve", "--chat", "console:me")  # it cannot ask a program that does not listen
    assert serve.returncode == 2 and f"pid {library_program.pid}, program my_bot.py" in serve.stderr
    assert "Klaw(home, listen=True)" in serve.stderr and "Traceback" not in serve.stderr

    library_program.send_signal(signal.SIGKILL)  # no shutdown: the kernel lets the lock go
    library_program.wait(timeout=30)
    async with a_library(home) as next_engine:
        assert await next_engine.ask("alice", "anyone?") == "ok"
        refused = klaw(home, "reindex")  # and this engine holds it in turn, from this process
        assert refused.returncode == 1 and f"pid {os.getpid()}" in refused.stderr


async def test_an_engine_cannot_start_while_maintenance_holds_the_home(tmp_path: Path) -> None:
    """The lock goes both ways: what `klaw reindex` holds for its run keeps engines out, and `klaw mcp
    serve` says so instead of opening the home itself."""
    home = tmp_path / "home"
    async with a_library(home):
        pass  # a home with its engine.yaml and database
    lock = HomeLock.acquire(home, "klaw reindex")  # what a running `klaw reindex` holds
    try:
        with pytest.raises(EngineAlreadyRunningError, match=r"klaw reindex \(pid \d+.*wait for it to finish"):
            await a_library(home).start()
        serve = klaw(home, "mcp", "serve", "--chat", "console:me")
    finally:
        lock.release()
    assert serve.returncode == 2, serve.stderr
    assert f"klaw reindex (pid {os.getpid()}" in serve.stderr and "wait for it to finish" in serve.stderr
    assert "opening it in this process" not in serve.stderr
