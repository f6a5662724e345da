"""The engine socket over real Unix sockets: setup, acks, errors that keep the connection, routing, shutdown."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import stat
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from klaw.engine.frames import (
    MAX_FRAME_BYTES,
    PROTOCOL,
    AckFrame,
    CommandFrame,
    EngineFrame,
    ErrorFrame,
    GatewayFrame,
    HelloFrame,
    InboundFrame,
    OutboundFrame,
    PingFrame,
    PongFrame,
    ShutdownFrame,
    decode_frame,
)
from klaw.engine.socket_file import EngineAlreadyRunningError, EngineSocketError
from klaw.engine.socket_server import EngineSocketServer
from tests.engine import REPLY_TIMEOUT_SECONDS, GatewayClient, RecordingHandler, short_socket_dir

SECRET = "the launch code is 0000"


def inbound(msg_id: str, text: str = "hello", channel: str = "console") -> InboundFrame:
    return InboundFrame(id=msg_id, channel=channel, chat_id="me", text=text)


def outbound(text: str, channel: str = "console") -> OutboundFrame:
    return OutboundFrame(channel=channel, chat_id="me", text=text)


@pytest.fixture
def sock_path() -> Iterator[Path]:
    with short_socket_dir() as directory:
        yield directory / "engine.sock"


@pytest.fixture
def handler() -> RecordingHandler:
    return RecordingHandler()


@pytest.fixture
async def server(sock_path: Path, handler: RecordingHandler) -> AsyncIterator[EngineSocketServer]:
    engine = EngineSocketServer(sock_path, handler)
    await engine.start()
    try:
        yield engine
    finally:
        await engine.aclose()


@pytest.fixture
async def client(server: EngineSocketServer) -> AsyncIterator[GatewayClient]:
    gateway = await GatewayClient.connect(server.path)
    try:
        yield gateway
    finally:
        await gateway.aclose()


async def disconnected(server: EngineSocketServer) -> None:
    async with asyncio.timeout(REPLY_TIMEOUT_SECONDS):
        await server.wait_disconnected()


# --- the socket file


async def test_socket_file_is_0600_whatever_the_umask(sock_path: Path, handler: RecordingHandler) -> None:
    engine = EngineSocketServer(sock_path, handler)
    old = os.umask(0)
    try:
        await engine.start()
    finally:
        os.umask(old)
    try:
        mode = os.stat(sock_path).st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
    finally:
        await engine.aclose()


async def test_a_stale_socket_file_is_replaced(sock_path: Path, handler: RecordingHandler) -> None:
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(sock_path))
    dead.close()  # the file stays behind, as after a crash
    assert stat.S_ISSOCK(os.lstat(sock_path).st_mode)
    engine = EngineSocketServer(sock_path, handler)
    await engine.start()
    try:
        gateway = await GatewayClient.connect(sock_path)
        assert await gateway.roundtrip() == []
        await gateway.aclose()
    finally:
        await engine.aclose()


async def test_a_live_engine_on_the_path_is_detected(server: EngineSocketServer, handler: RecordingHandler) -> None:
    second = EngineSocketServer(server.path, handler)
    with pytest.raises(EngineAlreadyRunningError, match="already running"):
        await second.start()
    await second.aclose()  # must not remove the first engine's socket
    assert server.path.exists()
    gateway = await GatewayClient.connect(server.path)
    assert await gateway.roundtrip() == []
    await gateway.aclose()


async def test_a_file_that_is_not_a_socket_is_left_alone(sock_path: Path, handler: RecordingHandler) -> None:
    sock_path.write_text("notes")
    with pytest.raises(EngineSocketError, match="not a socket"):
        await EngineSocketServer(sock_path, handler).start()
    assert sock_path.read_text() == "notes"


async def test_aclose_removes_the_socket_file_and_closes_connections(server: EngineSocketServer) -> None:
    gateway = await GatewayClient.connect(server.path)
    await gateway.roundtrip()
    await server.aclose()
    assert not server.path.exists()
    assert await gateway.read_to_eof() == b""
    await gateway.aclose()
    assert server.connection_count == 0
    assert asyncio.all_tasks() == {asyncio.current_task()}  # no connection task left behind


async def test_stop_accepting_keeps_connected_gateways(server: EngineSocketServer, client: GatewayClient) -> None:
    await client.roundtrip()
    await server.stop_accepting()
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_unix_connection(str(server.path))
    await client.send(inbound("after-stop"))
    assert await client.roundtrip() == [AckFrame(id="after-stop")]


# --- frames in


async def test_inbound_is_handed_over_then_acked(client: GatewayClient, handler: RecordingHandler) -> None:
    frame = inbound("m1", SECRET)
    await client.send(frame)
    assert await client.recv() == AckFrame(id="m1")
    assert handler.inbound == [frame]


async def test_command_is_handed_over_then_acked(client: GatewayClient, handler: RecordingHandler) -> None:
    frame = CommandFrame(id="c1", channel="console", chat_id="me", command="new", args="x")
    await client.send(frame)
    assert await client.recv() == AckFrame(id="c1")
    assert handler.commands == [frame]


async def test_frames_are_handled_in_order(client: GatewayClient, handler: RecordingHandler) -> None:
    await client.send_bytes(b"".join(inbound(f"m{i}").model_dump_json().encode() + b"\n" for i in range(20)))
    assert await client.roundtrip() == [AckFrame(id=f"m{i}") for i in range(20)]
    assert [frame.id for frame in handler.inbound] == [f"m{i}" for i in range(20)]


async def test_ping_gets_a_pong_with_the_same_id(client: GatewayClient) -> None:
    await client.send(PingFrame(id="abc"))
    assert await client.recv() == PongFrame(id="abc", protocol=PROTOCOL)  # the engine's version (decision 535)
    await client.send(PingFrame())
    assert await client.recv() == PongFrame(id=None, protocol=PROTOCOL)


async def test_blank_lines_are_ignored(client: GatewayClient) -> None:
    await client.send_bytes(b"\n  \r\n\n")
    assert await client.roundtrip() == []


BAD_LINES = {
    "malformed_json": (b'{"type": "ping", \n', "malformed_json", None),
    "invalid_utf8": (b'{"type": "inbound", "text": "\xc3\x28"}\n', "malformed_json", None),
    "not_an_object": (b"[1, 2, 3]\n", "invalid_frame", None),
    "missing_field": (
        json.dumps({"type": "inbound", "id": "m9", "channel": "console", "text": SECRET}).encode() + b"\n",
        "invalid_frame",
        "m9",
    ),
    "unknown_type": (b'{"type": "teleport", "id": "t1"}\n', "unknown_type", "t1"),
    "engine_only_type": (b'{"type": "ack", "id": "a1"}\n', "invalid_frame", None),
}


@pytest.mark.parametrize("case", BAD_LINES.values(), ids=BAD_LINES.keys())
async def test_a_bad_frame_gets_an_error_and_the_connection_goes_on(
    client: GatewayClient, handler: RecordingHandler, case: tuple[bytes, str, str | None]
) -> None:
    raw, code, ref = case
    await client.send_bytes(raw)
    error = await client.recv()
    assert isinstance(error, ErrorFrame) and error.code == code and error.ref == ref
    assert SECRET not in error.message
    await client.send(inbound("next"))
    assert await client.recv() == AckFrame(id="next")
    assert [frame.id for frame in handler.inbound] == ["next"]


async def test_an_invalid_frame_error_names_the_field(client: GatewayClient) -> None:
    await client.send_bytes(BAD_LINES["missing_field"][0])
    error = await client.recv()
    assert isinstance(error, ErrorFrame) and "'chat_id'" in error.message


async def test_a_2_mib_line_is_skipped_and_the_next_frame_works(client: GatewayClient) -> None:
    await client.send_bytes(b'{"type": "inbound", "text": "' + b"x" * (2 * MAX_FRAME_BYTES) + b'"}\n')
    assert await client.recv() == ErrorFrame(code="frame_too_large", message=f"frame exceeds {MAX_FRAME_BYTES} bytes")
    await client.send(inbound("after-big"))
    assert await client.recv() == AckFrame(id="after-big")


async def test_oversized_frame_and_the_next_one_in_a_single_write(client: GatewayClient) -> None:
    await client.send_bytes(
        b"y" * (MAX_FRAME_BYTES + 1) + b"\n" + inbound("same-write").model_dump_json().encode() + b"\n"
    )
    error = await client.recv()
    assert isinstance(error, ErrorFrame) and error.code == "frame_too_large"
    assert await client.recv() == AckFrame(id="same-write")


async def test_a_frame_of_exactly_the_limit_is_accepted_one_more_byte_is_not(client: GatewayClient) -> None:
    def padded(total: int, msg_id: str) -> bytes:
        head = inbound(msg_id, text="").model_dump_json().encode()
        return head[:-1] + b" " * (total - len(head) - 1) + b"}\n"  # JSON whitespace before the closing brace

    await client.send_bytes(padded(MAX_FRAME_BYTES, "exact") + padded(MAX_FRAME_BYTES + 1, "over"))
    assert await client.recv() == AckFrame(id="exact")
    error = await client.recv()
    assert isinstance(error, ErrorFrame) and error.code == "frame_too_large"
    assert await client.roundtrip() == []


async def test_a_failing_handler_gets_a_retryable_error_and_the_connection_goes_on(
    client: GatewayClient, handler: RecordingHandler, caplog: pytest.LogCaptureFixture
) -> None:
    handler.fail_ids = {"bad", "bad-cmd"}
    caplog.set_level(logging.DEBUG, logger="klaw.engine")
    await client.send(inbound("bad", SECRET))
    await client.send(CommandFrame(id="bad-cmd", channel="console", chat_id="me", command="x", args=SECRET))
    first, second = await client.recv(), await client.recv()
    assert isinstance(first, ErrorFrame) and first.code == "disk_full" and first.ref == "bad"  # ENOSPC (488)
    assert isinstance(second, ErrorFrame) and second.code == "internal" and second.ref == "bad-cmd"  # tried a few times
    assert "no space left" in first.message and "no space left" in second.message
    assert SECRET not in first.message + second.message
    assert all(SECRET not in record.getMessage() for record in caplog.records)
    await client.send(inbound("good"))
    assert await client.recv() == AckFrame(id="good")


async def test_logs_never_carry_message_text(
    client: GatewayClient, server: EngineSocketServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="klaw.engine")
    await client.send(inbound("m", SECRET))
    await client.send_bytes(json.dumps({"type": "inbound", "id": "m2", "text": SECRET}).encode() + b"\n")
    await client.roundtrip()
    await server.send_outbound(outbound(SECRET, channel="nobody"))
    assert caplog.records and all(SECRET not in record.getMessage() for record in caplog.records)


async def test_a_gateway_error_frame_is_not_answered(client: GatewayClient) -> None:
    await client.send(ErrorFrame(code="internal", message="gateway trouble", ref="o1"))
    assert await client.roundtrip() == []


# --- connections that go away


async def test_a_client_disconnecting_mid_frame_does_not_disturb_the_server(
    server: EngineSocketServer, handler: RecordingHandler
) -> None:
    torn = await GatewayClient.connect(server.path)
    await torn.roundtrip()  # the server has taken the connection in, so waiting for it to go means something
    await torn.send_bytes(b'{"type": "inbound", "id": "half", "channel": "con')
    await torn.aclose()
    await disconnected(server)
    assert handler.inbound == []
    gateway = await GatewayClient.connect(server.path)
    await gateway.send(inbound("whole"))
    assert await gateway.recv() == AckFrame(id="whole")
    await gateway.aclose()


async def test_a_client_vanishing_with_replies_pending_does_not_disturb_the_server(
    server: EngineSocketServer, handler: RecordingHandler
) -> None:
    rude = await GatewayClient.connect(server.path)
    await rude.send(HelloFrame(channels=["console"]))
    await rude.roundtrip()
    await rude.send_bytes(b"".join(inbound(f"r{i}").model_dump_json().encode() + b"\n" for i in range(200)))
    rude.writer.transport.abort()
    await disconnected(server)
    assert await server.send_outbound(outbound("later")) is False  # its route is gone: queued, not lost
    gateway = await GatewayClient.connect(server.path)
    assert await gateway.roundtrip() == []
    await gateway.aclose()


# --- frames out


async def test_outbound_goes_to_the_gateway_serving_the_channel(server: EngineSocketServer) -> None:
    console, telegram = await GatewayClient.connect(server.path), await GatewayClient.connect(server.path)
    await console.send(HelloFrame(channels=["console"]))
    await telegram.send(HelloFrame(channels=["telegram", "web"]))
    await console.roundtrip()
    await telegram.roundtrip()
    assert await server.send_outbound(outbound("to telegram", channel="telegram")) is True
    assert await server.send_outbound(outbound("to console")) is True
    assert await telegram.roundtrip() == [outbound("to telegram", channel="telegram")]
    assert await console.roundtrip() == [outbound("to console")]
    await console.aclose()
    await telegram.aclose()


async def test_the_latest_hello_wins_and_an_earlier_gateway_takes_over_again(server: EngineSocketServer) -> None:
    old, new = await GatewayClient.connect(server.path), await GatewayClient.connect(server.path)
    for gateway in (old, new):
        await gateway.send(HelloFrame(channels=["console"]))
        await gateway.roundtrip()
    assert await server.send_outbound(outbound("one")) is True
    assert await new.roundtrip() == [outbound("one")]
    await new.aclose()
    # Whether or not the server has noticed yet, "two" cannot go to the closed socket (a write to it fails at once).
    assert await server.send_outbound(outbound("two")) is True
    assert await old.roundtrip() == [outbound("two")]
    await old.aclose()


async def test_outbound_waits_for_a_gateway_and_is_flushed_in_order(server: EngineSocketServer) -> None:
    texts = [f"reply {i}" for i in range(5)]
    for text in texts:
        assert await server.send_outbound(outbound(text)) is False
    assert await server.send_outbound(outbound("elsewhere", channel="telegram")) is False
    assert server.pending_outbound("console") == 5
    gateway = await GatewayClient.connect(server.path)
    await gateway.send(HelloFrame(channels=["console"]))
    assert await gateway.roundtrip() == [waited(outbound(text)) for text in texts]  # marked: they waited
    assert server.pending_outbound("console") == 0
    assert server.pending_outbound("telegram") == 1
    assert await server.send_outbound(outbound("now")) is True
    assert await gateway.roundtrip() == [outbound("now")]
    await gateway.aclose()


def waited(frame: OutboundFrame) -> OutboundFrame:
    """As a frame queued while no gateway served its channel comes at the next hello (decision 441)."""
    return frame.model_copy(update={"waited": True})


BIG_TEXT = "x" * (256 * 1024)
BIG_COUNT = 40  # 10 MiB queued: far more than the socket buffers, so a gateway that does not read stalls a flush


async def until(condition: Callable[[], bool]) -> None:
    """Yield to the loop until `condition` holds: the server's side of a stalled write has no event to wait on."""
    async with asyncio.timeout(REPLY_TIMEOUT_SECONDS):
        while not condition():  # noqa: ASYNC110 - nothing to wait on; yielding lets the server's I/O run
            await asyncio.sleep(0)


