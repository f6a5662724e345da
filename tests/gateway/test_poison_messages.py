"""One message that can never be accepted is given up at once, with its reason, and holds up no other chat.

The gateway sends one frame at a time; a refusal it retries stops every chat behind it. The link
runs on a manual clock that the tests never move: a retry would wait forever, so each test fails
(by its timeout) if the gateway retries input that a retry cannot fix.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest

from klaw.engine.clock import ManualClock
from klaw.engine.frames import DeltaFrame, FrameError, OutboundFrame
from klaw.engine.runtime import Engine
from klaw.engine.socket_server import EngineSocketServer
from klaw.gateway.service import Gateway
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from tests.engine import RecordingHandler, short_socket_dir
from tests.engine.harness import engine_config

WAIT = 10.0  # a safety net: every wait is on something the gateway signals


@dataclass
class WebLikeChannel:
    """A channel named `web` that keeps what the gateway delivers and signals each frame."""

    frames: list[OutboundFrame] = field(default_factory=list)
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    name: str = "web"
    streaming: bool = False

    async def start(self, gateway: Gateway) -> None: ...

    async def stop(self) -> None: ...

    async def deliver(self, frame: OutboundFrame) -> None:
        async with self.changed:
            self.frames.append(frame)
            self.changed.notify_all()

    async def delta(self, frame: DeltaFrame) -> None: ...

    async def frame_for(self, chat_id: str, kind: str) -> OutboundFrame:
        async with asyncio.timeout(WAIT), self.changed:
            await self.changed.wait_for(lambda: any(f.chat_id == chat_id and f.kind == kind for f in self.frames))
        return next(f for f in self.frames if f.chat_id == chat_id and f.kind == kind)


@asynccontextmanager
async def gateway_on(home: KlawHome) -> AsyncIterator[tuple[Gateway, WebLikeChannel]]:
    channel = WebLikeChannel()
    gateway = Gateway(home, [channel], clock=ManualClock())  # never advanced: no retry can end
    await gateway.start()
    try:
        async with asyncio.timeout(WAIT):
            await gateway.link.connected.wait()
        yield gateway, channel
    finally:
        await gateway.stop()


async def test_a_poison_command_is_answered_and_the_next_chat_gets_its_reply() -> None:
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as server:
            engine = await Engine.start(home, engine_config(server.base_url, processing={"debounceMs": 0}))
            try:
                async with gateway_on(home) as (gateway, channel):
                    await gateway.submit("web", "alice", "/forget exchange 99999999999999999999")
                    await gateway.submit("web", "bob", "hello")
                    reply = await channel.frame_for("bob", "reply")
                    notice = await channel.frame_for("alice", "notice")
                assert reply.text.startswith("echo: ") and "hello" in reply.text
                assert "usage: /forget" in notice.text
            finally:
                await engine.shutdown(timeout_seconds=5)


async def test_a_frame_the_engine_refuses_for_good_is_dropped_at_once_with_the_reason() -> None:
    handler = RecordingHandler()
    handler.poison_ids = {"bad"}
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        engine = EngineSocketServer(home.socket_path, handler)
        home.root.mkdir()
        await engine.start()
        try:
            async with gateway_on(home) as (gateway, channel):
                await gateway.submit("web", "alice", "a message the engine chokes on", message_id="bad")
                await gateway.submit("web", "bob", "fine", message_id="good")
                async with asyncio.timeout(WAIT):
                    await gateway.buffer.wait_for(lambda: len(gateway.buffer) == 0)
                error = await channel.frame_for("alice", "error")
            assert [frame.id for frame in handler.inbound] == ["good"]
            assert error.reply_to == "bad" and "did not accept this message" in error.text
            assert "OverflowError" in error.text and "chokes" not in error.text
        finally:
            await engine.aclose()


@pytest.mark.parametrize(
    ("chat_id", "text", "reason"),
    [("main", "private \ud800 words", "surrogate"), ("x" * 300, "private words", "chat id has 300 characters")],
)
async def test_input_no_engine_could_take_is_refused_before_it_is_buffered(
    chat_id: str, text: str, reason: str
) -> None:
    with short_socket_dir() as directory:
        home = KlawHome(directory / "home")
        home.root.mkdir()
        gateway = Gateway(home, [WebLikeChannel()], clock=ManualClock())
        await gateway.start()
        try:
            with pytest.raises(FrameError, match=reason) as raised:
                await gateway.submit("web", chat_id, text)
            assert raised.value.code == "invalid_frame" and "private" not in raised.value.message
            assert len(gateway.buffer) == 0
        finally:
            await gateway.stop()
