"""A piped `klaw chat` that loses the start race to another klaw process exits 2, as one that finds the holder
before starting does (decision 435: `klaw chat` is a person at a terminal, told what to do; 75 is the
service's "try again later"). Before, the loser of the race exited 75 (decision 443).

The race is made certain: the chat has looked for a holder (none) and waits for its piped input; a library
`Klaw` takes the home meanwhile; then the input comes and the chat's engine start is refused."""

from __future__ import annotations

import asyncio
from pathlib import Path

from klaw import FunctionModel, Klaw
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.piped_chat import CHAT_SECONDS, _chat_process, refused

READ = "0 0x0 "  # /proc/PID/syscall of a process in read(0, …): the chat reads its piped input


async def _reading_stdin(pid: int) -> None:
    async with asyncio.timeout(CHAT_SECONDS):
        while not Path(f"/proc/{pid}/syscall").read_text().startswith(READ):  # noqa: ASYNC110 (another process's state)
            await asyncio.sleep(0.05)


async def test_a_piped_chat_that_loses_the_start_race_exits_2(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    chat = await _chat_process(chat_env(home, "http://127.0.0.1:9/v1"), "--skip-check")
    await _reading_stdin(chat.pid)  # past its look for a running engine: none
    config = {"embedder": {"backend": "fake", "dim": 32}, "summarizer": {"enabled": False}}
    async with Klaw(home, config=config, model=FunctionModel(lambda _m, _i: "ok")):
        out, err = await asyncio.wait_for(chat.communicate(b"hello"), CHAT_SECONDS)
    said = refused(chat.returncode or 0, out.decode(), err.decode())  # before: exit 75
    assert "holds" in said, said
