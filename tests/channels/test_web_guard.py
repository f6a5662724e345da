"""The web server refuses before it reads: no session, no body; no body past the cap; sign-out is final;
wrong tokens are rate-limited; text that is not Unicode gets a clear refusal with nothing of it in the log."""

from __future__ import annotations

import asyncio
import logging
import re
import stat
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import cast

import httpx
import pytest

from klaw.channels.web import server as server_module
from klaw.channels.web.app import create_app
from klaw.channels.web.auth import CSRF_HEADER, SESSION_COOKIE, WebAuth
from klaw.channels.web.body_guard import MAX_BODY_BYTES
from klaw.channels.web.channel import WebChannel, is_loopback
from klaw.channels.web.login_limit import FAILURES
from klaw.channels.web.server import EmbeddedServer
from klaw.config import EngineConfig, WebChannelConfig
from klaw.config_loader import LoadedConfig
from klaw.gateway.service import Gateway
from klaw.home import KlawHome
from klaw.llm.fake_server import FakeOpenAiServer
from tests.channels.stack import running_stack
from tests.channels.test_web_app import TOKEN, FakeBackend, session_csrf, sign_in
from tests.engine import GatewayClient


class Clock:
    """The app's injected clock (seconds), moved by the test instead of sleeping."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@asynccontextmanager
async def serving(auth: WebAuth, backend: FakeBackend | None = None) -> AsyncIterator[str]:
    backend = backend or FakeBackend()
    server = EmbeddedServer(create_app(backend, auth), "127.0.0.1", 0, grace_seconds=1)
    await server.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        backend.hub.close()
        await server.stop()


async def raw_request(base_url: str, head: str, body: bytes = b"", *, encoding: str = "utf-8") -> str:
    """Send a request's head (and maybe part of a body) over a plain socket and return the status line
    and headers the server answers, without ever sending the rest of the body it announced. `encoding`:
    the head's bytes (latin-1 sends a character as the one byte a server decodes back to it)."""
    host, port = base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(head.replace("\n", "\r\n").encode(encoding) + b"\r\n" + body)
        await writer.drain()
        async with asyncio.timeout(60):  # the old server waited for the 100 MB forever
            answer = await reader.readuntil(b"\r\n\r\n")
        return answer.decode()
    finally:
        writer.close()


async def chunks(chunk: bytes, count: int) -> AsyncIterator[bytes]:
    for _ in range(count):
        yield chunk


def post_head(path: str, length: int, cookie: str = "", extra: str = "") -> str:
    cookies = f"Cookie: {cookie}\n" if cookie else ""
    return (
        f"POST {path} HTTP/1.1\nHost: 127.0.0.1\nContent-Type: application/json\n"
        f"Content-Length: {length}\n{cookies}{extra}\n"
    )


async def test_a_post_without_a_session_is_refused_before_its_body_is_sent() -> None:
    async with serving(WebAuth(TOKEN)) as base_url:
        hundred_mb = 100 * 1024 * 1024
        answer = await raw_request(base_url, post_head("/api/messages", hundred_mb))
        assert answer.startswith("HTTP/1.1 401"), answer
        forged = await raw_request(base_url, post_head("/api/messages", hundred_mb, f"{SESSION_COOKIE}=9.x.deadbeef"))
        assert forged.startswith("HTTP/1.1 401"), forged
        login = await raw_request(base_url, post_head("/login", hundred_mb))  # no login-form cookie
        assert login.startswith("HTTP/1.1 403"), login


