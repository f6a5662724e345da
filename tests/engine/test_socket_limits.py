"""The engine socket's bounds, driven as a misbehaving local client would: too many connections, and
connections that send most of a frame and never its newline. Each one past a bound is told why and
closed; a well-behaved gateway goes on being answered meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from klaw.engine.frames import MAX_FRAME_BYTES, AckFrame, ErrorFrame, InboundFrame
from klaw.engine.socket_server import EngineSocketServer
from tests.engine import GatewayClient, RecordingHandler, short_socket_dir

CONNECTION_LIMIT = 256  # the engine's, as documented in docs/security.md
STALLERS = 20  # each holding just under 1 MiB: 20 MiB, past the 16 MiB the engine keeps for unfinished frames


@pytest.fixture
async def server() -> AsyncIterator[EngineSocketServer]:
    with short_socket_dir() as directory:
        engine = EngineSocketServer(directory / "engine.sock", RecordingHandler())  # the engine's own limits
        await engine.start()
        try:
            yield engine
        finally:
            await engine.aclose()


@pytest.fixture
def clients() -> Iterator[list[GatewayClient]]:
    opened: list[GatewayClient] = []
    yield opened
    for client in opened:
        client.writer.transport.abort()


async def connect(path: Path, opened: list[GatewayClient]) -> GatewayClient:
    client = await GatewayClient.connect(path)
    opened.append(client)
    return client


async def test_a_connection_past_the_limit_is_told_why_and_the_others_go_on(
    server: EngineSocketServer, clients: list[GatewayClient]
) -> None:
    held = [await connect(server.path, clients) for _ in range(CONNECTION_LIMIT)]
    await asyncio.gather(*(client.roundtrip() for client in held))  # every one taken in

    extra = await connect(server.path, clients)
    refusal = await extra.recv()
    assert isinstance(refusal, ErrorFrame) and refusal.code == "refused"
    assert f"{CONNECTION_LIMIT} connections" in refusal.message and "close some" in refusal.message
    assert await extra.read_to_eof() == b""

    await held[0].send(InboundFrame(id="still-served", channel="console", chat_id="me", text="hi"))
    assert await held[0].recv() == AckFrame(id="still-served")
    held[-1].writer.write_eof()
    assert await held[-1].read_to_eof() == b""  # the engine closed its end: the connection is gone from its count
    again = await connect(server.path, clients)
    assert await again.roundtrip() == []


async def test_connections_holding_unfinished_frames_are_dropped_oldest_first(
    server: EngineSocketServer, clients: list[GatewayClient]
) -> None:
    stallers = [await connect(server.path, clients) for _ in range(STALLERS)]
    for staller in stallers:
        await staller.roundtrip()
        await staller.send_bytes(b'{"type": "inbound", "text": "' + b"x" * (MAX_FRAME_BYTES - 100))  # no newline

    gateway = await connect(server.path, clients)
    big = InboundFrame(id="big", channel="console", chat_id="me", text="y" * (MAX_FRAME_BYTES - 200))
    await gateway.send(big)
    assert await gateway.recv() == AckFrame(id="big")  # a whole frame, however large, is never the one dropped
    assert await gateway.roundtrip() == []

    for oldest in stallers[: STALLERS - 16]:
        refusal = await oldest.recv()
        assert isinstance(refusal, ErrorFrame) and refusal.code == "refused"
        assert "unfinished" in refusal.message and "newline" in refusal.message
        assert await oldest.read_to_eof() == b""
