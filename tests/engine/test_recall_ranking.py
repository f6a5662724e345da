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
    """The person says each text (the agent answers "Noted."), after the two turns the test began with."""
    await talk_more(h, texts, already=2)


async def talk_more(h: Harness, texts: list[str], already: int | None = None) -> None:
    """Each text a turn; with `already` (turns said before), checks they are all in the segment."""
    for text in texts:
        h.server.reply_text("Noted.")
        await h.turn(text)
    async with asyncio.timeout(30):
        await h.engine.embedding_queue.wait_idle()
    if already is not None:
        segment = await h.engine.store.segments.current(CHAT)
        assert await h.engine.store.messages.count_in_segment(segment.id) == 2 * (already + len(texts))


BOUGHT = "At the flea market I bought a brass compass for my nephew."  # said on 1 January 2026
LATER_MARKET = [  # a week later: more of the question's words, none of its date
    "Next time at the flea market I will buy a lamp, they had nice ones.",
    "Should I buy a mirror for the flat at the flea market on Sunday?",
    "The flea market sellers said to buy early, before it gets crowded.",
]


async def test_a_question_naming_a_date_recalls_what_was_said_that_day(tmp_path: Path) -> None:
    """ "What did I buy at the flea market on 1 January 2026?" a week and 30 messages later: the
    block holds the message of that day, which shares fewer of the question's words than three
    later messages about buying at the flea market. On the old ranking the three filled the block
    (auto-RAG's topK 3) and the day's message was left out: search knew nothing of when it was said."""
    async with running_engine(tmp_path) as h:
        await talk_more(h, [BOUGHT])
        await h.clock.advance(7 * 24 * 3600)
        # one other turn between them, so they lend each other nothing (neighbourSpan 2)
        await talk_more(h, [LATER_MARKET[0], TALK[0], LATER_MARKET[1], TALK[1], LATER_MARKET[2], *TALK[2:]])
        h.server.reply_text("Let me see.")
        await h.turn("What did I buy at the flea market on 1 January 2026?")
        blocks = recall_blocks(h)
        assert len(blocks) == 1 and BOUGHT in blocks[0], blocks


CHOICE = "Went with the blue one in the end, the cheaper of the two."
NAMED = "A blue sofa for the living room, good choice."  # the agent's reply names what was chosen
SOFA_TALK = [  # one of the question's words each, none of its answer
    "Living near the river means foggy mornings.",
    "My sister is selling her old sofa online.",
    "The guest room still smells of fresh paint.",
]


async def test_what_was_said_is_recalled_by_the_words_of_the_reply_that_named_it(tmp_path: Path) -> None:
    """ "Which sofa did I choose for the living room?" 30 messages after "Went with the blue one…": the
    block holds that message, which names no sofa; the agent's reply after it did. Before the next
    message's words were indexed with it, it only had 0.4 of the reply's score and three messages
    sharing one word of the question each filled the block beside the reply."""
    async with running_engine(tmp_path) as h:
        h.server.reply_text("How did the furniture shopping go?")
        await h.turn("I spent the afternoon in furniture shops.")
        h.server.reply_text(NAMED)
        await h.turn(CHOICE)
        await talk(h, [*SOFA_TALK, *TALK])
        h.server.reply_text("Let me see.")
        await h.turn("Which sofa did I choose for the living room?")
        blocks = recall_blocks(h)
        assert len(blocks) == 1 and CHOICE in blocks[0], blocks