def numbers(frames: list[GatewayFrame | EngineFrame]) -> list[int]:
    return [int(frame.text.split(":")[0]) for frame in frames if isinstance(frame, OutboundFrame)]


async def stalled_flush(server: EngineSocketServer) -> tuple[GatewayClient, GatewayClient, list[int]]:
    """A gateway whose flush of the queue stalls (it does not read), then a second one that flushes the rest."""
    for i in range(BIG_COUNT):
        await server.send_outbound(outbound(f"{i}:{BIG_TEXT}"))
    slow, fast = await GatewayClient.connect(server.path), await GatewayClient.connect(server.path)
    slow.writer.transport.pause_reading()  # type: ignore[attr-defined]
    await slow.send(HelloFrame(channels=["console"]))
    await until(lambda: server.pending_outbound("console") < BIG_COUNT)
    await fast.send(HelloFrame(channels=["console"]))
    rest = numbers(await fast.roundtrip())
    assert rest and rest == list(range(rest[0], BIG_COUNT)), "the second flush must take the frames left"
    return slow, fast, rest


async def test_two_gateways_flushing_one_queue_at_once_both_stay_connected(server: EngineSocketServer) -> None:
    slow, fast, rest = await stalled_flush(server)
    slow.writer.transport.resume_reading()  # type: ignore[attr-defined]
    assert numbers(await slow.roundtrip()) == list(range(rest[0]))  # and the pong: the connection goes on
    assert server.connection_count == 2 and server.pending_outbound("console") == 0
    assert await server.send_outbound(outbound("next")) is True
    assert await fast.roundtrip() == [outbound("next")]
    await slow.aclose()
    await fast.aclose()