async def test_numbers_too_long_for_int_in_a_cookie_or_a_length_are_refused_not_a_server_error() -> None:
    """int() refuses more than 4,300 digits with a ValueError: a forged cookie's expiry, a Content-Length or a
    Last-Event-ID that long answered 500 with a traceback in the log (adversary20)."""
    huge = "9" * 5000
    async with serving(WebAuth(TOKEN)) as base_url, httpx.AsyncClient(base_url=base_url) as client:
        forged = await raw_request(base_url, post_head("/api/messages", 10, f"{SESSION_COOKIE}={huge}.x.deadbeef"))
        assert forged.startswith("HTTP/1.1 401"), forged
        page = await client.get("/", headers={"Cookie": f"{SESSION_COOKIE}={huge}.x.deadbeef"})
        assert page.status_code == 303 and page.headers["location"].endswith("/login"), page.status_code
        await sign_in(client)
        csrf = await session_csrf(client)
        cookie = f"{SESSION_COOKIE}={client.cookies[SESSION_COOKIE]}"
        head = f"POST /api/messages HTTP/1.1\nHost: 127.0.0.1\nContent-Length: {huge}\nCookie: {cookie}\n"
        head += f"{CSRF_HEADER}: {csrf}\n"
        answer = await raw_request(base_url, head)
        assert answer.startswith(("HTTP/1.1 413", "HTTP/1.1 400")), answer


async def test_other_digits_and_characters_in_a_cookie_or_a_csrf_field_are_refused_not_a_server_error() -> None:
    """adversary21: '²'.isdigit() is true and int('²') raises ValueError, and hmac.compare_digest of a str
    holding a character outside ASCII raises TypeError: a forged cookie, a login form's csrf field or a
    signed-in request's CSRF header answered 500 with a traceback in the log, before any sign-in."""
    async with serving(WebAuth(TOKEN)) as base_url, httpx.AsyncClient(base_url=base_url) as client:
        for cookie in ("\xb2.a.b", "9999999999.a.\xe9", "\u0663\u0663.a.b"):
            head = f"GET / HTTP/1.1\nHost: 127.0.0.1\nCookie: {SESSION_COOKIE}={cookie}\n"
            answer = await raw_request(base_url, head, encoding="utf-8" if "\u0663" in cookie else "latin-1")
            assert answer.startswith("HTTP/1.1 303"), (cookie, answer)  # to the login page, as any stranger
        await client.get("/login")
        forged = await client.post("/login", data={"token": TOKEN, "csrf": "\xe9"})
        assert forged.status_code == 403 and SESSION_COOKIE not in client.cookies
        await sign_in(client)
        cookie = f"{SESSION_COOKIE}={client.cookies[SESSION_COOKIE]}"
        answer = await raw_request(
            base_url, post_head("/api/messages", 2, cookie, f"{CSRF_HEADER}: \xe9\n"), encoding="latin-1"
        )
        assert answer.startswith(("HTTP/1.1 403", "HTTP/1.1 422")), answer  # refused, whichever check is first
        events = await raw_request(
            base_url,
            f"GET /api/events HTTP/1.1\nHost: 127.0.0.1\nCookie: {cookie}\nLast-Event-ID: \xb2\n",
            encoding="latin-1",
        )
        assert not events.startswith("HTTP/1.1 500"), events


async def test_a_signed_in_body_over_the_cap_gets_413_unread(tmp_path: Path) -> None:
    async with serving(WebAuth(TOKEN)) as base_url, httpx.AsyncClient(base_url=base_url) as client:
        await sign_in(client)
        csrf = await session_csrf(client)
        cookie = f"{SESSION_COOKIE}={client.cookies[SESSION_COOKIE]}"
        head = post_head("/api/messages", 100 * 1024 * 1024, cookie, f"{CSRF_HEADER}: {csrf}\n")
        answer = await raw_request(base_url, head)
        assert answer.startswith("HTTP/1.1 413"), answer
        # Without a Content-Length (chunked), reading stops at the cap.
        chunked = await client.post("/api/messages", content=chunks(b"x" * 65536, 17), headers={CSRF_HEADER: csrf})
        assert chunked.status_code == 413 and "larger than" in chunked.json()["detail"]
        # Under the cap, everything works as before.
        ok = await client.post("/api/messages", json={"text": "y" * 90_000}, headers={CSRF_HEADER: csrf})
        assert ok.status_code == 200
        assert MAX_BODY_BYTES == 1 << 20


