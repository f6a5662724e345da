"""A model client of an http:// base URL loads no CA bundle (decision 411): a local model on a Raspberry Pi
paid 60-250 ms of every engine's start for certificates it never checks. It still never speaks TLS
unverified, and an https:// base URL checks the server's certificate as before."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from pathlib import Path

import httpx
import pytest

from klaw.config import ModelConfig
from klaw.llm.asyncio_transport import AsyncioTransport
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.llm.http_client import new_http_client
from klaw.llm.messages import ChatMessage
from klaw.llm.openai_client import OpenAiChatClient
from tests.tls import self_signed

BODY = b'{"choices": [{"message": {"role": "assistant", "content": "over tls"}}]}'


def _trusted_authorities(http: httpx.AsyncClient) -> int:
    transport = http._transport
    assert isinstance(transport, AsyncioTransport)
    context = transport._pool._ssl_context  # the pool's context, which opens its TLS streams
    assert context is not None and context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    return int(context.cert_store_stats()["x509_ca"])


async def test_an_http_model_answers_and_its_client_loads_no_certificates(openai_server: FakeOpenAiServer) -> None:
    http = new_http_client(openai_server.base_url)
    client = OpenAiChatClient("local/model", ModelConfig(base_url=openai_server.base_url, max_retries=0), http=http)
    openai_server.reply_text("plain")
    try:
        assert (await client.complete([ChatMessage.user("hi")])).content == "plain"
        assert _trusted_authorities(http) == 0
    finally:
        await http.aclose()


async def test_https_still_checks_the_certificate_and_an_http_client_never_skips_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = self_signed(tmp_path, "localhost")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n" % len(BODY) + BODY)
            await writer.drain()

    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    server = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=served)
    port = server.sockets[0].getsockname()[1]
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    secure = new_http_client(f"https://localhost:{port}/v1")
    plain = new_http_client(f"http://localhost:{port}/v1")
    try:
        assert (await secure.get(f"https://localhost:{port}/v1/models")).status_code == 200
        assert _trusted_authorities(secure) > 0
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await plain.get(f"https://localhost:{port}/v1/models")  # asked anyway: refused, not unverified
    finally:
        await secure.aclose()
        await plain.aclose()
        server.close()
