"""The web page's server over real HTTP: login, sessions, CSRF, same-origin, headers, events, quiet logs."""

from __future__ import annotations

import logging
import re
import stat
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from klaw.channels.web.app import create_app
from klaw.channels.web.auth import CSRF_HEADER, SESSION_COOKIE, WebAuth
from klaw.channels.web.events import EventHub
from klaw.channels.web.server import EmbeddedServer
from klaw.channels.web.token import load_or_create_token
from klaw.config import EngineConfig
from klaw.config_loader import LoadedConfig
from klaw.config_view import MASK, ConfigRow, config_rows, masked
from klaw.engine.frames import FrameError
from klaw.gateway.link import EngineUnavailable, QueryFailed
from klaw.gateway.service import Submitted
from klaw.home import KlawHome

TOKEN = "the-web-token-0123456789"


@dataclass
class FakeBackend:
    chat_id: str = "main"
    hub: EventHub = field(default_factory=EventHub)
    submitted: list[str] = field(default_factory=list)
    answers: dict[str, Any] = field(default_factory=lambda: {"approvals": {"approvals": []}})
    engine_up: bool = True
    refusal: FrameError | None = None

    async def submit(self, text: str, client_id: str | None = None) -> Submitted:
        if self.refusal is not None:
            raise self.refusal
        self.submitted.append(text)
        return Submitted(f"id{len(self.submitted)}", queued=not self.engine_up)

    async def query(self, name: str, params: dict[str, Any]) -> Any:
        if not self.engine_up:
            raise EngineUnavailable("down")
        answer = self.answers.get(name)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def status(self) -> dict[str, Any]:
        return {"engine_connected": self.engine_up, "buffered": 0}

    def settings(self) -> list[ConfigRow]:
        return [ConfigRow("channels.web.port", 8765, "default")]


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend()


@pytest.fixture
async def base_url(backend: FakeBackend) -> AsyncIterator[str]:
    server = EmbeddedServer(create_app(backend, WebAuth(TOKEN)), "127.0.0.1", 0, grace_seconds=1)
    await server.start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        backend.hub.close()
        await server.stop()


@pytest.fixture
async def client(base_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=base_url, follow_redirects=False) as http:
        yield http


async def sign_in(client: httpx.AsyncClient, token: str = TOKEN) -> httpx.Response:
    page = await client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    return await client.post("/login", data={"token": token, "csrf": csrf.group(1)})


async def session_csrf(client: httpx.AsyncClient) -> str:
    response = await client.get("/api/session")
    assert response.status_code == 200
    return str(response.json()["csrf"])


async def test_everything_but_the_login_needs_a_session(client: httpx.AsyncClient) -> None:
    page = await client.get("/")
    assert page.status_code == 303 and page.headers["location"] == "/login"
    for path in ("/api/session", "/api/status", "/api/events", "/api/chats", "/api/settings"):
        assert (await client.get(path)).status_code == 401, path
    assert (await client.post("/api/messages", json={"text": "hi"})).status_code == 401
    forged = "9999999999.nonce.deadbeef"
    client.cookies.set(SESSION_COOKIE, forged)
    assert (await client.get("/api/status")).status_code == 401


async def test_the_token_gets_a_strict_httponly_session(client: httpx.AsyncClient) -> None:
    response = await sign_in(client)
    assert response.status_code == 303 and response.headers["location"] == "/"
    cookie = next(h for h in response.headers.get_list("set-cookie") if h.startswith(SESSION_COOKIE))
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    page = await client.get("/")
    assert page.status_code == 200 and "/static/app.js" in page.text
    session = (await client.get("/api/session")).json()
    assert session["chat_id"] == "main" and len(session["csrf"]) == 64 and session["engine_connected"] is True
    assert (await client.get("/login")).status_code == 303  # already signed in


