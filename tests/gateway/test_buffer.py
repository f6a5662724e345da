"""The durable inbound buffer: order, acks, restarts, torn lines, compaction, privacy."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest

from klaw.engine.frames import CommandFrame, FrameError, InboundFrame
from klaw.gateway.buffer import COMPACT_AFTER_LINES, InboundBuffer


def inbound(n: int, text: str = "hello") -> InboundFrame:
    return InboundFrame(id=f"m{n}", channel="web", chat_id="main", text=f"{text} {n}")


async def test_pending_frames_survive_a_restart_in_order(tmp_path: Path) -> None:
    buffer = await InboundBuffer.open(tmp_path)
    for n in range(5):
        assert await buffer.append(inbound(n))
    await buffer.append(CommandFrame(id="c1", channel="web", chat_id="main", command="new"))
    assert await buffer.ack("m1")
    assert await buffer.ack("m3")

    reopened = await InboundBuffer.open(tmp_path)
    assert [frame.id for frame in reopened.pending()] == ["m0", "m2", "m4", "c1"]
    assert reopened.first() == inbound(0)
    assert isinstance(reopened.pending()[-1], CommandFrame)


async def test_an_id_is_buffered_once_and_acked_once(tmp_path: Path) -> None:
    buffer = await InboundBuffer.open(tmp_path)
    assert await buffer.append(inbound(1))
    assert not await buffer.append(inbound(1))
    assert len(buffer) == 1
    assert await buffer.ack("m1")
    assert not await buffer.ack("m1")
    assert not await buffer.ack("never-sent")
    assert len(buffer) == 0


async def test_the_file_is_emptied_when_nothing_is_pending(tmp_path: Path) -> None:
    buffer = await InboundBuffer.open(tmp_path)
    for n in range(3):
        await buffer.append(inbound(n))
    for n in range(3):
        await buffer.ack(f"m{n}")
    assert buffer.path.read_bytes() == b""


async def test_a_long_backlog_is_compacted_while_it_drains(tmp_path: Path) -> None:
    buffer = await InboundBuffer.open(tmp_path)
    total = COMPACT_AFTER_LINES + 50
    for n in range(total):
        await buffer.append(inbound(n))
    for n in range(total - 10):
        await buffer.ack(f"m{n}")
    lines = buffer.path.read_bytes().splitlines()
    assert len(lines) < COMPACT_AFTER_LINES + 10 + 1
    assert [frame.id for frame in (await InboundBuffer.open(tmp_path)).pending()] == [
        f"m{n}" for n in range(total - 10, total)
    ]


async def test_a_torn_last_line_is_skipped_without_quoting_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    buffer = await InboundBuffer.open(tmp_path)
    await buffer.append(inbound(1, "private words"))
    with buffer.path.open("ab") as file:
        file.write(b'{"type":"inbound","id":"m2","channel":"web","chat_id":"main","text":"secret tor')
    caplog.set_level(logging.WARNING)
    reopened = await InboundBuffer.open(tmp_path)
    assert [frame.id for frame in reopened.pending()] == ["m1"]
    assert "inbound.jsonl:2" in caplog.text
    assert "secret" not in caplog.text


async def test_buffer_files_are_private(tmp_path: Path) -> None:
    buffer = await InboundBuffer.open(tmp_path / "gateway")
    await buffer.append(inbound(1))
    assert stat.S_IMODE(buffer.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(buffer.path.parent.stat().st_mode) == 0o700


async def test_a_frame_the_engine_could_never_take_is_refused_up_front(tmp_path: Path) -> None:
    buffer = await InboundBuffer.open(tmp_path)
    with pytest.raises(FrameError):
        await buffer.append(InboundFrame(id="big", channel="web", chat_id="main", text="x" * (2 << 20)))
    assert len(buffer) == 0
