"""Who holds a home, in the words of the command holding it (decision 259).

A second `klaw chat` beside a first one was told to talk to "its web page: 'klaw serve' printed the
address", though a `klaw chat` serves no page: the home's lock said only "program": "klaw". The lock
now records the command (`klaw chat`, `klaw serve`, `klaw engine`, `klaw mcp serve`, or `library`),
and each refusal says what to do about that one. Real processes: the holder is a piped `klaw chat`
at its prompt in a terminal (tmux), or a `klaw serve`; the refused are `klaw` subprocesses.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home, terminal
from tests.cli.piped_chat import piped_bytes, refused
from tests.serve_helpers import STARTS_WITHIN, read_until, running, stop, web_page


async def test_a_second_klaw_chat_is_told_to_leave_the_first_not_to_open_a_web_page(tmp_path: Path) -> None:
    """The holder is a person's `klaw chat` at its prompt in a terminal (tmux): a piped chat since waits
    only for another piped one (decision 487), so the one refused here is left by the person."""
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = chat_env(home, model.base_url)
        (tmp_path / "t").mkdir()
        async with terminal([sys.executable, "-m", "klaw", "chat"], env, tmp_path / "t") as term:
            await term.wait_for(lambda s: s.rstrip().endswith("you ›"), "the prompt")
            record = json.loads((home / "engine.lock").read_text(encoding="utf-8"))
            assert record["command"] == "klaw chat"  # what the lock says
            pid = record["pid"]
            line = refused(*await piped_bytes(env, b"hi again\n"))
            assert f"another `klaw chat` (pid {pid}) is using {home}: leave it first" in line
            assert "/exit or Ctrl-D" in line
            assert "web page" not in line and "klaw serve" not in line  # a chat serves no page

            async with running(env=env, stdout=None) as serve:
                _, err = await asyncio.wait_for(serve.communicate(), timeout=STARTS_WITHIN)
            said = " ".join(err.decode().split())
            assert serve.returncode == 75, said  # the home is held, no mistake: a service restarts (decision 435)
            assert f"`klaw chat` (pid {pid}) is running on {home}: leave it first" in said
            assert "Traceback" not in said and "Klaw(home)" not in said
            assert not model.chat_requests  # neither refused process reached the model
            await term.type_line("/exit")


async def test_klaw_chat_beside_an_engine_and_its_gateway_talks_to_the_engine(tmp_path: Path) -> None:
    """newcomer9 named the running gateway's page in the refusal; since decision 430 `klaw chat` beside
    `klaw engine` is no longer refused: it attaches on engine.sock and gets the console's reply while the
    gateway serves the web page on its own connection (the engine routes each channel's replies to its own)."""
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = {**chat_env(home, model.base_url), "KLAW__CHANNELS__WEB__PORT": "0"}
        async with running("-m", "klaw", "engine", env=env, stdout=None) as engine:
            await read_until(engine.stderr, "klaw engine listening on", who="klaw engine")
            async with running("-m", "klaw", "gateway", env=env, stderr=None) as gateway:
                await web_page(gateway)
                model.reply_text("the console's answer")
                code, out, err = await piped_bytes(env, b"hello\n")
                assert (code, out) == (0, "the console's answer\n"), err
                await stop(gateway)
            assert not (home / "web_address").exists()  # the page is gone: so is its address
            await stop(engine)
