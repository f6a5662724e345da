"""`klaw serve` with Telegram out of reach at start (no DNS, no network): it used to end the whole gateway,
web page included, with "the gateway could not start: httpx.ConnectError: [Errno -2] Name or service not
known". Now the web page comes up, the log says in words that Telegram could not be reached at
channels.telegram.apiBaseUrl and to check DNS and the network, and Telegram is retried with a backoff:
once it answers, a message sent there is answered. A token Telegram refuses stays fatal, said in words
that never quote the token (python-telegram-bot's own message does)."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest

from klaw.llm.fake_server import FakeOpenAiServer
from tests.channels.fake_telegram import FakeTelegram
from tests.engine import short_socket_dir
from tests.serve_helpers import (
    STARTS_WITHIN,
    exit_status,
    read_until,
    running,
    serve_config,
    serve_env,
    stop,
    write_serve_home,
)

TOKEN = "123456:test-token-abc"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def write_home(home: Path, model_url: str, telegram_url: str) -> dict[str, str]:
    telegram = {"enabled": True, "tokenEnv": "KLAW_TEST_BOT", "apiBaseUrl": telegram_url, "allowedChatIds": [42]}
    write_serve_home(home, serve_config(model_url, channels={"web": {"port": 0}, "telegram": telegram}))
    return serve_env(home, KLAW_TEST_BOT=TOKEN)


async def test_the_web_page_stays_up_while_telegram_is_retried_until_it_answers() -> None:
    port = free_port()  # nothing listens there yet: Telegram is out of reach
    telegram_url = f"http://127.0.0.1:{port}"
    with short_socket_dir() as directory:
        async with FakeOpenAiServer() as model:
            env = write_home(directory / "home", model.base_url, telegram_url)
            async with running(env=env) as serve:
                said = await read_until(
                    serve.stderr, f"could not reach Telegram at {telegram_url} (channels.telegram.apiBaseUrl)"
                )
                assert "Check this machine's DNS and network" in said and "retrying" in said
                assert "httpx" not in said and "Traceback" not in said
                url = (await read_until(serve.stdout, "web page:")).split("web page:")[1].split()[0]
                # newcomer7: stdout said "telegram: polling" right after the log's "could not reach Telegram"
                said = await read_until(serve.stdout, "telegram:")
                assert "telegram: not reached yet, retrying in the background" in said, said
                async with httpx.AsyncClient() as client:
                    assert (await client.get(url + "login")).status_code == 200
                async with FakeTelegram(TOKEN, port=port) as telegram:  # the network is back
                    telegram.push_text(chat_id=42, text="hello there")
                    # retried with a backoff, then a turn: wait for the reply, not for a time
                    await telegram.wait_for(lambda: bool(telegram.sent_to(42)), seconds=STARTS_WITHIN)
                    assert "hello there" in telegram.sent_to(42)[0]
                    assert await stop(serve) == 0


async def test_a_token_telegram_refuses_is_fatal_in_words_without_the_token() -> None:
    with short_socket_dir() as directory:
        async with FakeOpenAiServer() as model, FakeTelegram("another:token") as telegram:
            env = write_home(directory / "home", model.base_url, telegram.base_url)
            async with running(env=env) as serve:
                async with asyncio.timeout(STARTS_WITHIN):
                    out, err = await serve.communicate()
                said = " ".join((out + err).decode().split())
                assert await exit_status(serve) == 2
                assert "Telegram refused the bot token in KLAW_TEST_BOT" in said and TOKEN not in said


async def _trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """An answer's first line, a byte a second, for ever: every read is in time, the answer never whole."""
    with contextlib.suppress(OSError):
        for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 10_000:
            writer.write(bytes([byte]))
            await writer.drain()
            await asyncio.sleep(1)


async def _not_json(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A captive portal's page: 200, HTML."""
    with contextlib.suppress(OSError):
        await reader.readuntil(b"\r\n\r\n")
        page = b"<html>Sign in to the hotel wifi</html>"
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s" % (len(page), page))
        await writer.drain()
        writer.close()


@pytest.mark.parametrize(
    ("answer", "reason"),
    [(_trickle, "it did not answer in time"), (_not_json, "what answered is not Telegram's Bot API")],
)
async def test_a_telegram_address_that_trickles_or_is_no_bot_api_does_not_hold_the_start(
    answer: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]], reason: str
) -> None:
    """adversary17: a Telegram API trickling its answer held `klaw serve` before its web page for ever (PTB's
    timeouts are per read), and one answering 200 with HTML ended the gateway ("Invalid server response",
    after PTB's traceback quoting the page). Both are an outage now: the page comes up, the log says why in
    words, Ctrl-C stops it."""
    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    telegram_url = f"http://127.0.0.1:{port}"
    async with server:
        with short_socket_dir() as directory:
            async with FakeOpenAiServer() as model:
                env = write_home(directory / "home", model.base_url, telegram_url)
                async with running(env=env) as serve:
                    said = await read_until(serve.stderr, f"could not reach Telegram at {telegram_url}")
                    assert reason in said, said
                    assert "Traceback" not in said and "hotel" not in said, said
                    said = await read_until(serve.stdout, "telegram:")
                    assert "web page:" in said and "not reached yet, retrying in the background" in said, said
                    assert await stop(serve) == 0
