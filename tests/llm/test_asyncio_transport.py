"""The model client's transport on asyncio streams (llm/asyncio_transport.py): requests through a real
local server, kept-alive connections reused, one a server closed replaced without an error, large
bodies sent whole, HTTPS with its certificate checked. Timeouts and refused connections are covered
through the same client by test_openai_client.py."""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from klaw.config import ModelConfig
from klaw.llm.asyncio_transport import AsyncioBackend, AsyncioTransport
from klaw.llm.errors import LlmConnectionError
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.llm.messages import ChatMessage
from klaw.llm.openai_client import OpenAiChatClient
from tests.tls import self_signed


def _client(base_url: str, backend: AsyncioBackend) -> tuple[OpenAiChatClient, httpx.AsyncClient]:
    http = httpx.AsyncClient(timeout=None, follow_redirects=False, transport=AsyncioTransport(backend))
    config = ModelConfig(base_url=base_url, max_retries=0, timeout_seconds=10)
    return OpenAiChatClient("local/model", config, http=http, env={}), http


async def test_requests_reuse_one_connection_of_the_asyncio_backend(openai_server: FakeOpenAiServer) -> None:
    backend = AsyncioBackend()
    client, http = _client(openai_server.base_url, backend)
    openai_server.reply_text("first")
    openai_server.reply_text("second")
    try:
        first = await client.complete([ChatMessage.user("one")])
        second = await client.complete([ChatMessage.user("two")])
    finally:
        await http.aclose()
    assert (first.content, second.content) == ("first", "second")
    assert backend.connections == 1  # httpx used our pool, and kept the connection alive
    assert [r.body["messages"][-1]["content"] for r in openai_server.requests] == ["one", "two"]


async def test_a_large_request_body_arrives_whole(openai_server: FakeOpenAiServer) -> None:
    text = "words " * 100_000  # 600 kB: sent in pieces past the stream's flush size
    client, http = _client(openai_server.base_url, AsyncioBackend())
    openai_server.reply_text("read it")
    try:
        answer = await client.complete([ChatMessage.user(text)])
    finally:
        await http.aclose()
    assert answer.content == "read it"
    assert openai_server.requests[0].body["messages"][-1]["content"] == text


@pytest.fixture
async def closing_server() -> AsyncIterator[tuple[str, list[int]]]:
    """A server answering one request per connection and then closing it, without saying so in a header
    (as a server whose keep-alive timed out does): yields its base URL and the requests each connection got."""
    served: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(_body_length(head))
        served.append(1)
        answer = {"role": "assistant", "content": f"answer {len(served)}"}
        body = json.dumps({"choices": [{"message": answer}]}).encode()
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body))
        writer.write(body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1", served
    finally:
        server.close()
        await server.wait_closed()


async def test_a_connection_the_server_closed_is_not_reused(closing_server: tuple[str, list[int]]) -> None:
    base_url, served = closing_server
    backend = AsyncioBackend()
    client, http = _client(base_url, backend)  # no retries: a request sent on the dead connection would fail
    try:
        first = await client.complete([ChatMessage.user("one")])
        await asyncio.sleep(0.05)  # the server's close reaches the idle connection
        second = await client.complete([ChatMessage.user("two")])
    finally:
        await http.aclose()
    assert (first.content, second.content) == ("answer 1", "answer 2")
    assert backend.connections == 2 and served == [1, 1]


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    return self_signed(tmp_path, "localhost")


def _body_length(head: bytes) -> int:
    return next(int(line.split(b":")[1]) for line in head.lower().split(b"\r\n") if line.startswith(b"content-length"))


async def test_https_checks_the_certificate_and_keeps_the_connection(
    certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = certificate

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):  # the client left
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                await reader.readexactly(_body_length(head))
                body = b'{"choices": [{"message": {"role": "assistant", "content": "over tls"}}]}'
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(body) + body)
                await writer.drain()

    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=served)
    port = server.sockets[0].getsockname()[1]
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the transport's TLS context trusts what httpx's would
    backend = AsyncioBackend()
    client, http = _client(f"https://localhost:{port}/v1", backend)
    untrusted, untrusted_http = _client(f"https://127.0.0.1:{port}/v1", AsyncioBackend())  # not the cert's name
    try:
        answers = [(await client.complete([ChatMessage.user(q)])).content for q in ("one", "two")]
        with pytest.raises(LlmConnectionError, match=r"the TLS handshake failed \(CERTIFICATE_VERIFY_FAILED\)"):
            await untrusted.complete([ChatMessage.user("three")])
    finally:
        await http.aclose()
        await untrusted_http.aclose()
        server.close()
    assert answers == ["over tls", "over tls"]
    assert backend.connections == 1
