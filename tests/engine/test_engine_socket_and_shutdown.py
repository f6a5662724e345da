"""The engine behind its real Unix socket, and graceful shutdown with a turn in flight."""

from __future__ import annotations

import asyncio
import json
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from klaw.engine.clock import ManualClock, settle
from klaw.engine.runtime import Engine
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.store.records import MessageType
from tests.engine.harness import CHAT, engine_config, running_engine


@pytest.fixture
def short_home() -> Iterator[KlawHome]:
    """AF_UNIX paths are limited to ~107 bytes, so the socket lives under a short /tmp path."""
    root = Path(tempfile.mkdtemp(prefix="klaw-", dir="/tmp"))
    try:
        home = KlawHome(root)
        initialise_home(home)
        yield home
    finally:
        shutil.rmtree(root, ignore_errors=True)


async def read_frame(reader: asyncio.StreamReader) -> dict[str, Any]:
    async with asyncio.timeout(10):
        line = await reader.readline()
    frame = json.loads(line)
    assert isinstance(frame, dict)
    return frame


async def send(writer: asyncio.StreamWriter, frame: dict[str, Any]) -> None:
    writer.write(json.dumps(frame).encode() + b"\n")
    await writer.drain()


async def test_a_gateway_gets_acks_replies_and_notices_over_the_socket(short_home: KlawHome) -> None:
    async with FakeOpenAiServer() as server:
        clock = ManualClock()
        engine = await Engine.start(short_home, engine_config(server.base_url), clock=clock)
        try:
            assert stat.S_IMODE(short_home.socket_path.stat().st_mode) == 0o600
            reader, writer = await asyncio.open_unix_connection(str(short_home.socket_path))
            await send(writer, {"type": "hello", "channels": ["web"]})
            await send(writer, {"type": "inbound", "id": "m-1", "channel": "web", "chat_id": "u1", "text": "hi"})
            assert await read_frame(reader) == {"type": "ack", "id": "m-1"}
            await clock.advance(1.5)
            reply = await read_frame(reader)
            assert (reply["type"], reply["chat_id"], reply["text"], reply["reply_to"]) == (
                "outbound",
                "u1",
                "echo: hi",
                "m-1",
            )
            await send(writer, {"type": "command", "id": "c-1", "channel": "web", "chat_id": "u1", "command": "model"})
            frames = [await read_frame(reader), await read_frame(reader)]
            kinds = sorted((f["type"], f.get("kind")) for f in frames)
            assert kinds == [("ack", None), ("outbound", "notice")]
            notice = next(f for f in frames if f["type"] == "outbound")
            assert notice["text"] == "Current model: fake/small"
            # A replayed inbound (gateway reconnect) is acknowledged but not answered twice.
            await send(writer, {"type": "inbound", "id": "m-1", "channel": "web", "chat_id": "u1", "text": "hi"})
            assert await read_frame(reader) == {"type": "ack", "id": "m-1"}
            await clock.advance(5)
            assert len(server.chat_requests) == 1
            await engine.shutdown(timeout_seconds=5)
            assert (await read_frame(reader))["type"] == "shutdown"
            assert not short_home.socket_path.exists()
            writer.close()
        finally:
            if short_home.socket_path.exists():
                await engine.shutdown(timeout_seconds=1)


async def test_shutdown_lets_a_turn_in_flight_finish(tmp_path: Path) -> None:
    arrived, release = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        arrived.set()
        await release.wait()

    async with running_engine(tmp_path) as h:
        h.server.reply_text("finished politely", before=hold)
        await h.say("slow question")
        await h.clock.advance(1.5)
        async with asyncio.timeout(10):
            await arrived.wait()  # the model call is in flight (its context built first, without a slot)
        assert h.engine.processor.slots.in_use == 1
        shutdown = asyncio.create_task(h.engine.shutdown(timeout_seconds=30))
        await settle()
        assert not shutdown.done()
        with pytest.raises(RuntimeError, match="shutting down"):
            await h.engine.submit(CHAT, "too late")
        release.set()
        await shutdown
        assert [o.text for o in h.delivered] == ["finished politely"]


