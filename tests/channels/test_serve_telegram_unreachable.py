"""`klaw serve` with Telegram out of reach at start (no DNS, no network): it used to end the whole gateway,
web page included, with "the gateway could not start: httpx.ConnectError: [Errno -2] Name or service not
known". Now the web page comes up, the log says in words that Telegram could not be reached at
channels.telegram.apiBaseUrl and to check DNS and the network, and Telegram is retried with a backoff:
once it answers, a message sent there is answered. A token Telegram refuses stays fatal, said in words
that never quote the token (python-telegram-bot's own message does)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from pathlib import Path

import httpx
import yaml

from klaw.llm.fake_server import FakeOpenAiServer
from tests.channels.fake_telegram import FakeTelegram
from tests.engine import short_socket_dir

TOKEN = "123456:test-token-abc"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def write_home(home: Path, model_url: str, telegram_url: str) -> dict[str, str]:
    home.mkdir()
    config = {
        "models": {"fake/small": {"baseUrl": model_url, "contextBudget": 4000, "maxRetries": 0}},
        "routing": {"default": "fake/small"},
        "embedder": {"backend": "fake", "dim": 32},
        "summarizer": {"enabled": False},
        "channels": {
            "web": {"port": 0},
            "telegram": {"enabled": True, "tokenEnv": "KLAW_TEST_BOT", "apiBaseUrl": telegram_url,
                         "allowedChatIds": [42]},
        },
    }  # fmt: skip
    (home / "engine.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return {**os.environ, "KLAW_HOME": str(home), "PYTHONUNBUFFERED": "1", "COLUMNS": "300", "KLAW_TEST_BOT": TOKEN}


async def read_until(stream: asyncio.StreamReader, text: str) -> str:
    seen = ""
    async with asyncio.timeout(60):
        while text not in " ".join(seen.split()):
            line = (await stream.readline()).decode()
            assert line, f"klaw serve ended before saying {text!r}: {seen}"
            seen += line
    return " ".join(seen.split())


async def test_the_web_page_stays_up_while_telegram_is_retried_until_it_answers() -> None:
    port = free_port()  # nothing listens there yet: Telegram is out of reach
    telegram_url = f"http://127.0.0.1:{port}"
    with short_socket_dir() as directory:
        async with FakeOpenAiServer() as model:
            env = write_home(directory / "home", model.base_url, telegram_url)
            serve = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "klaw", "serve", env=env,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            assert serve.stdout is not None and serve.stderr is not None
            try:
                said = await read_until(
                    serve.stderr, f"could not reach Telegram at {telegram_url} (channels.telegram.apiBaseUrl)"
                )
                assert "Check this machine's DNS and network" in said and "retrying" in said
                assert "httpx" not in said and "Traceback" not in said
                url = (await read_until(serve.stdout, "web page:")).split("web page:")[1].split()[0]
                async with httpx.AsyncClient() as client:
                    assert (await client.get(url + "login")).status_code == 200
                async with FakeTelegram(TOKEN, port=port) as telegram:  # the network is back
                    telegram.push_text(chat_id=42, text="hello there")
                    async with asyncio.timeout(90):
                        while not telegram.sent_to(42):
                            await telegram.wait_for(lambda: bool(telegram.sent_to(42)))
                    assert "hello there" in telegram.sent_to(42)[0]
                    serve.send_signal(signal.SIGTERM)
                    async with asyncio.timeout(30):
                        assert await serve.wait() == 0
            finally:
                if serve.returncode is None:
                    serve.kill()
                    await serve.wait()


async def test_a_token_telegram_refuses_is_fatal_in_words_without_the_token() -> None:
    with short_socket_dir() as directory:
        async with FakeOpenAiServer() as model, FakeTelegram("another:token") as telegram:
            env = write_home(directory / "home", model.base_url, telegram.base_url)
            serve = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "klaw", "serve", env=env,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            async with asyncio.timeout(60):
                out, err = await serve.communicate()
            said = " ".join((out + err).decode().split())
            assert serve.returncode == 2
            assert "Telegram refused the bot token in KLAW_TEST_BOT" in said and TOKEN not in said
