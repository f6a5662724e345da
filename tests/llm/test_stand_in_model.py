"""`python -m klaw.llm.fake_server [PORT]`: a stand-in model for trying klaw before having one. It answers
the OpenAI chat protocol by echoing the last message, and the engine.yaml lines it prints are a valid
configuration that routes to it."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx

from klaw.config_loader import load_config
from tests.serve_helpers import read_until, running, stop


async def test_the_stand_in_echoes_and_prints_a_config_that_uses_it(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    async with running("-m", "klaw.llm.fake_server", "0", env=env, stderr=None) as process:
        printed = await read_until(process.stdout, "Ctrl-C stops it.", who="the stand-in", folded=False)
        snippet = printed.split("then run `klaw chat`:\n", 1)[1].split("\nCtrl-C", 1)[0]
        (tmp_path / "engine.yaml").write_text(snippet, encoding="utf-8")
        config = load_config(tmp_path / "engine.yaml").config
        base_url = config.model(config.routing.default).base_url
        async with httpx.AsyncClient() as client:
            answer = await client.post(
                f"{base_url}/chat/completions",
                json={"model": "stand-in/echo", "messages": [{"role": "user", "content": "hello there"}]},
            )
        assert answer.status_code == 200
        assert "hello there" in answer.json()["choices"][0]["message"]["content"]
        assert await stop(process, signal.SIGINT) == 0


async def test_a_long_running_server_keeps_only_its_last_requests() -> None:
    """The stand-in runs for hours and every request holds the tool schemas: it keeps the last few."""
    from klaw.llm.fake_server import FakeOpenAiServer

    async with FakeOpenAiServer(keep_requests=2) as server, httpx.AsyncClient() as client:
        for word in ("one", "two", "three"):
            body = {"model": "m", "messages": [{"role": "user", "content": word}]}
            assert (await client.post(f"{server.base_url}/chat/completions", json=body)).status_code == 200
        assert [r.body["messages"][0]["content"] for r in server.requests] == ["two", "three"]


async def test_the_stand_in_calls_a_tool_when_asked_and_reports_its_answer(tmp_path: Path) -> None:
    """newcomer13: an echo never calls a tool, so approvals, tasks and the tools could not be tried without
    a real model. `!TOOL {json}` now calls it; the tool's result comes back as the answer. Through
    `echo … | klaw chat` on a home routed to the stand-in, as a person would."""
    from tests.cli.chat_terminal import chat_env, init_home
    from tests.cli.piped_chat import piped

    home = tmp_path / "home"
    init_home(home)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    async with running("-m", "klaw.llm.fake_server", "0", env=env, stderr=None) as process:
        printed = await read_until(process.stdout, "Ctrl-C stops it.", who="the stand-in", folded=False)
        assert "!TOOL {json arguments}" in printed
        base_url = printed.split("baseUrl: ", 1)[1].split("\n", 1)[0]
        chat = chat_env(home, base_url)

        code, out, err = await piped(chat, '!current_time {"timezone": "UTC"}\n')
        assert code == 0, err
        assert out.startswith("The tool answered: ") and '"timezone":"UTC"' in out.replace(" ", ""), out

        # The stand-in's other answers are its words alone: asked over HTTP with the tool klaw offered above
        # (four `klaw chat` processes fewer).
        offered = [{"type": "function", "function": {"name": "current_time", "parameters": {"type": "object"}}}]
        async with httpx.AsyncClient(base_url=base_url) as client:

            async def answer(text: str) -> str:
                body = {"model": "stand-in/echo", "messages": [{"role": "user", "content": text}], "tools": offered}
                reply = await client.post("/chat/completions", json=body)
                assert reply.status_code == 200, reply.text
                return str(reply.json()["choices"][0]["message"]["content"])

            out = await answer("!no_such_tool")
            assert "no tool named 'no_such_tool' is offered in this chat; offered: current_time" in out, out
            assert "must be a JSON object" in await answer("!current_time [1, 2]")
            # adversary22: a number past 4,300 digits was an HTTP 500 with a traceback, which klaw retried.
            out = await answer('!current_time {"n": ' + "9" * 5000 + "}")
            assert "cannot be read (a number too long or nesting too deep)" in out, out
            assert await answer("just talking") == "echo: just talking"
        assert await stop(process, signal.SIGINT) == 0


async def test_a_call_asked_in_a_joined_turn_is_made(tmp_path: Path) -> None:
    """adversary23: messages sent close together reach the model as one turn, joined line by line; the
    stand-in looked at the turn's first line only and echoed "hello\\n!current_time". The turn's last `!`
    line is the call (decision 442). Through a whole engine whose model is the stand-in."""
    from klaw.llm.stand_in import stand_in_reply
    from tests.engine.harness import running_engine

    async with running_engine(tmp_path) as h:
        h.server.default_reply = stand_in_reply
        before = len(h.delivered)
        for text in ("hello", '!current_time {"timezone": "UTC"}', "thanks"):
            await h.say(text)  # within the debounce: one turn
        await h.clock.advance(h.engine.config.processing.debounce_ms / 1000)
        await h.wait_for_replies(before + 1)
        answer = h.delivered[-1].text
        assert answer.startswith("The tool answered: ") and '"timezone":"UTC"' in answer.replace(" ", ""), answer
        assert (await h.turn('!current_time {"timezone": "UTC"}\nwhat time is it?')).text.startswith(
            "The tool answered: "
        )  # a call with a question after it in the same message: the call is still the last `!` line


def test_a_taken_port_is_refused_with_the_command_that_takes_another(tmp_path: Path) -> None:
    """newcomer20: "…: Address already in use; pass another port" did not say how a port is passed."""
    import shlex
    import socket
    import subprocess
    import sys

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "klaw.llm.fake_server", str(port)], capture_output=True, text=True, timeout=60
        )
    assert result.returncode == 1
    said = f"pass another port: {shlex.quote(sys.executable)} -m klaw.llm.fake_server {port + 1}"
    assert said in result.stderr and "Traceback" not in result.stderr, result.stderr