async def test_shutdown_answers_messages_still_in_debounce(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        await h.say("said just before the stop")
        await h.engine.shutdown(timeout_seconds=30)
        assert [o.text for o in h.delivered] == ["echo: said just before the stop"]


async def test_replies_made_while_draining_reach_the_gateway_before_the_shutdown_frame(short_home: KlawHome) -> None:
    """A gateway may hang up on `shutdown` at once, so a reply the drain produces must come first."""
    started, release = asyncio.Event(), asyncio.Event()

    async def slow_model() -> None:
        started.set()
        await release.wait()

    async with FakeOpenAiServer() as server:
        server.reply_text("answered during the drain", before=slow_model)
        clock = ManualClock()
        engine = await Engine.start(short_home, engine_config(server.base_url), clock=clock)
        try:
            reader, writer = await asyncio.open_unix_connection(str(short_home.socket_path))
            await send(writer, {"type": "hello", "channels": ["web"]})
            await send(writer, {"type": "inbound", "id": "m-1", "channel": "web", "chat_id": "u1", "text": "slow"})
            assert await read_frame(reader) == {"type": "ack", "id": "m-1"}
            await clock.advance(1.5)
            async with asyncio.timeout(10):
                await started.wait()  # the model has the request and holds its answer
            shutdown = asyncio.create_task(engine.shutdown(timeout_seconds=30))
            assert engine.socket is not None
            async with asyncio.timeout(10):
                await engine.socket.wait_stopped_accepting()  # shutdown has begun…
            with pytest.raises(ConnectionRefusedError):  # …and no new gateway gets in
                await asyncio.open_unix_connection(str(short_home.socket_path))
            await settle()  # the old order sent `shutdown` right after this point
            assert not shutdown.done()
            await send(writer, {"type": "inbound", "id": "m-2", "channel": "web", "chat_id": "u1", "text": "late"})
            refused = await read_frame(reader)
            assert (refused["type"], refused["ref"]) == ("error", "m-2")  # not stored: the gateway resends later
            release.set()
            reply = await read_frame(reader)
            assert (reply["type"], reply["text"], reply["reply_to"]) == ("outbound", "answered during the drain", "m-1")
            assert (await read_frame(reader))["type"] == "shutdown"
            await shutdown
            writer.close()
        finally:
            release.set()
            if short_home.socket_path.exists():
                await engine.shutdown(timeout_seconds=1)


async def test_slash_text_in_an_inbound_frame_is_a_command_answered_with_a_notice(short_home: KlawHome) -> None:
    """A gateway forwarding raw text gets commands too, answered at once and never sent to the model."""
    async with FakeOpenAiServer() as server:
        clock = ManualClock()
        engine = await Engine.start(short_home, engine_config(server.base_url), clock=clock)
        try:
            reader, writer = await asyncio.open_unix_connection(str(short_home.socket_path))
            await send(writer, {"type": "hello", "channels": ["web"]})
            inbound = {"type": "inbound", "id": "s-1", "channel": "web", "chat_id": "u1", "text": " /model  fake/large"}
            await send(writer, inbound)
            frames = [await read_frame(reader), await read_frame(reader)]
            notice = next(f for f in frames if f["type"] == "outbound")
            assert {"type": "ack", "id": "s-1"} in frames
            assert (notice["kind"], notice["reply_to"], notice["chat_id"]) == ("notice", "s-1", "u1")
            assert notice["text"] == "Switched this chat to fake/large."
            await send(writer, {"type": "inbound", "id": "s-2", "channel": "web", "chat_id": "u1", "text": "/status"})
            frames = [await read_frame(reader), await read_frame(reader)]
            status = next(f for f in frames if f["type"] == "outbound")
            assert status["reply_to"] == "s-2" and "Model: fake/large" in status["text"]
            await clock.advance(5)
            assert server.chat_requests == []  # commands never reach the model
            # a control record is storage's, not history a person reads: looked up in the store by id
            stored = await engine.store.messages.get("s-1")  # the switch is kept under the frame's id…
            assert stored is not None and stored.record.type is MessageType.MODEL_SWITCH  # …not as text said
            assert await engine.store.messages.get("s-2") is None  # read-only commands store nothing
            writer.close()
        finally:
            await engine.shutdown(timeout_seconds=5)