async def test_a_signed_out_cookie_stays_refused_even_after_a_restart(tmp_path: Path) -> None:
    revoked = tmp_path / "web_revoked.json"
    async with (
        serving(WebAuth(TOKEN, revoked_file=revoked)) as base_url,
        httpx.AsyncClient(base_url=base_url) as client,
    ):
        await sign_in(client)
        stolen = client.cookies[SESSION_COOKIE]
        csrf = await session_csrf(client)
        out = await client.post("/logout", data={"csrf": csrf})
        assert out.status_code == 303
        async with httpx.AsyncClient(base_url=base_url, cookies={SESSION_COOKIE: stolen}) as thief:
            assert (await thief.get("/api/status")).status_code == 401
            assert (await thief.get("/")).status_code == 303
        # Another browser's session is untouched by this sign-out.
        async with httpx.AsyncClient(base_url=base_url) as other:
            await sign_in(other)
            assert (await other.get("/api/status")).status_code == 200
    assert stat.S_IMODE(revoked.stat().st_mode) == 0o600
    restarted = serving(WebAuth(TOKEN, revoked_file=revoked))
    async with restarted as base_url, httpx.AsyncClient(base_url=base_url, cookies={SESSION_COOKIE: stolen}) as thief:
        assert (await thief.get("/api/status")).status_code == 401


