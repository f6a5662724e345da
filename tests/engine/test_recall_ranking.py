"""What auto-RAG ranks first, through a running engine (fake model, hashed bag-of-words embedder, real
store): the reply to a question the agent asked comes back with the question, even when the reply
shares no word with what the person asks now and other messages share several."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.engine.harness import CHAT, Harness, running_engine
from tests.engine.test_recall_end_to_end import TALK, recall_blocks

ASKED = "Did you paint the bedroom walls in the end, and which colour won?"
ANSWER = "Sage green, after trying nine sample pots on the plaster."
NEARBY = [
    "The hallway walls still need a second coat of paint before the guests arrive.",
    "I want to paint the garden fence the same colour as the shed door.",
    "The bedroom curtains clash with the walls, I might paint the window frames white.",
]


async def test_the_answer_to_a_question_the_agent_asked_is_recalled_with_it(tmp_path: Path) -> None:
    """Asked "what colour did I paint the bedroom walls?" 30 messages later, the block holds the
    person's answer ("Sage green…"), which matches none of the words: it was the reply to the agent's
    question, which matches them all. On the old ranking the reply only had 0.4 of the question's
    score and three messages about painting walls outranked it."""
    async with running_engine(tmp_path) as h:
        h.server.reply_text("How was the weekend?")
        await h.turn("I spent the weekend redecorating.")
        h.server.reply_text(ASKED)
        await h.turn("It took two days, but it is done.")
        await talk(h, [ANSWER, *NEARBY, *TALK])
        h.server.reply_text("Let me see.")
        await h.turn("what colour did I paint the bedroom walls?")
        blocks = recall_blocks(h)
        assert len(blocks) == 1 and ASKED in blocks[0] and ANSWER in blocks[0], blocks


async def talk(h: Harness, texts: list[str]) -> None:
    for text in texts:
        h.server.reply_text("Noted.")
        await h.turn(text)
    async with asyncio.timeout(30):
        await h.engine.embedding_queue.wait_idle()
    segment = await h.engine.store.segments.current(CHAT)
    assert await h.engine.store.messages.count_in_segment(segment.id) == 2 * (2 + len(texts))
