"""Whatever a gateway sends, the engine answers with errors or acks and the connection keeps working.

Each example runs on its own event loop with its own server (`asyncio.run` inside the sync hypothesis
test), so examples cannot leak state into one another; every wait is on a reply, under a safety timeout.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC
from typing import Any

from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from klaw.engine.frames import (
    MAX_FRAME_BYTES,
    AckFrame,
    CommandFrame,
    EngineFrame,
    ErrorFrame,
    FrameError,
    GatewayFrame,
    HelloFrame,
    InboundFrame,
    PingFrame,
    PongFrame,
    decode_frame,
)
from klaw.engine.socket_server import EngineSocketServer
from klaw.scheduling.names import SUBAGENT_CHANNEL
from klaw.store.records import CHANNEL_NAME, chat_id_problem
from tests.engine import GatewayClient, RecordingHandler, short_socket_dir

FUZZ = settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow], database=None
)
SENTINEL = "fuzz-sentinel"
FRAME_TYPES = ["hello", "inbound", "command", "ping", "ack", "outbound", "pong", "shutdown", "error"]


async def exchange(payload: bytes) -> tuple[list[GatewayFrame | EngineFrame], RecordingHandler]:
    """Send `payload` then a ping on one connection; the frames answered before the pong, and the handler."""
    handler = RecordingHandler()
    with short_socket_dir() as directory:
        server = EngineSocketServer(directory / "engine.sock", handler)
        await server.start()
        try:
            gateway = await GatewayClient.connect(server.path)
            # The newline ends whatever the payload left open, so the ping is a line of its own.
            await gateway.send_bytes(payload + b"\n")
            replies = await gateway.roundtrip(SENTINEL)
            await gateway.aclose()
        finally:
            await server.aclose()
    return replies, handler


def check(payload: bytes) -> list[GatewayFrame | EngineFrame]:
    replies, handler = asyncio.run(exchange(payload))
    for reply in replies:
        assert isinstance(reply, ErrorFrame | AckFrame | PongFrame), reply
    event("answered: " + (", ".join(sorted({getattr(reply, "code", reply.type) for reply in replies})) or "nothing"))
    acked = [reply.id for reply in replies if isinstance(reply, AckFrame)]
    handled = [frame.id for frame in handler.inbound] + [frame.id for frame in handler.commands]
    assert sorted(acked) == sorted(handled)  # acked exactly when handed over
    return replies


def expected_error(line: bytes) -> str | None:
    """The error code `decode_frame` gives one line, or None if it decodes."""
    try:
        decode_frame(line)
    except FrameError as exc:
        return exc.code
    return None


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
short_text = st.text(max_size=12)
frame_like = st.fixed_dictionaries(
    {"type": st.sampled_from([*FRAME_TYPES, "", "Inbound", "teleport"]) | json_values},
    optional={
        "id": short_text | json_values,
        "channel": st.sampled_from(["console", "telegram", ""]) | json_values,
        "chat_id": short_text | st.integers(),
        "text": st.text(max_size=40) | json_values,
        "command": short_text,
        "args": short_text | st.none(),
        "channels": st.lists(short_text, max_size=3) | json_values,
        "created_at": st.datetimes().map(lambda moment: moment.isoformat() + "Z") | short_text | st.integers(),
        "sender": short_text | st.none(),
        "kind": st.sampled_from(["reply", "notice", "error", "shout"]),
        "code": st.sampled_from(["internal", "nope"]),
        "message": short_text,
        "future_field": json_values,
    },
)


@FUZZ
@given(st.binary(max_size=4096))
@example(b"\xff\xfe\x00{\n}\n\r\n")
@example(b'{"type":"inbound"' + b"\xc3" + b"}")
def test_random_bytes(payload: bytes) -> None:
    check(payload)


@FUZZ
@given(json_values)
def test_random_json_values(value: Any) -> None:
    line = json.dumps(value).encode()
    replies = check(line)
    code = expected_error(line)
    assert [reply.code for reply in replies if isinstance(reply, ErrorFrame)] == ([code] if code else [])


ids = st.text(min_size=1, max_size=12)
# Frames only name channels and chat ids klaw can keep a log for (store/records.py).
channels = st.from_regex(CHANNEL_NAME, fullmatch=True).filter(lambda name: name != SUBAGENT_CHANNEL)
chat_ids = ids.filter(lambda chat_id: chat_id_problem(chat_id) is None)
valid_frames = st.one_of(
    st.builds(
        InboundFrame,
        id=ids,
        channel=channels,
        chat_id=chat_ids,
        text=st.text(max_size=40),
        created_at=st.none() | st.datetimes(timezones=st.just(UTC)),
        sender=st.none() | short_text,
    ),
    st.builds(CommandFrame, id=ids, channel=channels, chat_id=chat_ids, command=ids, args=short_text),
    st.builds(HelloFrame, channels=st.lists(ids, max_size=3)),
    st.builds(PingFrame, id=st.none() | short_text),
).map(lambda frame: frame.model_dump(mode="json"))


@st.composite
def mutated_frames(draw: st.DrawFn) -> dict[str, Any]:
    """A valid gateway frame, kept as is or with one field dropped, replaced, or one field added."""
    data: dict[str, Any] = draw(valid_frames)
    how = draw(st.sampled_from(["keep", "drop", "replace", "add"]))
    if how in ("drop", "replace"):
        key = draw(st.sampled_from(sorted(data)))
        if how == "drop":
            del data[key]
        else:
            data[key] = draw(json_values)
    elif how == "add":
        data[draw(st.text(max_size=8))] = draw(json_values)
    return data


@FUZZ
@given(mutated_frames() | frame_like)
@example({"type": "inbound", "id": "m1", "channel": "console", "chat_id": "1", "text": "hi", "x": [1]})
@example({"type": "command", "id": "c1", "channel": "console", "chat_id": "1", "command": "help"})
@example({"type": "hello", "channels": ["console"]})
def test_random_frame_like_objects(data: dict[str, Any]) -> None:
    line = json.dumps(data).encode()
    replies = check(line)
    code = expected_error(line)
    if code is not None:
        assert len(replies) == 1 and isinstance(replies[0], ErrorFrame) and replies[0].code == code
    elif data["type"] in ("inbound", "command"):
        assert replies == [AckFrame(id=data["id"])]
    elif data["type"] in ("ack", "outbound", "pong", "shutdown"):  # engine-to-gateway frames sent the wrong way
        assert len(replies) == 1 and isinstance(replies[0], ErrorFrame) and replies[0].code == "invalid_frame"
    else:  # hello and error are not answered; a ping is answered with its pong
        assert all(isinstance(reply, PongFrame) for reply in replies)


oversized = st.tuples(
    st.integers(MAX_FRAME_BYTES - 4, MAX_FRAME_BYTES + 4) | st.integers(0, 70_000),
    st.sampled_from([b"a", b" ", b"{", b"\xff"]),
    st.booleans(),
)


@FUZZ
@given(oversized)
@example((2 * MAX_FRAME_BYTES, b"a", False))
@example((2 * MAX_FRAME_BYTES, b" ", True))
@example((MAX_FRAME_BYTES, b" ", True))
@example((MAX_FRAME_BYTES + 1, b" ", True))
def test_large_lines(case: tuple[int, bytes, bool]) -> None:
    """A line of `size` bytes with its newline: filler, or a valid inbound frame padded with JSON whitespace."""
    size, filler, valid = case
    if valid:
        head = b'{"type":"inbound","id":"big","channel":"console","chat_id":"1","text":"t"'
        line = head + filler * max(0, size - len(head) - 2) + b"}"
    else:
        line = filler * max(0, size - 1)
    replies = check(line)
    if len(line) + 1 > MAX_FRAME_BYTES:
        assert [reply.code for reply in replies if isinstance(reply, ErrorFrame)] == ["frame_too_large"]
    elif valid and filler == b" ":
        assert replies == [AckFrame(id="big")]
