"""Recall a person can trust, through a running engine: the local MiniLM embedder, a real store, the
fake OpenAI server recording what the model is sent.

A fact said 31 messages back (out of the default 20-message window) must reach the context when the
person asks by the name alone, where the small embedder puts the lone name far from everything
(the words must open the gate on their own), and when they ask in words; small talk must bring
nothing back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from klaw.llm.fake_wire import Reply, TextReply
from klaw.memory.auto_rag import HEADER
from klaw.memory.summaries.prompts import EXCHANGE_INSTRUCTIONS, SEGMENT_INSTRUCTIONS
from tests.engine.harness import CHAT, Harness, running_engine
from tests.engine.test_cross_conversation import past_block, settle

FACT = "My sister's dog is called Zorblax, a grey whippet she adopted from a shelter in March."
TALK = [
    "I finally repainted the kitchen cabinets a dark green colour this weekend.",
    "The quarterly report for the logistics team is due on the fourteenth of next month.",
    "We are thinking of taking the night train from Vienna down to Venice in the summer.",
    "My landlord says the boiler will be replaced before the heating season starts.",
    "I started reading a long novel about a lighthouse keeper on a remote Scottish island.",
    "The choir rehearsal moved from Tuesday evenings to Thursday evenings at the community hall.",
    "I have been trying to bake sourdough bread but the crust always comes out too thick.",
    "Our football club lost the derby two to one after a penalty in the final minute.",
    "The dentist wants me back in six weeks to check how the new filling has settled.",
    "I signed up for an evening course on the history of medieval architecture in Europe.",
    "The tomatoes on the balcony finally turned red after weeks of cold and rainy weather.",
    "My manager approved the budget for two new laptops for the design department.",
    "We watched a documentary about deep sea creatures that glow in complete darkness.",
    "I need to renew my passport before the trip, the current one expires in October.",
    "The bakery on the corner closed down and a bicycle repair shop is opening there instead.",
]


def recall_blocks(h: Harness) -> list[str]:
    messages = h.last_request_messages()
    return [m["content"] for m in messages if m["role"] == "system" and m["content"].startswith(HEADER)]


async def conversation(h: Harness) -> None:
    """The fact, then fifteen turns on other things: the fact is 31 messages before the question."""
    for text in [FACT, *TALK]:
        h.server.reply_text("Noted, thanks for telling me.")
        await h.turn(text)
    async with asyncio.timeout(30):
        await h.engine.embedding_queue.wait_idle()
    assert len(await h.engine.chats.history(CHAT)) == 32


async def ask(h: Harness, text: str) -> list[str]:
    h.server.reply_text("Let me think.")
    await h.turn(text)
    return recall_blocks(h)


async def test_a_fact_31_messages_back_is_recalled_by_its_name_and_in_words_and_small_talk_recalls_nothing(
    tmp_path: Path,
) -> None:
    async with running_engine(tmp_path, embedder={"backend": "minilm"}) as h:
        await conversation(h)
        for question in ["recall? Zorblax", "Zorblax", "What was the name of my sister's dog?"]:
            blocks = await ask(h, question)
            assert len(blocks) == 1 and FACT in blocks[0], question
        for small_talk in ["ok thanks", "good morning!", "haha yes, sounds good"]:
            assert await ask(h, small_talk) == [], small_talk


TRIP = "We spent two nights in Carcassonne inside the old walls, then drove on to the coast."


def vague_summaries(body: Mapping[str, Any]) -> Reply:
    """A fake model whose summaries, like real ones often do, leave the details out."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    system = str(messages[0].get("content") or "") if messages else ""
    if system == EXCHANGE_INSTRUCTIONS:
        return TextReply("Summary: The person talked about a holiday.")
    if system == SEGMENT_INSTRUCTIONS:
        return TextReply("The person talked about a holiday in the south.")
    return TextReply("Noted.")


async def test_a_fact_the_summary_left_out_is_found_in_a_past_conversation(tmp_path: Path) -> None:
    """After /new, a place named in the previous segment, which its summary does not mention, reaches the
    past-conversations block when asked by its name, and when asked in words; small talk brings no block."""
    memory = {"summarizer": {"enabled": True, "rollingEvery": 1}}
    async with running_engine(tmp_path, **memory) as h:
        h.server.default_reply = vague_summaries
        await h.turn(TRIP)
        await settle(h)
        await h.engine.submit(CHAT, "/new")
        await settle(h)
        assert (await h.engine.store.summaries.counts()).segments_final == 1  # storage's count of summaries
        for question in ["Carcassonne?", "how many nights did we spend inside the old walls?"]:
            await h.turn(question)
            block = past_block(h.last_request_messages())
            assert block is not None and TRIP in block, question
            assert "found by its messages" in block
            await settle(h)
        await h.turn("ok thanks")
        assert past_block(h.last_request_messages()) is None


SHOP = "My sister Anna is redesigning her flower shop with oak shelves and a long counter."


def shop_summaries(body: Mapping[str, Any]) -> Reply:
    """Summaries that retell the shop without the details, as real ones do."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    system = str(messages[0].get("content") or "") if messages else ""
    if system == EXCHANGE_INSTRUCTIONS:
        return TextReply("Summary: The person talked about their sister's shop.")
    if system == SEGMENT_INSTRUCTIONS:
        return TextReply("The person talked about their sister redesigning her flower shop.")
    return TextReply("Noted.")


async def test_a_question_about_someone_the_chat_never_named_brings_no_past_conversation(tmp_path: Path) -> None:
    """After /new, "What did Gina design for her store?" is about as similar to the summary of the
    sister's shop (0.58 with MiniLM) as a question about the sister herself, but nobody called Gina
    was ever mentioned: no past conversation is injected. Asked about Anna, or without a name, the
    same past segment is."""
    memory = {
        "summarizer": {"enabled": True, "rollingEvery": 1},
        "embedder": {"backend": "minilm", "queryTimeoutSeconds": 60},  # a loaded CI machine must not decide
    }
    async with running_engine(tmp_path, **memory) as h:
        h.server.default_reply = shop_summaries
        await h.turn(SHOP)
        await settle(h)
        await h.engine.submit(CHAT, "/new")
        await settle(h)
        for question in ["What did Gina design for her store?", "Has Gina finished the new counter?"]:
            await h.turn(question)
            assert past_block(h.last_request_messages()) is None, question
            await settle(h)
        for question in ["How is Anna's shop redesign going?", "What did my sister design for her shop?"]:
            await h.turn(question)
            block = past_block(h.last_request_messages())
            assert block is not None and "flower shop" in block, question
            await settle(h)
