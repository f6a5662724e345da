"""An LLM slot (`processing.maxConcurrentLlm`) is held by a turn's model calls, not by the rest of its turn:
a chat whose reply is still being written or shown does not keep the model from another chat (decision 253)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from klaw.engine.delivery import Outbound
from klaw.store.records import ChatRef
from tests.engine.harness import running_engine

SLOW = ChatRef("slow", "a")


async def test_a_reply_still_being_shown_leaves_the_only_slot_to_another_chat(tmp_path: Path) -> None:
    async with running_engine(tmp_path, processing={"maxConcurrentLlm": 1}) as h:
        showing, shown = asyncio.Event(), asyncio.Event()

        async def slow_screen(outbound: Outbound) -> None:
            """A channel that takes its time to show a reply (the turn's reply phase waits for it)."""
            showing.set()
            await shown.wait()
            await h.record(outbound)

        h.engine.delivery.register(SLOW.channel, slow_screen)
        h.server.reply_text("Hello from the slow channel.")
        h.server.reply_text("Yes, I am here.")
        await h.say("hello", SLOW)
        await h.clock.advance(h.engine.config.processing.debounce_ms / 1000)
        await asyncio.wait_for(showing.wait(), 30)

        # The slow chat's turn is still in its reply phase: the other chat gets the one slot now.
        reply = await h.turn("are you there?")
        assert (reply.chat, reply.text) == (ChatRef("console", "me"), "Yes, I am here.")
        assert h.engine.processor.slots.in_use == 0

        shown.set()
        await h.wait_for_replies(2)
        assert [o.text for o in h.delivered] == ["Yes, I am here.", "Hello from the slow channel."]