async def test_a_wrong_token_or_a_forged_login_form_is_refused(client: httpx.AsyncClient) -> None:
    wrong = await sign_in(client, "not-the-token")
    assert wrong.status_code == 401 and "not right" in wrong.text and SESSION_COOKIE not in client.cookies
    async with httpx.AsyncClient(base_url=str(client.base_url)) as fresh:  # no login cookie: a cross-site post
        forged = await fresh.post("/login", data={"token": TOKEN, "csrf": "x" * 64})
        assert forged.status_code == 403 and SESSION_COOKIE not in fresh.cookies


async def test_posts_need_the_session_csrf_token_and_this_origin(
    client: httpx.AsyncClient, backend: FakeBackend, base_url: str
) -> None:
    await sign_in(client)
    csrf = await session_csrf(client)
    assert (await client.post("/api/messages", json={"text": "a"})).status_code == 403
    assert (await client.post("/api/messages", json={"text": "b"}, headers={CSRF_HEADER: "0" * 64})).status_code == 403
    evil = {CSRF_HEADER: csrf, "Origin": "http://evil.example"}
    assert (await client.post("/api/messages", json={"text": "c"}, headers=evil)).status_code == 403
    ok = await client.post("/api/messages", json={"text": "hello"}, headers={CSRF_HEADER: csrf, "Origin": base_url})
    assert ok.status_code == 200 and ok.json() == {"id": "id1", "queued": False}
    assert backend.submitted == ["hello"]
    empty = await client.post("/api/messages", json={"text": ""}, headers={CSRF_HEADER: csrf})
    assert empty.status_code == 422
    # Too long: the sentence every channel gives (how long, the limit, what to do), not pydantic's wording.
    overlong = await client.post("/api/messages", json={"text": "y" * 100_001}, headers={CSRF_HEADER: csrf})
    assert overlong.status_code == 422
    assert overlong.json()["detail"] == (
        "the message is 100,001 characters, more than the 100,000 a message may hold; send a shorter part,"
        " or put the text in a file in the workspace and ask the agent to read it"
    )
    assert backend.submitted == ["hello"]
    # A body that is not JSON, or not an object: what is wrong, where, and the shape to send.
    json_headers = {CSRF_HEADER: csrf, "Content-Type": "application/json"}
    notjson = await client.post("/api/messages", content=b"notjson", headers=json_headers)
    assert notjson.status_code == 422
    assert notjson.json()["detail"] == (
        'the body is not valid JSON (Expecting value at character 0); send {"text": "…"}'
    )
    cut = await client.post("/api/messages", content=b'{"text": "half', headers=json_headers)
    assert cut.json()["detail"].startswith("the body is not valid JSON (") and "half" not in cut.text
    not_an_object = await client.post("/api/messages", json="hello", headers={CSRF_HEADER: csrf})
    assert not_an_object.json()["detail"] == 'the body must be a JSON object: send {"text": "…"}'
    # JSON sent as text/plain, bytes that are not UTF-8, JSON nested past what Python reads: each named
    as_text = await client.post("/api/messages", content=b'{"text": "hi"}', headers={CSRF_HEADER: csrf})
    assert as_text.status_code == 422
    assert as_text.json()["detail"] == (
        'the body was sent with no Content-Type, not as JSON: send {"text": "…"} with Content-Type: application/json'
    )
    plain = {CSRF_HEADER: csrf, "Content-Type": "text/plain"}
    as_plain = await client.post("/api/messages", content=b'{"text": "hi"}', headers=plain)
    assert as_plain.status_code == 422 and as_plain.json()["detail"] == (
        'the body was sent as text/plain, not as JSON: send {"text": "…"} with Content-Type: application/json'
    )
    latin1 = await client.post("/api/messages", content='{"text": "café"}'.encode("latin-1"), headers=json_headers)
    assert latin1.status_code == 400 and latin1.json()["detail"] == (
        'the body is not UTF-8 text (invalid byte at position 13); send {"text": "…"} encoded as UTF-8'
    )
    deep = await client.post("/api/messages", content=b"[" * 100_000 + b"]" * 100_000, headers=json_headers)
    assert deep.status_code == 400
    assert deep.json()["detail"] == 'the body\'s JSON is nested too deeply to read; send {"text": "…"}'
    # A number past Python's 4,300 digits: FastAPI's bare 400 "There was an error parsing the body" (decision 431)
    for body, named in (
        ('{"text": 9%s}', "text"),
        ('{"text": "hi", "more": [1, -9%s]}', "more.1"),
        ("9%s", "the body"),
    ):
        huge = await client.post("/api/messages", content=(body % ("9" * 4999)).encode(), headers=json_headers)
        assert huge.status_code == 422 and huge.json()["detail"] == (
            f'{named}: a number of 5,000 digits, more than the 4,300 a number may have; send {{"text": "…"}}'
        ), huge.text
    assert (await client.get("/static/nothing-here.js")).status_code == 404  # other errors as before
    assert backend.submitted == ["hello"]
    assert (await client.post("/logout", data={"csrf": "wrong"})).status_code == 403
    out = await client.post("/logout", data={"csrf": csrf})
    assert out.status_code == 303 and SESSION_COOKIE not in client.cookies


