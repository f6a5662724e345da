"""A model reached through a SOCKS proxy the environment names, as GNOME's manual proxy setting exports it
(`all_proxy=socks://host:port/`) or an `ssh -D` tunnel is named (`ALL_PROXY=socks5://127.0.0.1:1080`):
klaw depends on `httpx[socks]` and asks GNOME's versionless `socks://` as SOCKS5 (decision 335). Before,
it warned that it could not use the proxy and asked the server directly, which failed where only the
proxy leads to it.

The proxy is a small SOCKS5 server (no authentication, CONNECT only) that leads every connection to the
fake OpenAI server, whatever host it was asked for; the base URL names a host that never resolves, so a
request that skips the proxy fails.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest

from klaw.llm.errors import LlmConnectionError
from klaw.llm.fake_server import FakeOpenAiServer
from tests.llm.test_model_through_proxy import UNRESOLVABLE, _ask, _client, _only


class Socks5Proxy:
    """SOCKS5 on 127.0.0.1 (RFC 1928: no authentication, CONNECT): each connection is led to `upstream`'s
    port on this machine; `seen` has each target as the client named it (host, port)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.seen: list[tuple[str, int]] = []
        self.port = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            _, count = await reader.readexactly(2)
            await reader.readexactly(count)  # the methods offered; "no authentication" is chosen
            writer.write(b"\x05\x00")
            _, command, _, kind = await reader.readexactly(4)
            if kind == 3:
                host = (await reader.readexactly((await reader.readexactly(1))[0])).decode()
            else:
                raw = await reader.readexactly(4 if kind == 1 else 16)
                host = socket.inet_ntop(socket.AF_INET if kind == 1 else socket.AF_INET6, raw)
            port = int.from_bytes(await reader.readexactly(2), "big")
            self.seen.append((host, port))
            assert command == 1, "CONNECT only"
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
            writer.write(b"\x05\x00\x00\x01" + bytes(6))  # succeeded; the bound address does not matter
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    finally:
        writer.close()


@pytest.fixture
async def socks(openai_server: FakeOpenAiServer) -> AsyncIterator[Socks5Proxy]:
    port = int(openai_server.base_url.removesuffix("/v1").rsplit(":", 1)[1])
    proxy = Socks5Proxy(port)
    server = await asyncio.start_server(proxy.serve, "127.0.0.1", 0)
    proxy.port = server.sockets[0].getsockname()[1]
    async with server:
        yield proxy


@pytest.mark.parametrize(
    ("variable", "scheme"),
    [("all_proxy", "socks"), ("ALL_PROXY", "socks5"), ("HTTP_PROXY", "socks5h")],
    ids=["gnome-socks", "socks5", "socks5h"],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_the_model_is_reached_through_a_socks_proxy(
    openai_server: FakeOpenAiServer,
    socks: Socks5Proxy,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    scheme: str,
    stream: bool,
) -> None:
    _only(monkeypatch, **{variable: f"{scheme}://127.0.0.1:{socks.port}/"})
    openai_server.reply_text("hello through SOCKS")
    client = _client(UNRESOLVABLE)
    try:
        reply = await _ask(client, "hi", stream)
    finally:
        await client.aclose()

    assert reply == "hello through SOCKS"
    assert socks.seen == [("model.invalid", 80)]  # the name is resolved by the proxy, not here


async def test_a_socks_proxy_that_is_down_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    _only(monkeypatch, all_proxy="socks://127.0.0.1:9/")  # nothing listens on port 9
    client = _client(UNRESOLVABLE)
    try:
        with pytest.raises(LlmConnectionError) as failed:
            await _ask(client, "hi")
    finally:
        await client.aclose()

    said = str(failed.value)
    assert "connection refused" in said
    assert "through the proxy all_proxy=socks://127.0.0.1:9/" in said and "NO_PROXY" in said
