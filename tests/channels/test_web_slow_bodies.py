"""Request bodies that stall or break off: against `klaw serve` as a person runs it, and against the page's
server in this process where a deadline has to be shortened. A body that never comes is answered 408
and its connection closed; one cut off leaves no traceback in the log (decision 366)."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import urllib.parse

import httpx
import pytest

from klaw.channels.web import body_guard
from klaw.channels.web.auth import WebAuth
from klaw.llm.fake_server import FakeOpenAiServer
from tests.channels.test_web_app import TOKEN
from tests.channels.test_web_guard import serving, sign_in_with
from tests.engine import short_socket_dir
from tests.serve_helpers import running, serve_config, serve_env, stop, web_page, write_serve_home


async def login_cookie(base_url: str) -> str:
    """The login form's cookie, which anyone reaching the port gets from GET /login."""
    async with httpx.AsyncClient(base_url=base_url) as client:
        answer = await client.get("/login")
        return answer.headers["set-cookie"].split(";")[0]


def login_head(base_url: str, cookie: str, length: int) -> bytes:
    host = urllib.parse.urlsplit(base_url).netloc
    return (
        f"POST /login HTTP/1.1\r\nHost: {host}\r\nCookie: {cookie}\r\n"
        f"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


async def test_a_body_cut_off_midway_leaves_no_traceback_in_the_log() -> None:
    with short_socket_dir() as directory:
        home = directory / "home"
        async with FakeOpenAiServer() as model:
            write_serve_home(home, serve_config(model.base_url))
            async with running(env=serve_env(home)) as serve:
                url = (await web_page(serve)).rstrip("/")
                cookie = await login_cookie(url)
                parts = urllib.parse.urlsplit(url)
                for _ in range(3):
                    _, writer = await asyncio.open_connection(parts.hostname, parts.port)
                    writer.write(login_head(url, cookie, 100) + b"token=abc")  # 9 of the 100 bytes, then gone
                    await writer.drain()
                    writer.close()
                    await writer.wait_closed()
                async with httpx.AsyncClient(base_url=url) as client:  # the page still answers after them
                    assert (await client.get("/login")).status_code == 200
                assert await stop(serve, signal.SIGINT) == 0
                assert serve.stderr is not None
                logged = (await serve.stderr.read()).decode()
    assert "Traceback" not in logged and "No response returned" not in logged, logged


async def test_a_body_that_never_arrives_is_answered_408_and_its_connection_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A head announcing a body, then nothing (or a byte now and then): cut at the body's deadline."""
    monkeypatch.setattr(body_guard, "BODY_SECONDS", 0.5)
    async with serving(WebAuth(TOKEN)) as base_url:
        cookie = await login_cookie(base_url)
        parts = urllib.parse.urlsplit(base_url)
        for trickles in (False, True):
            reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
            writer.write(login_head(base_url, cookie, 1_000_000))
            await writer.drain()

            async def trickle(writer: asyncio.StreamWriter = writer, trickles: bool = trickles) -> None:
                while trickles and not writer.is_closing():  # a byte every 0.1 s: never idle, never done
                    writer.write(b"t")
                    await asyncio.sleep(0.1)

            dripping = asyncio.create_task(trickle())
            answer = b""
            async with asyncio.timeout(30):  # the old server waited for the body for ever
                with contextlib.suppress(ConnectionResetError):  # trickling on after the close: a reset (CI64)
                    while chunk := await reader.read(65536):  # to the end: the server closes the connection
                        answer += chunk
            writer.close()
            await asyncio.gather(dripping, return_exceptions=True)
            assert answer.startswith(b"HTTP/1.1 408"), answer
            assert b"did not arrive within 0.5 seconds" in answer and b"connection: close" in answer.lower()


async def test_a_flood_of_stalled_requests_never_locks_the_owner_out() -> None:
    """adversary12: 260 connections from anyone who reached the port (the login form's cookie and a head
    announcing a megabyte, then nothing; or half a head) held all 256 the server keeps, and the owner's
    page and bearer key got 503. Now they make room: the owner's signed-in page and key are answered."""
    with short_socket_dir() as directory:
        home = directory / "home"
        async with FakeOpenAiServer() as model:
            write_serve_home(home, serve_config(model.base_url))
            async with running(env=serve_env(home)) as serve:
                url = (await web_page(serve)).rstrip("/")
                token = (home / "web_token").read_text(encoding="utf-8").strip()
                async with httpx.AsyncClient(base_url=url) as page:
                    await sign_in_with(page, token)
                    session = dict(page.cookies)
                cookie = await login_cookie(url)
                parts = urllib.parse.urlsplit(url)
                stalled = login_head(url, cookie, 1_000_000)
                half = f"GET /api/status HTTP/1.1\r\nHost: {parts.netloc}\r\nX-Slow: ".encode()
                for flood in (stalled, half):
                    held = [await asyncio.open_connection(parts.hostname, parts.port) for _ in range(260)]
                    for _, writer in held:
                        writer.write(flood)
                    await asyncio.gather(*(writer.drain() for _, writer in held))
                    keyed = {"Authorization": f"Bearer {token}"}
                    async with httpx.AsyncClient(base_url=url, headers=keyed) as script:
                        answer = await script.get("/api/status")
                        assert answer.status_code == 200, answer.text  # was 503 "too many open connections"
                    async with httpx.AsyncClient(base_url=url, cookies=session) as owner:  # a new connection
                        assert (await owner.get("/api/history")).status_code == 200
                        assert (await owner.get("/")).status_code == 200
                    for _, writer in held:
                        writer.close()
                assert await stop(serve, signal.SIGINT) == 0


async def test_a_client_still_writing_when_answered_408_reads_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that writes its whole body before it reads (most do) was still trickling when the 408 came;
    the server closed at once, its next bytes drew a TCP reset, and the reset destroyed the 408 before the
    client read it (ConnectionResetError, nothing read). The server now shuts its side and drains what
    still comes for a while before closing (a lingering close, decision 366), so the answer is read."""
    monkeypatch.setattr(body_guard, "BODY_SECONDS", 0.5)
    async with serving(WebAuth(TOKEN)) as base_url:
        cookie = await login_cookie(base_url)
        parts = urllib.parse.urlsplit(base_url)
        for _ in range(3):
            reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
            writer.write(login_head(base_url, cookie, 1_000_000))
            for _ in range(10):  # a byte every 0.1 s, on past the deadline, before reading anything
                await asyncio.sleep(0.1)
                writer.write(b"t")
                await writer.drain()
            answer = b""
            async with asyncio.timeout(30):
                while chunk := await reader.read(65536):  # the 408, then the end the server sent
                    answer += chunk
            writer.close()
            assert answer.startswith(b"HTTP/1.1 408"), answer
            assert b"did not arrive within 0.5 seconds" in answer
