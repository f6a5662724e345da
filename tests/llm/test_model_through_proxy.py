"""A model reached through the proxy the environment names (`HTTP_PROXY`), as behind a company's proxy:
the model client's requests go through it, streamed replies included, and `NO_PROXY` is honoured.

The proxy is a small forward proxy (an ASGI app on uvicorn) that passes each request on to the fake
OpenAI server, whatever host it was addressed to; the model's base URL names a host that does not
resolve, so a request that skips the proxy fails (decision 318: a client given klaw's own transport
ignored the environment's proxies).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from klaw.config import ModelConfig
from klaw.embedded_http import EmbeddedHttpServer
from klaw.llm.errors import LlmConnectionError
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.llm.messages import ChatMessage
from klaw.llm.openai_client import OpenAiChatClient
from klaw.llm.protocol import StreamAccumulator

UNRESOLVABLE = "http://model.invalid/v1"  # .invalid never resolves (RFC 2606)


class ForwardProxy:
    """Passes every request on to `upstream` (keeping its path and query), streaming the answer back;
    `seen` has each request's target host as the client addressed it."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.url = ""  # where it listens, once started
        self.seen: list[str] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = {k.decode(): v.decode() for k, v in scope["headers"]}
        path = scope["path"]
        self.seen.append(urlsplit(path).hostname or headers.get("host", ""))
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        query = f"?{scope['query_string'].decode()}" if scope["query_string"] else ""
        url = self.upstream + (urlsplit(path).path if "://" in path else path) + query
        forwarded = {k: v for k, v in headers.items() if k.lower() not in {"host", "proxy-connection"}}
        async with (
            httpx.AsyncClient(trust_env=False, timeout=30) as client,
            client.stream(scope["method"], url, headers=forwarded, content=body) as answer,
        ):
            kept = [(k.encode(), v.encode()) for k, v in answer.headers.items() if k.lower() != "transfer-encoding"]
            await send({"type": "http.response.start", "status": answer.status_code, "headers": kept})
            async for chunk in answer.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})


@pytest.fixture
async def proxy(openai_server: FakeOpenAiServer) -> AsyncIterator[ForwardProxy]:
    upstream = openai_server.base_url.removesuffix("/v1")
    app = ForwardProxy(upstream)
    server = EmbeddedHttpServer(app, "127.0.0.1", 0, grace_seconds=1.0, http="h11", name="test-proxy")
    await server.start()
    try:
        app.url = f"http://127.0.0.1:{server.port}"
        yield app
    finally:
        await server.stop()


def _client(base_url: str) -> OpenAiChatClient:
    config = ModelConfig(base_url=base_url, max_retries=0, timeout_seconds=10)
    return OpenAiChatClient("local/model", config, env={})


async def _ask(client: OpenAiChatClient, text: str, stream: bool = False) -> str | None:
    if not stream:
        return (await client.complete([ChatMessage.user(text)])).content
    accumulator = StreamAccumulator()
    async for delta in client.stream([ChatMessage.user(text)]):
        accumulator.add(delta)
    return accumulator.result().content


@pytest.mark.parametrize("stream", [False, True])
async def test_the_model_is_reached_through_the_proxy_the_environment_names(
    openai_server: FakeOpenAiServer, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    openai_server.reply_text("hello through the proxy")
    client = _client(UNRESOLVABLE)
    try:
        reply = await _ask(client, "hi", stream)
    finally:
        await client.aclose()
    assert reply == "hello through the proxy"
    assert proxy.seen == ["model.invalid"]
    assert openai_server.requests[-1].body["messages"][-1]["content"] == "hi"


async def test_no_proxy_and_this_machine_s_own_models_go_past_the_proxy(
    openai_server: FakeOpenAiServer, proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host `NO_PROXY` names is asked directly; so is a model on this machine's loopback, NO_PROXY or
    not (a proxy elsewhere cannot reach this machine's 127.0.0.1)."""
    for name in ("no_proxy", "ALL_PROXY", "all_proxy", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "model.invalid")
    openai_server.reply_text("straight to the model")
    local = _client(openai_server.base_url)
    unresolvable = _client(UNRESOLVABLE)
    try:
        assert await _ask(local, "hi") == "straight to the model"
        with pytest.raises(LlmConnectionError):  # not through the proxy, so the name does not resolve
            await _ask(unresolvable, "hi")
    finally:
        await local.aclose()
        await unresolvable.aclose()
    assert proxy.seen == []


def _only(monkeypatch: pytest.MonkeyPatch, **variables: str) -> None:
    """These proxy variables and no other."""
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "https_proxy", "HTTPS_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("HTTP_PROXY", raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)


@pytest.mark.parametrize(
    "value",
    ["socks4://proxy.corp:1080/", "http://user:secret@127.0.0.1:99999", "ftp://proxy.corp:21"],
)
async def test_a_proxy_httpx_cannot_use_is_named_once_and_the_server_asked_directly(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, value: str
) -> None:
    """A proxy setting made for other programs (SOCKS4, which httpx does not speak): klaw must still start
    and answer; the warning names the variable (its password masked) and what to do."""
    _only(monkeypatch, all_proxy=value)
    client = _client(UNRESOLVABLE)
    try:
        with pytest.raises(LlmConnectionError) as failed:
            await _ask(client, "hi")
    finally:
        await client.aclose()
    assert "host name was not found" in str(failed.value)  # asked directly, so the name did not resolve
    warnings = [r.getMessage() for r in caplog.records if r.name == "klaw.llm.proxy"]
    assert len(warnings) == 1 and warnings[0].startswith("all_proxy=") and "is not a proxy klaw can use" in warnings[0]
    assert "secret" not in warnings[0] and "NO_PROXY" in warnings[0]


@pytest.mark.parametrize("host", ["127.1", "localhost.", "0.0.0.0", "[::1]"])
async def test_every_spelling_of_this_machine_goes_past_the_proxy(
    proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch, host: str
) -> None:
    _only(monkeypatch, HTTP_PROXY=proxy.url)
    client = _client(f"http://{host}:9/v1")  # port 9 (discard): nothing listens, so the connection is refused
    try:
        with pytest.raises(LlmConnectionError):
            await _ask(client, "hi")
    finally:
        await client.aclose()
    assert proxy.seen == []


@pytest.mark.parametrize("no_proxy", [".invalid", "model.invalid", "*"])
async def test_no_proxy_forms_curl_and_urllib_read(
    proxy: ForwardProxy, monkeypatch: pytest.MonkeyPatch, no_proxy: str
) -> None:
    _only(monkeypatch, HTTP_PROXY=proxy.url, NO_PROXY=no_proxy)
    client = _client(UNRESOLVABLE)
    try:
        with pytest.raises(LlmConnectionError):
            await _ask(client, "hi")
    finally:
        await client.aclose()
    assert proxy.seen == []


async def test_a_failing_proxy_is_named_not_the_model_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """The proxy down: the answer names the proxy's variable (password masked) and what to check,
    rather than sending the person to edit baseUrl."""
    _only(monkeypatch, HTTP_PROXY="http://me:secret@127.0.0.1:9")  # nothing listens on port 9
    client = _client(UNRESOLVABLE)
    try:
        with pytest.raises(LlmConnectionError) as failed:
            await _ask(client, "hi")
    finally:
        await client.aclose()
    said = str(failed.value)  # the hint is part of the message
    assert "connection refused" in said
    assert "through the proxy HTTP_PROXY=http://me:••••••@127.0.0.1:9" in said and "NO_PROXY" in said
    assert "secret" not in said
