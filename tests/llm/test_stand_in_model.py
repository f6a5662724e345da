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
