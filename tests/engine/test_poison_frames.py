"""Bad input through the engine socket gets a final, clear answer at once, and the connection goes on.

A gateway retries a frame refused as `internal` (a transient fault) and sends nothing else meanwhile,
so input that can never be accepted must never be refused as `internal`: one such message would hold
up every chat behind it. Each case here sends raw bytes to a real engine over its real socket.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from klaw.engine.frames import AckFrame, CommandFrame, ErrorFrame, InboundFrame, OutboundFrame
from klaw.engine.runtime import Engine
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from tests.engine import GatewayClient, short_socket_dir
from tests.engine.harness import engine_config


@pytest.fixture
async def engine() -> AsyncIterator[Engine]:
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as server:
            engine = await Engine.start(home, engine_config(server.base_url, processing={"debounceMs": 60000}))
            try:
                yield engine
            finally:
                await engine.shutdown(timeout_seconds=5)


@pytest.fixture
async def gateway(engine: Engine) -> AsyncIterator[GatewayClient]:
    client = await GatewayClient.connect(engine.home.socket_path)
    await client.send_bytes(b'{"type":"hello","channels":["web"]}\n')
    try:
        yield client
    finally:
        await client.aclose()


def raw_inbound(**fields: str) -> bytes:
    frame = {"type": "inbound", "id": "m1", "channel": "web", "chat_id": "main", "text": "hello"} | fields
    return json.dumps(frame).encode() + b"\n"  # json.dumps writes a lone surrogate as its \ud800 escape


def log_lines(home: KlawHome) -> list[str]:
    return [line for path in Path(home.conversations).rglob("*.jsonl") for line in path.read_text().splitlines()]


@pytest.mark.parametrize("args", ["exchange 99999999999999999999", "segment ²", "exchange -1"])
async def test_forget_with_an_impossible_id_is_answered_with_its_usage(gateway: GatewayClient, args: str) -> None:
    await gateway.send(CommandFrame(id="c1", channel="web", chat_id="main", command="forget", args=args))
    replies = [await gateway.recv(), await gateway.recv()]
    notice = next(frame for frame in replies if isinstance(frame, OutboundFrame))
    assert AckFrame(id="c1") in replies
    assert notice.kind == "notice" and "usage: /forget" in notice.text


async def test_forget_typed_as_text_with_a_huge_id_is_answered_with_its_usage(gateway: GatewayClient) -> None:
    await gateway.send(InboundFrame(id="t1", channel="web", chat_id="main", text="/forget exchange 1" + "0" * 30))
    replies = [await gateway.recv(), await gateway.recv()]
    assert AckFrame(id="t1") in replies
    assert any(isinstance(frame, OutboundFrame) and "usage: /forget" in frame.text for frame in replies)


async def test_text_holding_a_lone_surrogate_is_refused_for_good_and_nothing_is_logged(
    engine: Engine, gateway: GatewayClient
) -> None:
    await gateway.send_bytes(raw_inbound(text="broken \ud800 text"))
    error = await gateway.recv()
    assert isinstance(error, ErrorFrame) and error.ref == "m1"
    assert error.code != "internal"  # final: the gateway must not retry it
    assert "surrogate" in error.message and "broken" not in error.message
    await gateway.send(InboundFrame(id="m2", channel="web", chat_id="other", text="fine"))
    assert await gateway.recv() == AckFrame(id="m2")
    assert len(log_lines(engine.home)) == 1


async def test_a_message_over_the_limit_is_refused_with_its_size(
    engine: Engine, gateway: GatewayClient, caplog: pytest.LogCaptureFixture
) -> None:
    """Every channel's limit, at the engine (decision 240): the gateway's error says the size and the limit,
    so the person reads why; before, the frame was stored and its 200,001 characters went to the model. The
    engine's log says it refused bad input (a warning), not that its handler failed (an error: review54)."""
    await gateway.send(InboundFrame(id="m1", channel="web", chat_id="main", text="y" * 200_001))
    error = await gateway.recv()
    assert isinstance(error, ErrorFrame) and error.ref == "m1" and error.code == "refused"
    assert "is 200,001 characters, more than the 100,000 a message may hold" in error.message
    assert "it was not stored" in error.message and "yyy" not in error.message
    assert log_lines(engine.home) == []
    said = [r for r in caplog.records if r.name == "klaw.engine.frame_dispatch"]
    assert [(r.levelname, r.getMessage().split(" from ")[0]) for r in said] == [("WARNING", "refused inbound m1")]


async def test_a_chat_id_no_log_can_be_named_after_is_refused_for_good(engine: Engine, gateway: GatewayClient) -> None:
    await gateway.send_bytes(raw_inbound(chat_id="x" * 300))
    error = await gateway.recv()
    assert isinstance(error, ErrorFrame) and error.ref == "m1" and error.code != "internal"
    assert "chat id has 300 characters" in error.message
    await gateway.send_bytes(raw_inbound(id="m2", chat_id="é" * 40))  # 40 characters, 360 bytes once encoded
    error = await gateway.recv()
    assert isinstance(error, ErrorFrame) and error.code != "internal" and "bytes" in error.message
    await gateway.send_bytes(raw_inbound(id="m3", chat_id="line\nbreak"))
    error = await gateway.recv()
    assert isinstance(error, ErrorFrame) and error.code != "internal" and "printable" in error.message
    assert log_lines(engine.home) == []


async def test_the_reserved_task_channel_is_refused_for_good(gateway: GatewayClient) -> None:
    await gateway.send_bytes(raw_inbound(channel="scheduler"))
    error = await gateway.recv()
    assert isinstance(error, ErrorFrame) and error.code != "internal" and "reserved" in error.message


async def test_an_id_holding_a_lone_surrogate_gets_an_error_and_keeps_the_connection(gateway: GatewayClient) -> None:
    await gateway.send_bytes(raw_inbound(id="\ud800"))
    error = await gateway.recv()
    assert isinstance(error, ErrorFrame) and error.ref is None and error.code != "internal"
    assert await gateway.roundtrip() == []  # still connected: the ping is answered


async def test_an_id_another_chat_used_is_refused_for_good_and_a_resend_stays_acknowledged(
    engine: Engine, gateway: GatewayClient
) -> None:
    """Before, the second chat's message was acknowledged but never stored nor answered: lost silently."""
    await gateway.send_bytes(raw_inbound(id="p10", chat_id="r", text="dup id"))
    assert await gateway.recv() == AckFrame(id="p10")
    await gateway.send_bytes(raw_inbound(id="p10", chat_id="r", text="dup id"))  # a resend: same chat
    assert await gateway.recv() == AckFrame(id="p10")
    await gateway.send_bytes(raw_inbound(id="p10", chat_id="s", text="secret words"))
    error = await gateway.recv()
    assert isinstance(error, ErrorFrame) and error.ref == "p10" and error.code == "refused"
    assert "already used by another chat" in error.message and "unique" in error.message
    assert "it was not stored" in error.message and "secret" not in error.message
    await gateway.send(CommandFrame(id="p10", channel="web", chat_id="s", command="new", args=""))
    error = await gateway.recv()
    assert isinstance(error, ErrorFrame) and error.ref == "p10" and error.code == "refused"
    assert [json.loads(line)["chat_id"] for line in log_lines(engine.home)] == ["r"]
    assert not (Path(engine.home.conversations) / "web_s").exists()
