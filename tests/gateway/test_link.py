"""The engine link: backoff on the injected clock, replay in order, lost acks, refusals, queries, routing.

Tests wait for what the code signals (the buffer's changes, `connected`, a delivery, a sleep on the
clock) and end each backoff by moving the manual clock exactly its length; nothing polls."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from klaw.engine.clock import ManualClock
from klaw.engine.frame_dispatch import QueryError
from klaw.engine.frames import DeltaFrame, InboundFrame, OutboundFrame, QueryFrame
from klaw.engine.socket_server import EngineSocketServer
from klaw.gateway.buffer import InboundBuffer
from klaw.gateway.link import Backoff, EngineLink, EngineUnavailable, QueryFailed
from tests.engine import RecordingHandler, short_socket_dir
from tests.gateway.fake_engine import Decision, FakeEngine


class RecordingClock(ManualClock):
    """Records each sleep's length and signals it, so a test sees the link start a backoff and ends it."""

    def __init__(self) -> None:
        super().__init__()
        self.sleeps: list[float] = []
        self.slept = asyncio.Event()  # set when a sleep starts; cleared by whoever ends it

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.slept.set()
        await super().sleep(seconds)

    async def end_sleep(self) -> None:
        """Wait for the next sleep to start (10 s safety net), then move time to its end."""
        async with asyncio.timeout(10):
            await self.slept.wait()
        self.slept.clear()
        await self.advance(self.sleeps[-1])


@dataclass
class Channel:
    """The channel the link delivers to: keeps the frames and signals each one."""

    frames: list[OutboundFrame | DeltaFrame] = field(default_factory=list)
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def deliver(self, frame: OutboundFrame | DeltaFrame) -> None:
        self.frames.append(frame)
        async with self._changed:
            self._changed.notify_all()

    async def received(self, count: int) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: len(self.frames) >= count)


def frame(n: int) -> InboundFrame:
    return InboundFrame(id=f"m{n}", channel="web", chat_id="main", text=f"message {n}")


@asynccontextmanager
async def link_on(
    directory: Path, clock: ManualClock, channel: Channel | None = None
) -> AsyncIterator[tuple[EngineLink, InboundBuffer]]:
    buffer = await InboundBuffer.open(directory / "gateway")
    deliver = (channel or Channel()).deliver
    link = EngineLink(directory / "engine.sock", buffer, deliver, clock, channels=["web"], streaming=["web"])
    task = asyncio.create_task(link.run())
    try:
        yield link, buffer
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def until(signalled: Awaitable[object], clock: RecordingClock | None = None) -> None:
    """Await `signalled` (10 s safety net). With `clock`, every backoff the link starts meanwhile
    (a reconnect, a retry) is ended by moving the clock exactly its length."""
    done = asyncio.ensure_future(signalled)
    try:
        async with asyncio.timeout(10):
            while clock is not None and not done.done():
                slept = asyncio.ensure_future(clock.slept.wait())
                await asyncio.wait({done, slept}, return_when=asyncio.FIRST_COMPLETED)
                slept.cancel()
                if clock.slept.is_set():
                    clock.slept.clear()
                    await clock.advance(clock.sleeps[-1])
            await done
    finally:
        done.cancel()


def drained(buffer: InboundBuffer) -> Awaitable[None]:
    """Signalled once the engine has acknowledged (or the link given up) every buffered frame."""
    return buffer.wait_for(lambda: len(buffer) == 0)


def test_backoff_doubles_up_to_the_maximum_and_resets() -> None:
    backoff = Backoff(initial=0.2, factor=2, maximum=1.0)
    assert [backoff.next() for _ in range(5)] == [0.2, 0.4, 0.8, 1.0, 1.0]
    backoff.reset()
    assert backoff.next() == 0.2


