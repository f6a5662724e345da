"""`klaw serve` stopped with a reply in flight: the first Ctrl-C says it finishes that reply and that a
second Ctrl-C quits at once, as `klaw chat` does; the second one does (it used to be ignored, the person
waiting up to the model's timeoutSeconds). The message whose reply was dropped is kept, and the next
`klaw serve` answers it: the history then holds the reply, asked through the web API with the token."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import httpx
import yaml

from klaw.cli.stopping import AT_ONCE, FINISHING
from klaw.llm.fake_server import FakeOpenAiServer
from tests.engine import short_socket_dir

ASKED = "remember to buy oat milk"


async def start_serve(home: Path) -> tuple[asyncio.subprocess.Process, str]:
    env = {**os.environ, "KLAW_HOME": str(home), "PYTHONUNBUFFERED": "1", "COLUMNS": "300"}
    serve = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "klaw", "serve", env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert serve.stdout is not None
    async with asyncio.timeout(60):
        while not (line := (await serve.stdout.readline()).decode()).startswith("web page:"):
            assert line, "klaw serve exited early"
    return serve, line.split()[-1]


async def stderr_until(serve: asyncio.subprocess.Process, text: str) -> str:
    assert serve.stderr is not None
    seen = ""
    async with asyncio.timeout(30):
        while text not in " ".join(seen.split()):
            line = (await serve.stderr.readline()).decode()
            assert line, f"klaw serve ended before saying {text!r}: {seen}"
            seen += line
    return seen


async def test_a_second_ctrl_c_quits_at_once_and_the_message_is_answered_at_the_next_start() -> None:
    with short_socket_dir() as directory:
        home = directory / "home"
        home.mkdir()
        async with FakeOpenAiServer() as model:
            config = {
                "models": {"fake/small": {"baseUrl": model.base_url, "contextBudget": 4000, "maxRetries": 0,
                                          "timeoutSeconds": 600}},
                "routing": {"default": "fake/small"},
                "embedder": {"backend": "fake", "dim": 32},
                "summarizer": {"enabled": False},
                "channels": {"web": {"port": 0}},
            }  # fmt: skip
            (home / "engine.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
            asked = asyncio.Event()

            async def think_for_ever() -> None:
                asked.set()
                await asyncio.Event().wait()

            model.reply_text("never sent", before=think_for_ever)
            serve, url = await start_serve(home)
            try:
                keyed = {"Authorization": f"Bearer {(home / 'web_token').read_text(encoding='utf-8').strip()}"}
                async with httpx.AsyncClient(base_url=url, headers=keyed) as client:
                    sent = await client.post("/api/messages", json={"text": ASKED})
                    assert sent.status_code == 200, sent.text
                async with asyncio.timeout(30):
                    await asked.wait()  # the reply is in flight
                serve.send_signal(signal.SIGINT)
                await stderr_until(serve, FINISHING)
                serve.send_signal(signal.SIGINT)
                await stderr_until(serve, " ".join(AT_ONCE.split()))
                async with asyncio.timeout(30):
                    assert await serve.wait() == 0
                assert not (home / "engine.sock").exists()
            finally:
                if serve.returncode is None:
                    serve.kill()
                    await serve.wait()

            model.reply_text("Noted: oat milk.")
            serve, url = await start_serve(home)  # the kept message is answered now
            try:
                async with httpx.AsyncClient(base_url=url, headers=keyed) as client:
                    texts: list[str] = []
                    async with asyncio.timeout(60):
                        while "Noted: oat milk." not in texts:
                            await asyncio.sleep(0.1)
                            texts = [m["text"] for m in (await client.get("/api/history")).json()["messages"]]
                    assert texts.count(ASKED) == 1
                    assert texts.index(ASKED) < texts.index("Noted: oat milk.")
                serve.send_signal(signal.SIGINT)
                async with asyncio.timeout(30):
                    assert await serve.wait() == 0
            finally:
                if serve.returncode is None:
                    serve.kill()
                    await serve.wait()
