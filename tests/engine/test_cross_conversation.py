"""Cross-conversation memory end to end (RAG integration, docs/decisions/009-carried-over-requirements.md):
a whole engine on the fake OpenAI server summarizes exchanges and segments in the background, embeds the
summaries, and a later question about an earlier topic brings that segment and exchange into the context,
which fetch_conversation_details then opens."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

from klaw.engine.context_builder import SUMMARY_HEADER
from klaw.memory.past_conversations.block import HEADER
from klaw.memory.summaries.worker import WorkerState
from klaw.store.summaries.records import SummaryKind
from tests.engine.harness import CHAT, Harness, running_engine
from tests.memory.summary_helpers import is_summary_request, summarizing_reply
from tests.memory.summary_rig import until

TOPICS = (
    ("how do I brew green tea at the right water temperature", "Use water at 80 degrees for green tea."),
    ("how do I oil a squeaking bike chain", "Wipe the bike chain, then apply a dry chain lube."),
    ("which expenses are deductible on my income taxes", "Work tools and donations are deductible."),
)
QUESTION = "what water temperature should I use to brew green tea again?"
MEMORY = {"summarizer": {"enabled": True, "rollingEvery": 1}, "rag": {"minSimilarity": 0.3}}


async def settle(h: Harness) -> None:
    """Let the background workers finish: summaries written, then their vectors stored."""
    assert h.engine.summarizer is not None
    async with asyncio.timeout(20):
        await h.engine.summarizer.wait_idle()
        await h.engine.embedding_queue.wait_idle()


async def command(h: Harness, text: str) -> str:
    result = await h.engine.submit(CHAT, text)
    assert result.command_reply is not None
    return result.command_reply


def past_block(messages: list[dict[str, Any]]) -> str | None:
    blocks = [m["content"] for m in messages if m["role"] == "system" and m["content"].startswith(HEADER)]
    assert len(blocks) <= 1
    return blocks[0] if blocks else None


def turn_requests(h: Harness) -> list[dict[str, Any]]:
    return [r.body for r in h.server.chat_requests if not is_summary_request(r.body)]


async def three_topics(h: Harness) -> list[int]:
    """One segment per topic, `/new` after each; returns the segment ids."""
    segments = []
    for question, answer in TOPICS:
        segments.append((await h.engine.sessions.get_or_create(CHAT)).segment.id)
        await settle(h)  # a summary request in flight would take the scripted answer
        h.server.reply_text(answer)
        await h.turn(question)
        await settle(h)
        await command(h, "/new")
        await settle(h)
    return segments


async def test_a_question_about_the_first_topic_retrieves_its_segment_and_exchange(tmp_path: Path) -> None:
    async with running_engine(tmp_path, **MEMORY) as h:
        h.server.default_reply = summarizing_reply
        segments = await three_topics(h)
        counts = await h.engine.store.summaries.counts()  # summaries and their vectors: storage's own counts
        assert (counts.exchanges, counts.segments_final, counts.vectors) == (3, 3, 6)
        [tea_exchange] = await h.engine.chats.turns(CHAT, session=segments[0])

        await h.turn(QUESTION)
        block = past_block(h.last_request_messages())
        assert block is not None
        current = (await h.engine.sessions.get_or_create(CHAT)).segment.id
        shown_segments = [int(s) for s in re.findall(r"^- segment (\d+) ", block, re.MULTILINE)]
        shown_exchanges = [int(s) for s in re.findall(r"^  - exchange (\d+) ", block, re.MULTILINE)]
        assert shown_segments[0] == segments[0] and current not in shown_segments
        assert shown_exchanges == [tea_exchange.id]
        assert "The person asked: how do I brew green tea" in block
        assert re.search(rf"- segment {segments[0]} \(\d{{4}}-\d\d-\d\d, similarity 0\.\d\d\)", block)
        assert "similarity" in block and "fetch_conversation_details" in block
        context = await command(h, "/context")
        assert "- past_conversations:" in context
        # What was recalled, by id and first words (newcomer16, decision 445): not only "1 item(s)".
        assert re.search(rf"^    segment {segments[0]}: \S.*: \d+$", context, re.MULTILINE), context
        assert re.search(rf"^      exchange {tea_exchange.id}: .*green tea.*: \d+$", context, re.MULTILINE), context

        # The model drills down into the exchange the block named.
        await settle(h)
        h.server.reply_tool_calls([("fetch_conversation_details", {"exchange_id": tea_exchange.id})])
        h.server.reply_text("As before: 80 degrees.")
        reply = await h.turn("remind me exactly what you told me back then")
        assert reply.text == "As before: 80 degrees."
        tool_results = [m for m in turn_requests(h)[-1]["messages"] if m["role"] == "tool"]
        details = json.loads(tool_results[-1]["content"])
        text = json.dumps(details)
        assert TOPICS[0][0] in text and TOPICS[0][1] in text
        assert "The person asked: how do I brew green tea" in text  # its summary rides along


async def test_the_segment_summary_feeds_the_summary_layer_and_rag_off_drops_the_block(tmp_path: Path) -> None:
    async with running_engine(tmp_path, **MEMORY) as h:
        h.server.default_reply = summarizing_reply
        await three_topics(h)
        await h.turn("tell me about green tea brewing")
        await settle(h)
        await h.turn(QUESTION)
        messages = h.last_request_messages()
        summaries = [
            m["content"] for m in messages if m["role"] == "system" and m["content"].startswith(SUMMARY_HEADER)
        ]
        assert summaries == [f"{SUMMARY_HEADER}\nThe person asked: tell me about green tea brewing"]
        assert past_block(messages) is not None
        assert [m["content"] for m in messages].index(summaries[0]) < [m["content"] for m in messages].index(
            past_block(messages)
        )

        assert await command(h, "/rag off") == (
            "Past conversations off: the context holds only this segment (and core memory)."
        )
        await settle(h)
        await h.turn(QUESTION)
        assert past_block(h.last_request_messages()) is None
        await command(h, "/rag on")
        await command(h, "/rag set rag_min_similarity 0.99")
        await settle(h)
        await h.turn(QUESTION)
        assert past_block(h.last_request_messages()) is None  # nothing is that similar


async def test_a_failing_summarizer_never_fails_a_turn(tmp_path: Path) -> None:
    async with running_engine(tmp_path, **MEMORY) as h:

        def broken(body: Any) -> Any:
            from klaw.llm.fake_server import ErrorReply

            return ErrorReply(500) if is_summary_request(body) else summarizing_reply(body)

        h.server.default_reply = broken
        for question, _ in TOPICS:
            reply = await h.turn(question)
            assert reply.kind == "reply" and reply.text == f"echo: {question}"
        assert h.engine.summarizer is not None
        # The turns move the manual clock, so the worker may be retrying right now (over real HTTP):
        # wait until it is between attempts, as a person would see it most of the time.
        await until(h.engine.summarizer.exchanges, lambda s: s.state is WorkerState.BACKING_OFF, "backing off")
        status = await command(h, "/summarizer")
        assert "backing off" in status and "LlmServerError" in status
        assert (await h.engine.store.summaries.counts()).exchanges == 0  # storage's count: none written
        h.server.default_reply = summarizing_reply
        await h.clock.advance(300)  # past the longest backoff
        await settle(h)
        assert (await h.engine.store.summaries.counts()).exchanges == 3  # the summaries as stored
        summaries = await h.engine.store.summaries.in_segment((await h.engine.sessions.get_or_create(CHAT)).segment.id)
        assert {s.kind for s in summaries} >= {SummaryKind.EXCHANGE}