async def test_a_frame_whose_flush_failed_is_queued_again_after_another_flush_emptied_the_queue(
    server: EngineSocketServer,
) -> None:
    slow, fast, rest = await stalled_flush(server)
    slow.writer.transport.abort()  # the stalled write fails; the other flush has emptied the queue meanwhile
    await until(lambda: server.connection_count == 1)
    assert server.pending_outbound("console") == 1
    assert await server.send_outbound(outbound("next")) is True
    assert await fast.roundtrip() == [waited(outbound(f"{rest[0] - 1}:{BIG_TEXT}")), outbound("next")]
    await fast.aclose()


async def test_the_queue_drops_the_oldest_beyond_its_limit(
    sock_path: Path, handler: RecordingHandler, caplog: pytest.LogCaptureFixture
) -> None:
    engine = EngineSocketServer(sock_path, handler, outbound_queue_limit=3)
    await engine.start()
    try:
        with caplog.at_level(logging.WARNING, logger="klaw.engine.outbound_routes"):
            for i in range(5):
                await engine.send_outbound(outbound(f"r{i}"))
        assert any("dropped the oldest" in record.getMessage() for record in caplog.records)
        gateway = await GatewayClient.connect(sock_path)
        await gateway.send(HelloFrame(channels=["console"]))
        assert await gateway.roundtrip() == [waited(outbound(f"r{i}")) for i in (2, 3, 4)]
        await gateway.aclose()
    finally:
        await engine.aclose()