async def test_wrong_tokens_are_rate_limited_per_client() -> None:
    clock = Clock()
    async with serving(WebAuth(TOKEN, clock=clock)) as base_url, httpx.AsyncClient(base_url=base_url) as client:
        for _ in range(FAILURES):
            assert (await sign_in(client, "wrong")).status_code == 401
            clock.now += 5
        limited = await sign_in(client, "wrong again")
        assert limited.status_code == 429 and "Too many wrong tokens" in limited.text
        assert limited.headers["retry-after"] == str(60 - 5 * FAILURES)
        assert SESSION_COOKIE not in client.cookies
        # every local user is 127.0.0.1: the owner's right token is never refused by others' guesses
        assert (await sign_in(client, TOKEN)).status_code == 303
        assert SESSION_COOKIE in client.cookies


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.5", False),
    ],
)
def test_which_hosts_are_this_machine_only(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


async def test_listening_beyond_loopback_warns_about_plain_http(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    for host in ("0.0.0.0", "127.0.0.1"):
        home = KlawHome(tmp_path / host)
        loaded = LoadedConfig(config=EngineConfig(), sources={}, path=home.config_file)
        channel = WebChannel(home, WebChannelConfig(host=host, port=0), loaded)
        await channel.start(cast(Gateway, object()))  # serving the page needs no gateway until a request
        await channel.stop()
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "0.0.0.0" in warnings[0] and "plain HTTP" in warnings[0], warnings


def web_channel(holder: list[WebChannel]) -> Callable[..., list[WebChannel]]:
    def make(home: KlawHome, loaded: LoadedConfig, server: FakeOpenAiServer) -> list[WebChannel]:
        holder.append(WebChannel(home, WebChannelConfig(port=0), loaded))
        return holder

    return make


async def test_a_lone_surrogate_is_refused_clearly_and_never_logged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    holder: list[WebChannel] = []
    async with running_stack(web_channel(holder)) as stack:
        web = holder[0]
        async with httpx.AsyncClient(base_url=web.url.rstrip("/")) as client:
            await sign_in_with(client, web.token)
            csrf = await session_csrf(client)
            body = b'{"text": "my secret diary \\ud800 entry"}'  # valid JSON, but not Unicode text
            headers = {CSRF_HEADER: csrf, "Content-Type": "application/json"}
            refused = await client.post("/api/messages", content=body, headers=headers)
            assert refused.status_code == 422, refused.text
            assert "surrogate" in refused.json()["detail"] and "diary" not in refused.text
            ok = await client.post("/api/messages", json={"text": "still fine after that"}, headers=headers)
            assert ok.status_code == 200
        assert len(stack.gateway.buffer) <= 1
    logged = [r.getMessage() + (r.exc_text or "") for r in caplog.records]
    assert not [line for line in logged if "diary" in line], logged


async def sign_in_with(client: httpx.AsyncClient, token: str) -> None:
    page = await client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    assert (await client.post("/login", data={"token": token, "csrf": csrf.group(1)})).status_code == 303


async def test_slow_clients_cannot_take_every_connection_and_the_engine_still_answers(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local user opening many connections that each send half a request head ("slowloris"): past the
    cap each new one closes the oldest of them, so no more than the cap stay open, the owner's key is
    answered meanwhile, and the engine socket keeps answering (decision 367). Only when every open
    connection is the owner's is a new one answered 503."""
    monkeypatch.setattr(server_module, "MAX_CONNECTIONS", 8, raising=False)
    monkeypatch.setattr(server_module, "HEAD_TIMEOUT_SECONDS", 300.0, raising=False)
    caplog.set_level(logging.DEBUG)
    holder: list[WebChannel] = []
    async with running_stack(web_channel(holder)) as stack:
        web = holder[0]
        host, port = web.url.removeprefix("http://").rstrip("/").split(":")
        slow = []
        for _ in range(3 * 8):
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(b"GET /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")  # never finished
            await writer.drain()
            slow.append((reader, writer))
        for reader, _ in slow[:16]:  # the oldest made room for the newer ones: closed, nothing answered
            async with asyncio.timeout(10):
                assert await reader.read() == b""
        keyed = {"Authorization": f"Bearer {web.token}"}
        async with httpx.AsyncClient(base_url=web.url.rstrip("/")) as owner:
            assert (await owner.get("/api/status", headers=keyed)).status_code == 200
            engine = await GatewayClient.connect(stack.home.socket_path)
            try:
                await engine.roundtrip("still-here")  # the engine socket still accepts and answers
            finally:
                await engine.aclose()
        for _, writer in slow:
            writer.close()
        await asyncio.gather(*(writer.wait_closed() for _, writer in slow), return_exceptions=True)
        # Eight connections of the owner's (kept alive), then one more: there is nobody to close for it.
        limits = httpx.Limits(max_keepalive_connections=8, max_connections=8)
        async with httpx.AsyncClient(base_url=web.url.rstrip("/"), headers=keyed, limits=limits) as owner:
            gate = asyncio.Event()

            async def held() -> int:  # eight requests at once open eight connections
                await gate.wait()
                return (await owner.get("/api/status")).status_code

            calls = [asyncio.create_task(held()) for _ in range(8)]
            gate.set()
            assert await asyncio.gather(*calls) == [200] * 8
            for _ in range(200):  # the server sees the slow clients' connections go a moment after they close
                async with httpx.AsyncClient(base_url=web.url.rstrip("/"), headers=keyed) as ninth:
                    busy = await ninth.get("/api/status")
                if busy.status_code == 503:
                    break
                await asyncio.sleep(0.05)
            assert busy.status_code == 503 and busy.headers["retry-after"] == "5"
    assert not [r for r in caplog.records if r.exc_info], "no traceback in the log"


async def test_a_request_head_that_never_completes_is_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server_module, "HEAD_TIMEOUT_SECONDS", 0.2, raising=False)
    async with serving(WebAuth(TOKEN)) as base_url:
        host, port = base_url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        await writer.drain()
        async with asyncio.timeout(10):
            assert await reader.read() == b""  # closed by the server, nothing answered
        writer.close()


async def test_a_later_request_head_on_a_kept_alive_connection_that_never_completes_is_cut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The head timeout covers every request of a connection: after a first request answered in full, a
    second head left half sent is cut like a first one (uvicorn's keep-alive timer stops at its first byte)."""
    monkeypatch.setattr(server_module, "HEAD_TIMEOUT_SECONDS", 0.2, raising=False)
    async with serving(WebAuth(TOKEN)) as base_url:
        host, port = base_url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # a whole request, answered in full
        async with asyncio.timeout(10):
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200")
            length = re.search(rb"(?i)content-length: (\d+)", head)
            assert length is not None
            await reader.readexactly(int(length.group(1)))
        writer.write(b"GET /login HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # the next head, never finished
        await writer.drain()
        async with asyncio.timeout(10):
            assert await reader.read() == b""  # closed by the server, nothing answered
        writer.close()
