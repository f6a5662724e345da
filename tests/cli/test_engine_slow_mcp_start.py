"""`klaw engine` (and so `klaw serve` and the interactive chat, which start the same way) with an MCP server
that takes longer than mcp.startWaitSeconds to start, as a Python server does on a busy machine: nothing
alarming is printed, since nothing failed (decision 315). Before, every start printed "MCP server 'notes' was
still starting after 5 s; …" as a warning (in `klaw chat`: "(klaw logged a warning: see …)")."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from pathlib import Path

from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import init_home
from tests.cli.test_chat_piped_mcp import slow_notes
from tests.engine import short_socket_dir

START_SECONDS = 60  # a safety net (decision 289): the engine listens within seconds


async def test_a_server_slower_than_the_start_wait_is_not_warned_about(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = {**slow_notes(home, model.base_url, delay=30), "KLAW__MCP__STARTWAITSECONDS": "1"}
        errors = tmp_path / "engine.err"
        with errors.open("wb") as err:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "klaw", "engine", env=env, stdout=asyncio.subprocess.DEVNULL, stderr=err
            )
        try:
            async with asyncio.timeout(START_SECONDS):  # it listens once its servers' start wait is over
                while True:
                    assert process.returncode is None, errors.read_text(encoding="utf-8")
                    with contextlib.suppress(OSError):
                        _, writer = await asyncio.open_unix_connection(str(KlawHome(home).socket_path))
                        writer.close()
                        break
                    await asyncio.sleep(0.05)
        finally:
            process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(process.wait(), START_SECONDS)
    said = errors.read_text(encoding="utf-8")
    assert "still starting" not in said and "WARNING" not in said, said


async def test_a_sigterm_while_serve_starts_stops_it_in_order() -> None:
    """A SIGTERM in the start's seconds (here: while it waits for its MCP server) killed `klaw serve` at
    once, exit 143, WAL files left beside klaw.db (lows23); it now stops as Ctrl-C does, exit 0 as a stop
    after the start (decision 431)."""
    with short_socket_dir() as directory:
        home = directory / "home"
        init_home(home)
        spawned = directory / "spawned"
        async with FakeOpenAiServer() as model:
            env = {**slow_notes(home, model.base_url, delay=30, spawned=spawned), "KLAW__CHANNELS__WEB__PORT": "0"}
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "klaw",
                "serve",
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            async with asyncio.timeout(START_SECONDS):
                while not spawned.exists():  # the engine is starting: klaw.db open, the server's wait begun
                    assert process.returncode is None
                    await asyncio.sleep(0.02)
                process.send_signal(signal.SIGTERM)
                out, err = await process.communicate()
        assert process.returncode == 0, err.decode()
        assert b"web page:" not in out and b"Traceback" not in err, err.decode()
        left = sorted(path.name for path in home.iterdir())
        assert "klaw.db" in left and "klaw.db-wal" not in left and "engine.sock" not in left, left