async def test_an_outbound_text_too_large_for_one_frame_goes_in_parts_under_the_limit(
    server: EngineSocketServer,
) -> None:
    """Never one line a gateway must reject (the old refusal lost the reply): parts, in order, each
    frame within the limit, split between paragraphs, joined exactly the text."""
    paragraph = 'a line of a long reply with "quotes" and tabs\t\n' * 2000 + "\n"
    text = paragraph * 20  # about 2 MiB once escaped
    frames = await _queued_then_read_by_a_gateway(server, text)
    assert all(isinstance(f, OutboundFrame) and f.reply_to is None for f in frames)
    texts = [f.text for f in frames if isinstance(f, OutboundFrame)]
    assert "".join(texts) == text
    assert all(t.endswith("\n\n") for t in texts[:-1])  # cut between paragraphs


async def test_one_line_of_escapes_over_a_frame_goes_in_parts_each_under_the_limit(
    server: EngineSocketServer,
) -> None:
    """A line over the limit is cut between characters, each costed as the frame's JSON escapes it (quotes,
    backslashes, control characters, non-ASCII); blank lines in a row cut after each (decision 452 costs it
    with JSON's string encoder alone and cuts without a look-behind regex)."""
    text = "\n\n\n" + 'é"\\\x01😀\u2028 ab' * 90_000 + "\n\n\n\nend"  # one line of ~1.1 MB, ~2 MiB escaped
    frames = await _queued_then_read_by_a_gateway(server, text)
    texts = [f.text for f in frames if isinstance(f, OutboundFrame)]
    assert "".join(texts) == text and len(texts) == len(frames)


async def _queued_then_read_by_a_gateway(server: EngineSocketServer, text: str) -> list[GatewayFrame | EngineFrame]:
    """`text` sent while no gateway is there (queued, in two parts at least), then read by one that says
    hello: its frames, each line checked within the frame limit."""
    assert not await server.send_outbound(outbound(text))  # no gateway yet: queued
    parts = server.pending_outbound("console")
    assert parts >= 2
    gateway = await GatewayClient.connect(server.path)
    await gateway.send(HelloFrame(channels=["console"]))
    lines = []
    for _ in range(parts):
        async with asyncio.timeout(10):
            lines.append(await gateway.reader.readline())
    await gateway.aclose()
    assert all(len(line) <= MAX_FRAME_BYTES for line in lines)
    return [decode_frame(line) for line in lines]


async def test_shutdown_is_broadcast_to_every_gateway(server: EngineSocketServer) -> None:
    gateways = [await GatewayClient.connect(server.path) for _ in range(3)]
    for gateway in gateways:
        await gateway.roundtrip()
    assert await server.broadcast_shutdown("upgrade") == 3
    for gateway in gateways:
        assert await gateway.recv() == ShutdownFrame(reason="upgrade")
        await gateway.aclose()
    await disconnected(server)
