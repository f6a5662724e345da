"""Turns of one chat never overlap; a chat follows routing.default until /model picks another."""

from __future__ import annotations

import asyncio
from pathlib import Path

from klaw.engine.clock import settle
from tests.engine.harness import CHAT, running_engine


async def test_a_message_arriving_mid_turn_waits_for_that_turn(tmp_path: Path) -> None:
    release, started = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        started.set()  # the first turn's request reached the model
        await release.wait()

    async with running_engine(tmp_path) as h:
        h.server.reply_text("first answer", before=hold)
        await h.say("first")
        await h.clock.advance(1.5)
        async with asyncio.timeout(10):
            await started.wait()
        await h.say("second")
        await h.clock.advance(1.5)
        await settle()
        assert len(h.server.chat_requests) == 1  # the second turn has not started
        release.set()
        await h.wait_for_replies(2)
        assert [o.text for o in h.delivered] == ["first answer", "echo: second"]
        assert h.last_request_messages()[-3:] == [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "first answer"},
            {"role": "user", "content": "second"},
        ]


async def test_chat_follows_routing_default_until_model_is_chosen(tmp_path: Path) -> None:
    async with running_engine(tmp_path) as h:
        await h.turn("hi")
    async with running_engine(tmp_path, routing={"default": "fake/large"}) as h:
        reply = await h.engine.submit(CHAT, "/model")
        assert reply.command_reply == "Current model: fake/large"
        await h.engine.submit(CHAT, "/model fake/small")  # now the chat has chosen
    async with running_engine(tmp_path, routing={"default": "fake/large"}) as h:
        reply = await h.engine.submit(CHAT, "/model")
        assert reply.command_reply == "Current model: fake/small"
        await h.turn("hello again")
        assert h.server.chat_requests[-1].body["model"] == "small"