async def test_reconnects_with_backoff_then_replays_the_buffer_in_order() -> None:
    clock = RecordingClock()
    with short_socket_dir() as directory:
        async with link_on(directory, clock) as (link, buffer):
            for n in range(5):
                await buffer.append(frame(n))
            link.kick()
            for _ in range(4):  # the engine is down: each attempt fails and waits longer
                await clock.end_sleep()
            assert clock.sleeps[:4] == [0.2, 0.4, 0.8, 1.6]
            engine = FakeEngine(directory / "engine.sock")
            await engine.start()
            try:
                await until(drained(buffer), clock)
                assert engine.ids() == [f"m{n}" for n in range(5)]
                assert engine.hellos[0].channels == ["web"] and engine.hellos[0].streaming == ["web"]
                await buffer.append(frame(5))  # live traffic after the backlog
                link.kick()
                await until(drained(buffer))
                assert engine.ids()[-1] == "m5"
            finally:
                await engine.stop()


async def test_a_frame_whose_ack_was_lost_is_resent_with_the_same_id_before_later_ones() -> None:
    def policy(frame: Any, seen: int) -> Decision:
        return "hang_up" if frame.id == "m2" and seen == 1 else "ack"  # stored, but the ack never left

    clock = RecordingClock()
    with short_socket_dir() as directory:
        engine = FakeEngine(directory / "engine.sock", policy)
        await engine.start()
        try:
            async with link_on(directory, clock) as (link, buffer):
                for n in range(1, 5):
                    await buffer.append(frame(n))
                link.kick()
                await until(drained(buffer), clock)
            assert engine.ids() == ["m1", "m2", "m2", "m3", "m4"]
            assert engine.connections == 2
        finally:
            await engine.stop()


async def test_a_refused_frame_is_retried_then_given_up_with_a_message_to_its_chat() -> None:
    def policy(frame: Any, seen: int) -> Decision:
        if frame.id == "m1":
            return "internal" if seen < 3 else "ack"  # e.g. the engine was shutting down
        return "invalid" if frame.id == "m2" else "ack"

    clock = RecordingClock()
    channel = Channel()
    with short_socket_dir() as directory:
        engine = FakeEngine(directory / "engine.sock", policy)
        await engine.start()
        try:
            async with link_on(directory, clock, channel) as (link, buffer):
                for n in range(1, 4):
                    await buffer.append(frame(n))
                link.kick()
                await until(drained(buffer), clock)
            assert engine.ids() == ["m1", "m1", "m1", "m2", "m3"]
            assert clock.sleeps == [0.2, 0.4]  # m1's two refusals, retried after a backoff
            [notice] = channel.frames
            assert isinstance(notice, OutboundFrame) and notice.kind == "error" and notice.reply_to == "m2"
        finally:
            await engine.stop()


async def test_queries_answers_errors_and_an_absent_engine() -> None:
    async def answer(query: QueryFrame) -> Any:
        if query.query == "boom":
            raise QueryError("no such thing")
        return {"echo": query.params}

    clock = RecordingClock()
    with short_socket_dir() as directory:
        async with link_on(directory, clock) as (link, _):
            with pytest.raises(EngineUnavailable):
                await link.query("chats", {})
            server = EngineSocketServer(directory / "engine.sock", RecordingHandler(), queries=answer)
            await server.start()
            try:
                await until(link.connected.wait(), clock)
                assert await link.query("chats", {"a": 1}) == {"echo": {"a": 1}}
                with pytest.raises(QueryFailed, match="no such thing"):
                    await link.query("boom", {})
            finally:
                await server.aclose()
            await until(clock.slept.wait())  # the link backs off once it has seen the engine go
            assert not link.connected.is_set()
            with pytest.raises(EngineUnavailable):
                await link.query("chats", {})


async def test_outbound_and_delta_frames_reach_the_channel() -> None:
    clock = RecordingClock()
    channel = Channel()
    with short_socket_dir() as directory:
        server = EngineSocketServer(directory / "engine.sock", RecordingHandler())
        await server.send_outbound(OutboundFrame(channel="web", chat_id="main", text="queued while away"))
        await server.start()
        try:
            async with link_on(directory, clock, channel):
                await until(channel.received(1), clock)
                assert server.wants_delta("web") and not server.wants_delta("telegram")
                assert await server.send_delta(DeltaFrame(channel="web", chat_id="main", text="pie", reply_to="m1"))
                await until(channel.received(2))
                assert [f.type for f in channel.frames] == ["outbound", "delta"]
        finally:
            await server.aclose()
