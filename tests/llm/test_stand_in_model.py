"""`python -m klaw.llm.fake_server [PORT]`: a stand-in model for trying klaw before having one. It answers
the OpenAI chat protocol by echoing the last message, and the engine.yaml lines it prints are a valid
configuration that routes to it."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import httpx

from klaw.config_loader import load_config


async def test_the_stand_in_echoes_and_prints_a_config_that_uses_it(tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "klaw.llm.fake_server",
        "0",
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert process.stdout is not None
    try:
        printed = ""
        async with asyncio.timeout(30):
            while "Ctrl-C stops it." not in printed:
                line = (await process.stdout.readline()).decode()
                assert line, "the stand-in exited early"
                printed += line
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
        process.send_signal(signal.SIGINT)
        async with asyncio.timeout(30):
            assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_a_long_running_server_keeps_only_its_last_requests() -> None:
    """The stand-in runs for hours and every request holds the tool schemas: it keeps the last few."""
    from klaw.llm.fake_server import FakeOpenAiServer

    async with FakeOpenAiServer(keep_requests=2) as server, httpx.AsyncClient() as client:
        for word in ("one", "two", "three"):
            body = {"model": "m", "messages": [{"role": "user", "content": word}]}
            assert (await client.post(f"{server.base_url}/chat/completions", json=body)).status_code == 200
        assert [r.body["messages"][0]["content"] for r in server.requests] == ["two", "three"]
