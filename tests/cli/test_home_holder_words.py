"""Who holds a home, in the words of the command holding it (decision 259).

A second `klaw chat` beside a first one was told to talk to "its web page: 'klaw serve' printed the
address", though a `klaw chat` serves no page: the home's lock said only "program": "klaw". The lock
now records the command (`klaw chat`, `klaw serve`, `klaw engine`, `klaw mcp serve`, or `library`),
and each refusal says what to do about that one. Real processes: the holder is a piped `klaw chat`
waiting for its model's answer, or a `klaw serve`; the refused are `klaw` subprocesses.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import chat_env, init_home
from tests.cli.piped_chat import piped_bytes, refused, started_chat
from tests.serve_helpers import STARTS_WITHIN, read_until, running, stop, web_page


async def test_a_second_klaw_chat_is_told_to_leave_the_first_not_to_open_a_web_page(tmp_path: Path) -> None:
    home = tmp_path / "home"
    init_home(home)
    async with FakeOpenAiServer() as model:
        # the first chat's answer is held while two more klaw processes start: on a loaded machine that
        # can pass the model's default timeoutSeconds (120 s)
        env = {**chat_env(home, model.base_url), "KLAW__MODELS__FAKE__TIMEOUTSECONDS": "900"}
        asked, gate = asyncio.Event(), asyncio.Event()

        async def hold_the_answer() -> None:  # the first chat waits for its model: it holds the home
            asked.set()
            await gate.wait()

        model.reply_text("the first chat's answer", before=hold_the_answer)
        first = await started_chat(env, b"hello\n")
        try:
            await asyncio.wait_for(asked.wait(), timeout=STARTS_WITHIN)
            line = refused(*await piped_bytes(env, b"hi again\n"))
            assert f"another `klaw chat` (pid {first.pid}) is using {home}: leave it first" in line
            assert "/exit or Ctrl-D" in line
            assert "web page" not in line and "klaw serve" not in line  # a chat serves no page
            record = json.loads((home / "engine.lock").read_text(encoding="utf-8"))
            assert (record["command"], record["pid"]) == ("klaw chat", first.pid)  # what the lock says

            async with running(env=env, stdout=None) as serve:
                _, err = await asyncio.wait_for(serve.communicate(), timeout=STARTS_WITHIN)
            said = " ".join(err.decode().split())
            assert serve.returncode == 75, said  # the home is held, no mistake: a service restarts (decision 435)
            assert f"`klaw chat` (pid {first.pid}) is running on {home}: leave it first" in said
            assert "Traceback" not in said and "Klaw(home)" not in said
            assert len(model.chat_requests) == 1  # neither refused process reached the model
        finally:
            gate.set()
            out, _ = await asyncio.wait_for(first.communicate(), timeout=STARTS_WITHIN)
        assert out.decode() == "the first chat's answer\n"


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
