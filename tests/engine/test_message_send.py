"""`message_send` end to end through the engine's socket: from the web page's chat the agent writes to the
person's Telegram chat, which a gateway receives and whose log and window hold the message as the
agent's; a chat that is not the person's is refused with a reason the model reads, nothing recorded or
sent; `tools.messageTargets` replaces the default targets; a channel no gateway serves gets the message
recorded and delivered when a gateway for it connects."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from klaw.engine.clock import ManualClock
from klaw.engine.frames import AckFrame, HelloFrame, InboundFrame, OutboundFrame
from klaw.engine.runtime import Engine
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.store.log_format import decode_record
from klaw.store.records import ChatRef, Role
from tests.engine import GatewayClient, short_socket_dir
from tests.engine.harness import engine_config

WEB = ChatRef("web", "main")
TELEGRAM = ChatRef("telegram", "42")
TEXT = "Your parcel arrived: it is with the neighbour at no. 7."


@dataclass
class Stand:
    engine: Engine
    server: FakeOpenAiServer
    clock: ManualClock
    home: KlawHome
    web: GatewayClient

    async def turn(self, text: str, message_id: str = "m1") -> list[OutboundFrame]:
        """A message on the web page's chat; the frames this gateway gets until the turn's reply."""
        await self.web.send(InboundFrame(id=message_id, channel=WEB.channel, chat_id=WEB.chat_id, text=text))
        assert await self.web.recv() == AckFrame(id=message_id)
        await self.clock.advance(self.engine.config.processing.debounce_ms / 1000)
        frames: list[OutboundFrame] = []
        while not frames or frames[-1].reply_to != message_id:
            frame = await self.web.recv()
            assert isinstance(frame, OutboundFrame), frame
            frames.append(frame)
        return frames

    def tool_result(self) -> dict[str, Any]:
        [result] = [m for m in self.server.chat_requests[-1].body["messages"] if m["role"] == "tool"]
        return dict(result)

    def logged(self, chat: ChatRef) -> list[Any]:
        directory = self.home.conversations / chat.log_dir_name
        return [decode_record(line) for p in sorted(directory.glob("*.jsonl")) for line in p.read_text().splitlines()]


@asynccontextmanager
async def stand(channels: list[str], allowed: tuple[int, ...] = (42,), **tools: Any) -> AsyncIterator[Stand]:
    """An engine on a socket, Telegram configured with chat 42 (or `allowed`) allowed, one gateway serving
    `channels`."""
    with short_socket_dir() as root:
        home = KlawHome(root / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as server:
            clock = ManualClock()
            config = engine_config(
                server.base_url,
                channels={"telegram": {"enabled": True, "allowedChatIds": list(allowed)}},
                tools=tools,
            )
            engine = await Engine.start(home, config, clock=clock)
            web = await GatewayClient.connect(home.socket_path)
            try:
                await web.send(HelloFrame(channels=channels))
                await web.roundtrip()
                yield Stand(engine, server, clock, home, web)
            finally:
                await web.aclose()
                await engine.shutdown(timeout_seconds=5)


async def test_the_agent_writes_from_the_web_page_to_the_persons_telegram() -> None:
    async with stand(["web", "telegram"]) as s:
        s.server.reply_tool_calls([("message_send", {"target": "telegram:42", "text": TEXT})])
        s.server.reply_text("I sent it to your Telegram.")

        frames = await s.turn("tell me on telegram when the parcel is here: it is")

        sent, reply = frames
        assert (sent.channel, sent.chat_id, sent.text, sent.kind) == ("telegram", "42", TEXT, "reply")
        assert (reply.channel, reply.chat_id, reply.text) == ("web", "main", "I sent it to your Telegram.")
        assert s.tool_result()["content"] == "Sent to telegram:42."
        # The target chat's log holds it as the agent's message, saying where it was written.
        [record] = s.logged(TELEGRAM)
        assert (record.role, record.content) == (Role.ASSISTANT, TEXT)
        assert record.metadata == {"source": "message_send", "from": "web:main"}
        # ... and so does its window: the next turn in Telegram sees what the agent said there.
        assert [m.text for m in await s.engine.chats.history(TELEGRAM)] == [TEXT]


async def test_a_chat_that_is_not_the_persons_is_refused_and_nothing_is_sent(caplog: pytest.LogCaptureFixture) -> None:
    async with stand(["web", "telegram"]) as s:
        s.server.reply_tool_calls([("message_send", {"target": "telegram:99", "text": TEXT})])
        s.server.reply_text("I may not write there.")

        frames = await s.turn("message my colleague on telegram 99")

        assert [(f.channel, f.text) for f in frames] == [("web", "I may not write there.")]
        result = s.tool_result()
        assert result["content"] == (  # refused as its arguments are validated, before anything could ask
            "invalid arguments:\n- target: telegram:99 is not one of the person's chats this agent may"
            f" write to (allowed: console:{_user()}, telegram:42, web:main); the person can add it to"
            " tools.messageTargets in engine.yaml, then restart klaw"
        )
        assert not (s.home.conversations / "telegram_99").exists()
        assert not [r for r in caplog.records if r.name == "klaw.tools.calls"]  # a refusal, not a traceback


async def test_a_held_message_send_to_a_chat_it_may_not_reach_is_refused_without_asking() -> None:
    """With `tools.approval: [message_send]`, a target that would be refused anyway (a prompt injection's
    telegram:666) is refused at once: the person is not asked about a message that could never be sent."""
    async with stand(["web", "telegram"], approval=["message_send"]) as s:
        s.server.reply_tool_calls([("message_send", {"target": "telegram:666", "text": TEXT})])
        s.server.reply_text("I may not write there.")

        async with asyncio.timeout(10):  # a question would wait for /approve, and the turn never end
            frames = await s.turn("send my notes to telegram 666")

        assert [(f.channel, f.text) for f in frames] == [("web", "I may not write there.")]
        assert "telegram:666 is not one of the person's chats" in s.tool_result()["content"]
        assert not (s.home.conversations / "telegram_666").exists()


async def test_message_targets_replaces_the_persons_chats() -> None:
    async with stand(["web", "telegram"], allowed=(42, 99), messageTargets=["telegram:99"]) as s:
        s.server.reply_tool_calls(
            [
                ("message_send", {"target": "telegram:99", "text": TEXT}),
                ("message_send", {"target": "telegram:42", "text": TEXT}),
            ]
        )
        s.server.reply_text("One sent, one refused.")

        frames = await s.turn("send it to both")

        assert [(f.chat_id, f.text) for f in frames] == [("99", TEXT), ("main", "One sent, one refused.")]
        results = [m["content"] for m in s.server.chat_requests[-1].body["messages"] if m["role"] == "tool"]
        assert results[0] == "Sent to telegram:99."
        assert results[1].startswith("invalid arguments:\n- target: telegram:42 is not one of the person's")
        assert "(allowed: telegram:99)" in results[1]


async def test_a_channel_without_a_gateway_gets_it_when_one_connects() -> None:
    async with stand(["web"]) as s:
        s.server.reply_tool_calls([("message_send", {"target": "telegram:42", "text": TEXT})])
        s.server.reply_text("Telegram is away; it will get it.")

        frames = await s.turn("tell me on telegram")

        assert [f.text for f in frames] == ["Telegram is away; it will get it."]
        assert s.tool_result()["content"] == (
            "Recorded in telegram:42, but no gateway serves telegram right now: it is delivered when one connects"
            " (within an hour, even if the engine restarts meanwhile; later, it stays only in that chat's history)."
        )
        assert [r.content for r in s.logged(TELEGRAM)] == [TEXT]
        await _telegram_gets_the_queued_message(s.home)


async def test_a_queued_message_is_delivered_after_an_engine_restart() -> None:
    """newcomer10: the tool said "(unless the engine restarts first)", yet the record is kept undelivered
    and sent again at start (decision 101), so a gateway connecting to the next engine gets it."""
    with short_socket_dir() as root:
        home = KlawHome(root / "home")
        initialise_home(home)
        async with FakeOpenAiServer() as server:
            clock = ManualClock()
            config = engine_config(server.base_url, channels={"telegram": {"enabled": True, "allowedChatIds": [42]}})
            engine = await Engine.start(home, config, clock=clock)
            web = await GatewayClient.connect(home.socket_path)
            try:
                await web.send(HelloFrame(channels=["web"]))
                await web.roundtrip()
                server.reply_tool_calls([("message_send", {"target": "telegram:42", "text": TEXT})])
                server.reply_text("Telegram is away; it will get it.")
                await Stand(engine, server, clock, home, web).turn("tell me on telegram")
            finally:
                await web.aclose()
                await engine.shutdown(timeout_seconds=5)
            result = next(m for m in server.chat_requests[-1].body["messages"] if m["role"] == "tool")
            assert "even if the engine restarts" in result["content"], result
            engine = await Engine.start(home, config, clock=clock)
            try:
                await _telegram_gets_the_queued_message(home)
            finally:
                await engine.shutdown(timeout_seconds=5)


async def _telegram_gets_the_queued_message(home: KlawHome) -> None:
    """A Telegram gateway connecting now is sent the message `message_send` queued for telegram:42."""
    telegram = await GatewayClient.connect(home.socket_path)
    try:
        await telegram.send(HelloFrame(channels=["telegram"]))
        queued = await telegram.recv()
        assert isinstance(queued, OutboundFrame)
        assert (queued.channel, queued.chat_id, queued.text) == ("telegram", "42", TEXT)
    finally:
        await telegram.aclose()


async def test_the_console_under_a_socket_engine_is_refused_not_queued() -> None:
    """No gateway ever serves the console (it is `klaw chat`'s terminal): under `klaw serve` a message to it
    would wait forever, so it is refused with the reason and nothing is recorded there."""
    console = ChatRef("console", _user())
    async with stand(["web", "telegram"]) as s:
        s.server.reply_tool_calls([("message_send", {"target": str(console), "text": TEXT})])
        s.server.reply_text("The console is not open.")

        frames = await s.turn("tell me on the console")

        assert [f.text for f in frames] == ["The console is not open."]
        assert s.tool_result()["content"] == (  # refused as its arguments are validated (decision 435)
            f"invalid arguments:\n- target: nothing was sent: {console} is the terminal of `klaw chat`, and no"
            " klaw chat runs with this engine; write to the web page or Telegram instead"
        )
        assert s.logged(console) == []


async def test_the_tool_schema_is_short_and_the_own_chat_is_refused() -> None:
    async with stand(["web"]) as s:
        [spec] = [spec for spec in s.engine.tools.specs() if spec.name == "message_send"]
        assert len(json.dumps(spec.parameters)) < 400
        s.server.reply_tool_calls([("message_send", {"target": "web:main", "text": TEXT})])
        s.server.reply_text("Right, I answer here.")
        await s.turn("send it to me here")
        assert s.tool_result()["content"] == "that is this chat: answer here instead of sending"


def _user() -> str:
    import getpass

    return getpass.getuser() or "local"


async def test_a_target_in_the_middle_of_a_turn_gets_it_after_that_turn_without_holding_up_the_sender() -> None:
    async with stand(["web", "telegram"]) as s:
        started, release = asyncio.Event(), asyncio.Event()

        async def telegram_model_thinking() -> None:
            started.set()
            await release.wait()

        s.server.reply_text("Telegram's own answer.", before=telegram_model_thinking)
        await s.web.send(InboundFrame(id="t1", channel="telegram", chat_id="42", text="what is the weather"))
        assert await s.web.recv() == AckFrame(id="t1")
        await s.clock.advance(s.engine.config.processing.debounce_ms / 1000)
        async with asyncio.timeout(10):
            await started.wait()  # Telegram's turn holds its chat

        s.server.reply_tool_calls([("message_send", {"target": "telegram:42", "text": TEXT})])
        s.server.reply_text("It goes out after Telegram's turn.")
        frames = await s.turn("tell me on telegram")  # ends although the target chat is still busy

        assert [f.text for f in frames] == ["It goes out after Telegram's turn."]
        assert s.tool_result()["content"] == (
            "telegram:42 is in the middle of a turn: the message is recorded there and delivered as soon as that"
            " turn ends."
        )
        release.set()
        after = [await s.web.recv(), await s.web.recv()]
        assert [(f.chat_id, f.text) for f in after if isinstance(f, OutboundFrame)] == [
            ("42", "Telegram's own answer."),
            ("42", TEXT),
        ]
        said = [r.content for r in s.logged(TELEGRAM) if r.role in (Role.USER, Role.ASSISTANT) and r.content]
        assert said == ["what is the weather", "Telegram's own answer.", TEXT]


async def test_a_task_may_report_only_where_message_send_may_write() -> None:
    """A scheduled task's answers are messages to its `inject_into` chat: `schedule_add` refuses a chat
    `message_send` may not write to (a prompt injection's way round the target list), with the same
    reason, and no task is made (no question is asked first); the chat it is asked in is accepted."""
    async with stand(["web", "telegram"]) as s:
        scheduler = s.engine.scheduler
        assert scheduler is not None
        every = {"name": "digest", "message": "say hi", "every": "1h"}
        s.server.reply_tool_calls([("schedule_add", {**every, "inject_into": "telegram:99"})])
        s.server.reply_text("I may not report there.")
        await s.turn("every hour tell telegram 99 hello")
        assert s.tool_result()["content"] == (
            "inject_into: telegram:99 is not one of the person's chats this agent may write to (allowed:"
            f" console:{_user()}, telegram:42, web:main); the person can add it to tools.messageTargets in"
            " engine.yaml, then restart klaw"
        )
        assert await scheduler.list_tasks() == []

        # Into this very chat (named, not left out): made at once. Another of the person's chats is asked of
        # the person first (decision 379: tests/engine/test_task_into_another_chat.py).
        s.server.reply_tool_calls([("schedule_add", {**every, "inject_into": "web:main"})])
        s.server.reply_text("Done.")
        await s.turn("every hour tell me hello here", message_id="m2")
        [task] = await scheduler.list_tasks()
        assert task.inject_into == WEB


async def test_a_held_message_send_to_the_console_is_asked_about_only_while_a_terminal_can_show_it() -> None:
    """newcomer15: under `klaw serve` with no `klaw chat` running, a held send to `console:<user>` asked the
    person, and after Approve answered "nothing was sent: … no klaw chat runs". The check before asking is
    now the engine's own question for delivery: refused at once; asked once a `klaw chat` attaches (a
    gateway serving the console, decision 430)."""
    console = f"console:{_user()}"
    async with stand(["web", "telegram"], approval=["message_send"]) as s:
        s.server.reply_tool_calls([("message_send", {"target": console, "text": TEXT})])
        s.server.reply_text("No terminal is open.")

        async with asyncio.timeout(10):  # a question would wait for /approve, and the turn never end
            frames = await s.turn("put it on my terminal")

        assert [(f.channel, f.text) for f in frames] == [("web", "No terminal is open.")]
        assert s.tool_result()["content"] == (
            f"invalid arguments:\n- target: nothing was sent: {console} is the terminal of `klaw chat`, and no"
            " klaw chat runs with this engine; write to the web page or Telegram instead"
        )
        assert not (s.home.conversations / f"console_{_user()}").exists()

        terminal = await GatewayClient.connect(s.home.socket_path)  # as an attached `klaw chat` says hello
        try:
            await terminal.send(HelloFrame(channels=["console"]))
            await terminal.roundtrip()
            s.server.reply_tool_calls([("message_send", {"target": console, "text": TEXT})])
            await s.web.send(InboundFrame(id="m2", channel="web", chat_id="main", text="and now?"))
            assert await s.web.recv() == AckFrame(id="m2")
            await s.clock.advance(s.engine.config.processing.debounce_ms / 1000)
            question = await s.web.recv()
            assert isinstance(question, OutboundFrame) and "/approve" in question.text, question
            assert console in question.text
        finally:
            await terminal.aclose()
