"""The wire format: encoding, decoding, and content-free error messages."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from klaw.engine.frames import (
    MAX_FRAME_BYTES,
    AckFrame,
    CommandFrame,
    ErrorFrame,
    FrameError,
    FrameReader,
    HelloFrame,
    InboundFrame,
    OutboundFrame,
    PingFrame,
    PongFrame,
    ShutdownFrame,
    decode_frame,
    encode_frame,
)

SECRET = "my bank PIN is 4711"

ALL_FRAMES = [
    HelloFrame(channels=["console", "telegram"]),
    InboundFrame(
        id="m1",
        channel="telegram",
        chat_id="42",
        text=f"héllo\n{SECRET} 🎉",
        created_at=datetime(2024, 5, 1, 12, 30, tzinfo=UTC),
        sender="ana",
    ),
    InboundFrame(id="m2", channel="console", chat_id="me", text=""),
    CommandFrame(id="c1", channel="console", chat_id="me", command="new", args="fresh start"),
    PingFrame(id="p1"),
    PingFrame(),
    AckFrame(id="m1"),
    OutboundFrame(channel="console", chat_id="me", text="hi\n", reply_to="m1", kind="notice"),
    PongFrame(id="p1"),
    ShutdownFrame(reason="upgrade"),
    ErrorFrame(code="invalid_frame", message="field 'id': Field required", ref="x"),
]


def line(data: Any) -> bytes:
    return json.dumps(data).encode() + b"\n"


def decode_error(raw: bytes) -> FrameError:
    with pytest.raises(FrameError) as caught:
        decode_frame(raw)
    return caught.value


@pytest.mark.parametrize("frame", ALL_FRAMES, ids=lambda f: f.type)
def test_every_frame_round_trips_as_one_compact_line(frame: Any) -> None:
    encoded = encode_frame(frame)
    assert encoded.endswith(b"\n") and encoded.count(b"\n") == 1
    assert b'", "' not in encoded and b'": ' not in encoded  # compact separators
    assert decode_frame(encoded) == frame
    assert decode_frame(encoded.rstrip(b"\n")) == frame


def test_text_is_utf8_not_escaped() -> None:
    encoded = encode_frame(OutboundFrame(channel="c", chat_id="1", text="é🎉"))
    assert "é🎉".encode() in encoded


def test_defaults_apply_when_optional_fields_are_absent() -> None:
    frame = decode_frame(line({"type": "outbound", "channel": "c", "chat_id": "1", "text": "t"}))
    assert frame == OutboundFrame(channel="c", chat_id="1", text="t", reply_to=None, kind="reply")
    command = decode_frame(line({"type": "command", "id": "c", "channel": "c", "chat_id": "1", "command": "help"}))
    assert isinstance(command, CommandFrame) and command.args == ""


def test_unknown_extra_fields_are_ignored() -> None:
    frame = decode_frame(line({"type": "ping", "id": "p", "future_field": {"nested": [1, 2]}}))
    assert frame == PingFrame(id="p")


def test_created_at_is_parsed_and_must_carry_a_zone() -> None:
    base = {"type": "inbound", "id": "m", "channel": "c", "chat_id": "1", "text": SECRET}
    frame = decode_frame(line({**base, "created_at": "2024-05-01T12:30:00+02:00"}))
    assert isinstance(frame, InboundFrame) and frame.created_at == datetime(2024, 5, 1, 10, 30, tzinfo=UTC)
    error = decode_error(line({**base, "created_at": "2024-05-01T12:30:00"}))
    assert error.code == "invalid_frame" and "created_at" in error.message and error.ref == "m"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"type": "inbound", "channel": "c", "chat_id": "1", "text": SECRET}, "id"),
        ({"type": "inbound", "id": "m", "channel": "c", "chat_id": 7, "text": SECRET}, "chat_id"),
        ({"type": "inbound", "id": "m", "channel": "", "chat_id": "1", "text": SECRET}, "channel"),
        ({"type": "inbound", "id": "m", "channel": "c", "chat_id": "1", "text": [SECRET]}, "text"),
        ({"type": "command", "id": "m", "channel": "c", "chat_id": "1", "args": SECRET}, "command"),
        ({"type": "hello", "channels": "console"}, "channels"),
        ({"type": "hello", "channels": ["console", 3]}, "channels.1"),
        ({"type": "outbound", "channel": "c", "chat_id": "1", "text": SECRET, "kind": "shout"}, "kind"),
        ({"type": "error", "code": "oops", "message": SECRET}, "code"),
    ],
)
def test_an_invalid_frame_names_the_field_without_echoing_content(data: dict[str, Any], field: str) -> None:
    error = decode_error(line(data))
    assert error.code == "invalid_frame"
    assert f"field '{field}'" in error.message
    assert SECRET not in error.message and SECRET not in str(error)
    assert error.ref == data.get("id")


def test_several_problems_are_summarised() -> None:
    error = decode_error(line({"type": "inbound"}))
    assert "field 'id'" in error.message and "field 'chat_id'" in error.message and "(and 1 more)" in error.message


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b"not json\n", "malformed_json"),
        (b'{"type": "ping"\n', "malformed_json"),
        (b"\n", "malformed_json"),
        (b'{"type":"inbound","text":"\xff\xfe"}\n', "malformed_json"),
        (b'{"type":"ping","id":NaN}\n', "malformed_json"),
        (b"[" * 100_000 + b"]" * 100_000 + b"\n", "malformed_json"),
        (b"[1, 2]\n", "invalid_frame"),
        (b'"ping"\n', "invalid_frame"),
        (b'{"id": "x"}\n', "invalid_frame"),
        (b'{"type": 3}\n', "invalid_frame"),
        (b'{"type": "teleport", "id": "x"}\n', "unknown_type"),
    ],
)
def test_undecodable_lines_get_their_error_code(raw: bytes, code: str) -> None:
    assert decode_error(raw).code == code


def test_unknown_type_is_named_and_ref_is_the_frame_id() -> None:
    error = decode_error(line({"type": "teleport", "id": "x"}))
    assert "'teleport'" in error.message and error.ref == "x"
    long_type = decode_error(line({"type": SECRET * 5}))
    assert SECRET not in long_type.message


def test_ref_is_left_out_when_the_id_is_not_a_short_string() -> None:
    assert decode_error(line({"type": "inbound", "id": 5})).ref is None
    assert decode_error(line({"type": "inbound", "id": "x" * 1000})).ref is None


def test_frame_error_converts_to_an_error_frame() -> None:
    error = decode_error(line({"type": "teleport", "id": "x"}))
    assert error.to_frame() == ErrorFrame(code="unknown_type", message=error.message, ref="x")


def test_size_limits_count_the_newline() -> None:
    frame = PingFrame(id="")
    overhead = len(encode_frame(frame))
    exact = PingFrame(id="x" * (MAX_FRAME_BYTES - overhead))
    assert len(encode_frame(exact)) == MAX_FRAME_BYTES
    assert decode_frame(encode_frame(exact)) == exact
    too_big = PingFrame(id="x" * (MAX_FRAME_BYTES - overhead + 1))
    with pytest.raises(FrameError) as caught:
        encode_frame(too_big)
    assert caught.value.code == "frame_too_large"
    assert decode_error(b"x" * MAX_FRAME_BYTES + b"\n").code == "frame_too_large"


async def read_all(data: bytes, max_bytes: int, *, eof: bool = True) -> list[bytes | int]:
    reader = asyncio.StreamReader()
    reader.feed_data(data)
    if eof:
        reader.feed_eof()
    frames = FrameReader(reader, max_bytes)
    out: list[bytes | int] = []
    while (item := await frames.next()) is not None:
        out.append(item)
    return out


async def test_frame_reader_splits_lines_and_skips_oversized_ones() -> None:
    data = b"ab\n" + b"x" * 50 + b"\ncd\n" + b"y" * 9 + b"\n" + b"z" * 30
    # The size is what was seen of the line: all of it when it arrived at once, and the torn tail at the end.
    assert await read_all(data, max_bytes=10) == [b"ab\n", 51, b"cd\n", b"y" * 9 + b"\n", 30]


async def test_frame_reader_reports_an_oversized_line_once_across_many_chunks() -> None:
    data = b"x" * (3 * MAX_FRAME_BYTES) + b"\nok\n"
    assert await read_all(data, max_bytes=MAX_FRAME_BYTES) == [MAX_FRAME_BYTES, b"ok\n"]


async def test_frame_reader_tells_a_torn_last_frame() -> None:
    reader = asyncio.StreamReader()
    reader.feed_data(b'{"type":"ping"}\n{"type":')
    reader.feed_eof()
    frames = FrameReader(reader)
    assert await frames.next() == b'{"type":"ping"}\n'
    assert await frames.next() is None
    assert frames.mid_frame
