"""A full disk that lasts: the gateway keeps each message and sends it again until the engine takes it.

adversary28: a home on a 40 MB tmpfs filled with dd for over a minute; three messages sent meanwhile were
given up by the gateway after 8 refusals ("look at the chat before sending it again"), though the log held
them and the chat did not show them; they were answered only after a restart, late and out of order. A
disk-full refusal is now its own code, retried for as long as it lasts (freeing space is the fix), and
the person is told once that the disk is full. A real engine, SQLite capped at its size (a full disk to
it, as tests/engine/test_full_disk.py does), and the gateway's real link and buffer."""

from __future__ import annotations

import asyncio
import logging

import pytest

from klaw.engine.clock import ManualClock
from klaw.engine.frames import InboundFrame, OutboundFrame
from klaw.engine.runtime import Engine
from klaw.gateway.buffer import InboundBuffer
from klaw.gateway.link import MAX_ATTEMPTS, EngineLink
from tests.engine.test_full_disk import LONG_TEXT, cap_database
from tests.engine.test_full_disk import engine as engine  # the fixture
from tests.gateway.test_link import Channel, RecordingClock, drained, until


async def test_messages_refused_by_a_full_disk_wait_in_the_gateway_until_there_is_room(
    engine: tuple[Engine, ManualClock],
    caplog: pytest.LogCaptureFixture,
) -> None:
    klaw, _ = engine
    caplog.set_level(logging.WARNING)
    clock, channel = RecordingClock(), Channel()
    buffer = await InboundBuffer.open(klaw.home.root / "gateway")
    link = EngineLink(klaw.home.socket_path, buffer, channel.deliver, clock, channels=["web"])
    running = asyncio.create_task(link.run())
    try:
        await until(link.connected.wait(), clock)
        await cap_database(klaw, 0)
        texts = [f"{n} {LONG_TEXT[: len(LONG_TEXT) // 4]}" for n in range(3)]
        for n, text in enumerate(texts):
            await buffer.append(InboundFrame(id=f"full{n}", channel="web", chat_id="main", text=text))
        link.kick()
        for _ in range(MAX_ATTEMPTS + 2):  # past the attempts a passing fault gets
            await clock.end_sleep()
        assert len(buffer) == 3  # none given up
        [told] = channel.frames  # once, whatever the attempts
        assert isinstance(told, OutboundFrame) and told.reply_to == "full0"
        assert "no space left" in told.text and "look at the chat" not in told.text
        assert LONG_TEXT[:20] not in told.text
        await cap_database(klaw, None)  # space is back
        await until(drained(buffer), clock)
        stored = [await klaw.store.messages.get(f"full{n}") for n in range(3)]
        assert [m.record.content if m else None for m in stored] == texts
        assert [m.rowid for m in stored if m] == sorted(m.rowid for m in stored if m)  # in the order sent
        refusals = [r.getMessage() for r in caplog.records if r.name == "klaw.engine.frame_dispatch"]
        assert refusals and all("no space left" in line and "FullError" not in line for line in refusals)
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