async def test_pages_carry_a_strict_content_security_policy(client: httpx.AsyncClient) -> None:
    for path in ("/login", "/static/app.js"):
        headers = (await client.get(path)).headers
        assert "script-src 'self'" in headers["content-security-policy"]
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        assert headers["x-frame-options"] == "DENY" and headers["referrer-policy"] == "same-origin"
    assert (await client.get("/login")).headers["cache-control"] == "no-store"


async def test_replies_stream_as_server_sent_events(client: httpx.AsyncClient, backend: FakeBackend) -> None:
    await sign_in(client)
    backend.hub.publish("reply", {"reply_to": "before", "text": "missed while away"})
    async with client.stream("GET", "/api/events", headers={"Last-Event-ID": "0"}) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        lines = stream.aiter_lines()
        backend.hub.publish("delta", {"reply_to": "id1", "text": "Hel"})
        backend.hub.publish("reply", {"reply_to": "id1", "text": "Hello"})
        seen: list[str] = []
        async for line in lines:
            seen.append(line)
            if line.startswith("data:") and '"Hello"' in line:
                break
    events = [line for line in seen if line.startswith("event:")]
    assert events == ["event: reply", "event: delta", "event: reply"]
    assert 'data: {"reply_to": "before", "text": "missed while away"}' in seen


async def test_inspector_endpoints_relay_engine_answers_and_say_when_it_is_down(
    client: httpx.AsyncClient, backend: FakeBackend
) -> None:
    await sign_in(client)
    backend.answers = {"chats": {"chats": [{"channel": "telegram", "chat_id": "42"}]}, "search": QueryFailed("nope")}
    chats = (await client.get("/api/chats")).json()["chats"]
    assert chats == [{"channel": "web", "chat_id": "main"}, {"channel": "telegram", "chat_id": "42"}]
    bad = await client.get("/api/search", params={"channel": "web", "chat_id": "main", "q": "x"})
    assert bad.status_code == 400 and bad.json()["detail"] == "nope"
    backend.engine_up = False
    down = await client.get("/api/turns", params={"channel": "web", "chat_id": "main"})
    assert down.status_code == 503 and "engine is not running" in down.json()["detail"]
    assert (await client.get("/api/settings")).json()["settings"][0]["field"] == "channels.web.port"


