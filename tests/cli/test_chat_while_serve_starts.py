"""`klaw chat` in the seconds a `klaw serve` takes to start (a service restarted after a crash): it waits for the
engine to answer and attaches, or, past its bound, says to try again in a moment; it was told to `kill` the
service (newcomer19, decision 475). The serve is held in its start by its MCP server, which starts only when
the test says (a gate file), so no step depends on timing."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import pytest

from klaw import engine_presence
from klaw.llm.fake_server import FakeOpenAiServer
from tests.cli.chat_terminal import init_home
from tests.cli.klaw_here import klaw_here
from tests.cli.piped_chat import started_chat
from tests.cli.test_chat_piped_mcp import slow_notes
from tests.serve_helpers import STARTS_WITHIN


async def test_a_chat_waits_for_a_starting_serve_and_attaches_or_says_to_try_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, spawned, gate = tmp_path / "home", tmp_path / "spawned", tmp_path / "gate"
    init_home(home)
    async with FakeOpenAiServer() as model:
        env = {
            **slow_notes(home, model.base_url, delay=STARTS_WITHIN, spawned=spawned, gate=gate),
            "KLAW__MCP__STARTWAITSECONDS": str(STARTS_WITHIN),  # it listens once the gate opens
            "KLAW__CHANNELS__WEB__PORT": "0",
        }
        serve = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "klaw",
            "serve",
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            async with asyncio.timeout(STARTS_WITHIN):
                while not spawned.exists():  # the engine is starting: the home held, engine.sock not answering
                    assert serve.returncode is None
                    await asyncio.sleep(0.02)
            # Past a (shortened) bound: try again in a moment, exit 75; never `kill`.
            monkeypatch.setattr(engine_presence, "STARTING_WAIT_SECONDS", 0.3, raising=False)
            overrides = {key: value for key, value in env.items() if key.startswith("KLAW")}
            soon = await asyncio.to_thread(klaw_here, home, "chat", env=overrides, stdin="hello\n")
            said = " ".join(soon.stderr.split())
            assert soon.returncode == 75 and soon.stdout == "", said
            assert f"`klaw serve` (pid {serve.pid}) is still starting on {home}: try again in a moment" in said
            assert "kill" not in said and "Traceback" not in said, said

            # Within the bound: it waits, the serve comes up, and the piped message is answered there.
            model.reply_text("answered once it was up")
            chat = await started_chat(env, b"hello while it starts\n")
            assert chat.stderr is not None
            async with asyncio.timeout(STARTS_WITHIN):
                line = (await chat.stderr.readline()).decode()
            assert f"`klaw serve` (pid {serve.pid}) is starting on {home}: waiting for it" in line, line
            gate.touch()
            out, err = await asyncio.wait_for(chat.communicate(), STARTS_WITHIN)
            assert (chat.returncode, out.decode()) == (0, "answered once it was up\n"), err.decode()
            assert b"kill" not in err
        finally:
            if serve.returncode is None:
                serve.send_signal(signal.SIGTERM)
                await asyncio.wait_for(serve.communicate(), STARTS_WITHIN)