async def test_no_message_text_or_token_in_logs(
    client: httpx.AsyncClient, backend: FakeBackend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    await sign_in(client)
    csrf = await session_csrf(client)
    await client.post("/api/messages", json={"text": "my diary entry"}, headers={CSRF_HEADER: csrf})
    await client.get("/api/search", params={"channel": "web", "chat_id": "main", "q": "diary secrets"})
    assert backend.submitted == ["my diary entry"]
    server_side = [r.getMessage() for r in caplog.records if not r.name.startswith(("httpx", "httpcore"))]  # not ours
    assert not [line for line in server_side if "diary" in line or TOKEN in line]


def test_the_token_file_is_private_and_reused(tmp_path: Path) -> None:
    home = KlawHome(tmp_path / "home")
    token = load_or_create_token(home)
    assert len(token) >= 40 and stat.S_IMODE(home.web_token_file.stat().st_mode) == 0o600
    home.web_token_file.chmod(0o644)
    assert load_or_create_token(home) == token
    assert stat.S_IMODE(home.web_token_file.stat().st_mode) == 0o600


def test_settings_rows_mask_anything_secret_looking(tmp_path: Path) -> None:
    assert masked("models.x.apiKey", "sk-123") == MASK
    assert masked("models.x.apiKeyEnv", "OPENAI_API_KEY") == "OPENAI_API_KEY"
    assert (
        masked("models.x.baseUrl", "https://user:pw@example.com:8443/v1") == f"https://user:{MASK}@example.com:8443/v1"
    )
    loaded = LoadedConfig(EngineConfig(), {"channels.telegram": "engine.yaml"}, tmp_path / "engine.yaml")
    rows = {row.field: row for row in config_rows(loaded)}
    assert rows["channels.telegram.tokenEnv"].value == "KLAW_TELEGRAM_TOKEN"
    assert rows["channels.telegram.tokenEnv"].source == "engine.yaml (= default)"  # the section is there
    assert rows["channels.web.host"].value == "127.0.0.1" and rows["channels.web.host"].source == "default"


async def test_history_relays_the_engine_and_renders_replies_as_sanitized_html(
    client: httpx.AsyncClient, backend: FakeBackend
) -> None:
    await sign_in(client)
    backend.answers["history"] = {
        "messages": [
            {"role": "user", "text": "**not rendered**", "task": None},
            {"role": "assistant", "text": "**yes** <script>x()</script>", "task": "digest"},
        ],
        "complete": True,
    }
    messages = (await client.get("/api/history")).json()["messages"]
    assert "html" not in messages[0]
    assert messages[1]["html"] == "<p><strong>yes</strong> &lt;script&gt;x()&lt;/script&gt;</p>\n"
    assert messages[1]["task"] == "digest"
    backend.engine_up = False
    assert (await client.get("/api/history")).status_code == 503


async def test_an_image_in_a_reply_is_its_alt_text_linked_never_loaded_and_no_stray_bang(
    client: httpx.AsyncClient, backend: FakeBackend
) -> None:
    await sign_in(client)
    backend.answers["history"] = {
        "messages": [{"role": "assistant", "text": "![i](http://evil/x.png)", "task": None}],
        "complete": True,
    }
    html = (await client.get("/api/history")).json()["messages"][0]["html"]
    assert html == ('<p><a href="http://evil/x.png" target="_blank" rel="noopener noreferrer nofollow">i</a></p>\n')


async def test_a_message_the_gateway_refuses_gets_its_reason(client: httpx.AsyncClient, backend: FakeBackend) -> None:
    await sign_in(client)
    csrf = await session_csrf(client)
    backend.refusal = FrameError("invalid_frame", "inbound field 'chat_id': too long")
    refused = await client.post("/api/messages", json={"text": "hi"}, headers={CSRF_HEADER: csrf})
    assert refused.status_code == 422 and refused.json()["detail"] == "inbound field 'chat_id': too long"
    backend.refusal = FrameError("frame_too_large", "inbound frame of 2000000 bytes exceeds 1048576 bytes")
    too_long = await client.post("/api/messages", json={"text": "hi"}, headers={CSRF_HEADER: csrf})
    assert too_long.status_code == 413 and too_long.json()["detail"] == "the message is too long"


async def test_settings_show_what_a_command_changed_in_place_of_the_file(
    client: httpx.AsyncClient, backend: FakeBackend
) -> None:
    await sign_in(client)
    backend.answers["settings"] = {"overrides": [{"field": "channels.web.port", "value": 9000, "command": "/rag set"}]}
    row = (await client.get("/api/settings")).json()["settings"][0]
    assert row == {
        "field": "channels.web.port",
        "value": 9000,
        "shown": "9000",
        "source": "set by /rag set (overrides default: 8765)",
        "command": "/rag set",
    }
    backend.engine_up = False
    down = (await client.get("/api/settings")).json()
    assert down["settings"][0]["value"] == 8765 and "engine is not running" in down["note"]
