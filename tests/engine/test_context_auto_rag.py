"""Auto-RAG in the context builder (ContextBuilderAutoRagTest,
docs/decisions/009-carried-over-requirements.md), and the window's accounting.

The builder runs on a real store with vectors from the fake embedder; a spy around the real
AutoRagService records what the builder asked for.
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest

from klaw.config import EngineConfig
from klaw.engine.context_builder import BuiltContext, ContextBuilder, message_tokens
from klaw.engine.sessions import Session
from klaw.engine.system_prompt import SystemPrompt
from klaw.home import KlawHome
from klaw.home_init import initialise_home
from klaw.llm.catalogue import ModelCatalogue
from klaw.memory.auto_rag import HEADER, AutoRagService, RecalledMessage
from klaw.memory.core_memory import CoreMemory
from klaw.memory.hybrid_search import HybridSearch, Phase, untimed
from klaw.store.exchange_records import exchange_close_record, exchange_open_record
from klaw.store.records import ChatRef, ExchangeStatus, MessageRecord, MessageType, Role, StoredMessage
from klaw.store.sqlite.store import SqliteStore
from tests.engine.harness import CHAT, engine_config, running_engine
from tests.memory.recall_helpers import ALICE, Conversation

DEPLOY = "the deploy moves to friday night after the database migration"
QUERY = "so the deploy moves to friday night after the migration?"
WINDOW = 4
AUTO_RAG_PARTS = ["query_embedding", "vector", "full_text", "ranking", "ranking.neighbours"]


class SpyAutoRag(AutoRagService):
    def __init__(self, config: EngineConfig, chat: Conversation) -> None:
        super().__init__(config.auto_rag, HybridSearch(chat.store, chat.embedder))
        self.calls: list[dict[str, Any]] = []

    async def recall(
        self,
        chat: ChatRef,
        segment_id: int,
        query: str,
        window_rowids: Collection[int],
        *,
        max_tokens: int | None = None,
        phase: Phase = untimed,
    ) -> list[RecalledMessage]:
        self.calls.append({"query": query, "shown": set(window_rowids), "max_tokens": max_tokens})
        return await super().recall(chat, segment_id, query, window_rowids, max_tokens=max_tokens, phase=phase)


class SummarisedBuilder(ContextBuilder):
    async def summary_layer(self, session: Session) -> str | None:
        return "Summary of this conversation so far: planning a release."


def config(budget: int = 4000, **overrides: Any) -> EngineConfig:
    base = engine_config("http://127.0.0.1:9", context={"slidingWindow": WINDOW}, **overrides)
    models = {mid: m.model_copy(update={"context_budget": budget}) for mid, m in base.models.items()}
    return base.model_copy(update={"models": models})


@pytest.fixture
def home(tmp_path: Path) -> KlawHome:
    home = KlawHome(tmp_path / "home")
    initialise_home(home)
    return home


@pytest.fixture
async def chat(store: SqliteStore) -> Conversation:
    return await Conversation(store).bind()


async def build(
    home: KlawHome,
    chat: Conversation,
    settings: EngineConfig,
    pending: list[StoredMessage],
    *,
    subagent: bool = False,
    builder_class: type[ContextBuilder] = ContextBuilder,
) -> tuple[BuiltContext, SpyAutoRag]:
    spy = SpyAutoRag(settings, chat)
    builder = builder_class(
        ModelCatalogue.from_config(settings),
        settings.context,
        chat.store,
        SystemPrompt(home.workspace),
        CoreMemory(home.core_memory_file),
        auto_rag=spy,
    )
    session = Session(ALICE, settings.routing.default, await chat.store.segments.current(ALICE))
    return await builder.build(session, pending, subagent=subagent), spy


async def history_with_topic(chat: Conversation, filler: int = 2 * WINDOW) -> StoredMessage:
    """The topic first, then enough small talk to push it out of the window."""
    topic = await chat.say(DEPLOY, Role.ASSISTANT)
    await chat.filler(filler)
    return topic


def layer_names(context: BuiltContext) -> list[str]:
    return [layer.name for layer in context.layers]


def layer(context: BuiltContext, name: str) -> Any:
    return next(layer for layer in context.layers if layer.name == name)


async def test_skipped_when_segment_count_does_not_exceed_sliding_window(home: KlawHome, chat: Conversation) -> None:
    await history_with_topic(chat, filler=WINDOW - 1)  # WINDOW messages before the pending one
    pending = [await chat.say(QUERY)]
    context, spy = await build(home, chat, config(), pending)
    assert spy.calls == []
    assert "auto_rag" not in layer_names(context)
    assert layer(context, "sliding_window").items == WINDOW


async def test_control_records_do_not_count_towards_the_guard(home: KlawHome, chat: Conversation) -> None:
    """A turn also stores exchange_open/exchange_close records, and /model a model_switch: they are
    not messages. A segment of exactly WINDOW messages skips auto-RAG however many of them it holds;
    one message more and auto-RAG runs."""
    for i in range(WINDOW // 2):
        question = await chat.say(f"question {i}: does the deploy still move to friday night?")
        opened = exchange_open_record(ALICE, question.record.id, question.record.created_at)
        await chat.store.messages.append(opened)
        answer = await chat.say(f"answer {i}: yes, right after the database migration", Role.ASSISTANT)
        closed = exchange_close_record(opened, ExchangeStatus.COMPLETED, answer.record.id, answer.record.created_at)
        await chat.store.messages.append(closed)
        switch = MessageRecord(
            ALICE,
            Role.SYSTEM,
            "",
            type=MessageType.MODEL_SWITCH,
            metadata={"model": "fake/large"},
            created_at=answer.record.created_at,
        )
        await chat.store.messages.append(switch)
    context, spy = await build(home, chat, config(), [await chat.say(QUERY)])
    assert spy.calls == [] and "auto_rag" not in layer_names(context)
    assert layer(context, "sliding_window").items == WINDOW
    await chat.say("one more message, and the segment no longer fits the window")
    _, spy = await build(home, chat, config(), [await chat.say(QUERY)])
    assert len(spy.calls) == 1


async def test_skipped_for_a_subagent(home: KlawHome, chat: Conversation) -> None:
    await history_with_topic(chat)
    context, spy = await build(home, chat, config(), [await chat.say(QUERY)], subagent=True)
    assert spy.calls == [] and context.recalled == []


async def test_skipped_when_disabled(home: KlawHome, chat: Conversation) -> None:
    await history_with_topic(chat)
    settings = config(autoRag={"enabled": False})
    context, spy = await build(home, chat, settings, [await chat.say(QUERY)])
    assert spy.calls == [] and "auto_rag" not in layer_names(context)


async def test_block_sits_between_summary_and_window(home: KlawHome, chat: Conversation) -> None:
    topic = await history_with_topic(chat)
    pending = [await chat.say(QUERY)]
    context, _ = await build(home, chat, config(), pending, builder_class=SummarisedBuilder)
    assert layer_names(context) == ["system_prompt", "summary", "auto_rag", "sliding_window", "pending"]
    contents = [m.content or "" for m in context.messages]
    assert contents[1].startswith("Summary of this conversation")
    # The topic, and the message after it: full text finds that one through the words of the topic,
    # the message before it (the context column of messages_fts).
    assert contents[2] == f"{HEADER}\n\n[assistant] {topic.content}\n[user] filler number 0 lorem ipsum dolor"
    assert [r.hit.message.rowid for r in context.recalled] == [topic.rowid, topic.rowid + 1]
    assert layer(context, "auto_rag").items == 2


async def test_each_layer_says_how_long_it_took(home: KlawHome, chat: Conversation) -> None:
    """Every build times its layers (engine/turn_timing.py): the bench and the inspector read them."""
    await history_with_topic(chat)
    context, _ = await build(home, chat, config(), [await chat.say(QUERY)])
    timed = context.timings.seconds
    layers = [name for name in timed if "." not in name]
    assert layers == ["system_prompt", "core_memory", "summary", "past_conversations", "window", "auto_rag"]
    assert all(seconds >= 0 for seconds in timed.values())
    # auto-RAG's parts, each side and the ranking with its neighbours' read, listed after it (decision 404)
    assert set(AUTO_RAG_PARTS) <= {name.removeprefix("auto_rag.") for name in timed if name.startswith("auto_rag.")}
    assert list(timed).index("auto_rag") < min(list(timed).index(f"auto_rag.{part}") for part in AUTO_RAG_PARTS)
    subagent, _ = await build(home, chat, config(), [await chat.say(QUERY)], subagent=True)
    assert "auto_rag" not in subagent.timings.seconds and "window" in subagent.timings.seconds


async def test_block_absent_when_nothing_is_recalled(home: KlawHome, chat: Conversation) -> None:
    await history_with_topic(chat)
    context, spy = await build(home, chat, config(), [await chat.say("ok")])
    assert len(spy.calls) == 1
    assert "auto_rag" not in layer_names(context)
    assert not any(HEADER in (m.content or "") for m in context.messages)


async def test_window_budget_is_reduced_by_the_auto_rag_tokens(home: KlawHome, chat: Conversation) -> None:
    for name in ("SOUL.md", "IDENTITY.md", "AGENTS.md"):  # not cut at the tight budget's share (decision 473)
        (home.workspace / name).write_text("Be brief.\n", encoding="utf-8")
    await chat.say(DEPLOY, Role.ASSISTANT)
    for i in range(2 * WINDOW):
        await chat.say(f"long small talk {i} " + "lorem ipsum dolor sit amet " * 30)  # ~200 tokens each
    pending = [await chat.say(QUERY)]
    roomy, _ = await build(home, chat, config(autoRag={"enabled": False}), pending)
    fixed_tokens = roomy.total_tokens - layer(roomy, "sliding_window").tokens
    # A budget that holds the fixed layers and the whole window with 5 tokens to spare, after the 90 % margin.
    tight = math.ceil((fixed_tokens + layer(roomy, "sliding_window").tokens + 5) / 0.9)
    without, _ = await build(home, chat, config(tight, autoRag={"enabled": False}), pending)
    assert layer(without, "sliding_window").items == WINDOW
    with_rag, _ = await build(home, chat, config(tight), pending)
    rag_tokens = layer(with_rag, "auto_rag").tokens
    fixed = sum(layer.tokens for layer in with_rag.layers if layer.name not in ("auto_rag", "sliding_window"))
    assert layer(with_rag, "sliding_window").tokens <= with_rag.budget - fixed - rag_tokens
    assert layer(with_rag, "sliding_window").items < layer(without, "sliding_window").items
    assert with_rag.total_tokens <= with_rag.budget


async def test_window_and_pending_rowids_are_excluded_from_recall(home: KlawHome, chat: Conversation) -> None:
    await history_with_topic(chat)
    await chat.say(DEPLOY + " (repeated inside the window)", Role.ASSISTANT)
    pending = [await chat.say(QUERY)]
    context, spy = await build(home, chat, config(), pending)
    assert spy.calls[0]["shown"] == set(context.window_rowids) | {pending[0].rowid}
    assert spy.calls[0]["query"] == QUERY
    recalled = {r.hit.message.rowid for r in context.recalled}
    assert recalled and not recalled & (context.window_rowids | {pending[0].rowid})


async def test_block_starts_with_the_header(home: KlawHome, chat: Conversation) -> None:
    await history_with_topic(chat)
    context, _ = await build(home, chat, config(), [await chat.say(QUERY)])
    block = next(m.content for m in context.messages if m.content and m.content.startswith(HEADER))
    assert block.startswith("From earlier in this conversation:\n\n[")


async def test_order_is_system_then_auto_rag_then_window_then_pending(home: KlawHome, chat: Conversation) -> None:
    await history_with_topic(chat)
    context, _ = await build(home, chat, config(), [await chat.say(QUERY)])
    kinds = []
    for message in context.messages:
        content = message.content or ""
        if message.role == "system":
            kinds.append("auto_rag" if content.startswith(HEADER) else "system")
        else:
            kinds.append("window")
    kinds[-1] = "pending" if context.messages[-1].content == QUERY else "?"
    assert kinds == ["system", "auto_rag", *["window"] * WINDOW, "pending"]


async def test_window_tokens_count_only_what_is_sent(home: KlawHome, chat: Conversation) -> None:
    # The window starts with a tool result whose call fell out of it: it is dropped, and not counted.
    await chat.filler(3)
    orphan = await chat.say(
        "tool output " * 50, Role.TOOL, type=MessageType.TOOL_RESULT, embed=False, metadata={"tool_call_id": "c1"}
    )
    kept = await chat.filler(WINDOW - 1)
    context, _ = await build(home, chat, config(), [await chat.say("hello")])
    assert orphan.rowid in context.window_rowids
    window = layer(context, "sliding_window")
    assert window.items == len(kept)
    assert window.tokens == sum(message_tokens(m) for m in kept)


async def test_fixed_layers_over_budget_are_warned_about_without_content(
    home: KlawHome, chat: Conversation, caplog: pytest.LogCaptureFixture
) -> None:
    await chat.filler(2)
    secret = "my bank password is hunter2 " * 200  # ~1400 tokens, over the whole budget of 900
    with caplog.at_level(logging.WARNING):
        context, _ = await build(home, chat, config(1000), [await chat.say(secret)])
    assert context.warnings and "over the 900-token budget" in context.warnings[0]
    assert "pending" in context.warnings[0]
    assert layer(context, "sliding_window").items == 0
    assert "over the 900-token budget" in caplog.text
    assert "hunter2" not in caplog.text and "hunter2" not in context.warnings[0]


async def test_engine_turn_recalls_and_context_command_shows_scores(tmp_path: Path) -> None:
    async with running_engine(tmp_path, context={"slidingWindow": WINDOW}) as h:
        await h.turn(DEPLOY)
        for i in range(WINDOW):
            await h.turn(f"filler number {i} lorem ipsum dolor")
        # the vectors are written straight into storage (no embedding queue in this test): by rowid
        segment = await h.engine.store.segments.current(CHAT)
        stored = await h.engine.store.messages.window(segment.id, 100)
        vectors = await h.engine.embedder.embed([m.content for m in stored])
        await h.engine.store.vectors.put([(m.rowid, vectors[i]) for i, m in enumerate(stored)])
        await h.turn(QUERY)
        messages = h.last_request_messages()
        blocks = [m["content"] for m in messages if m["role"] == "system" and m["content"].startswith(HEADER)]
        assert len(blocks) == 1 and DEPLOY in blocks[0]
        assert messages.index(next(m for m in messages if m["content"] == blocks[0])) == 1  # after the system prompt
        reply = await h.engine.submit(CHAT, "/context")
        assert reply.command_reply is not None
        assert "- auto_rag:" in reply.command_reply
        assert "Auto-RAG recalled" in reply.command_reply
        assert re.search(r"score [01]\.\d{4}", reply.command_reply)  # fused score, 0..1 plus neighbours' share
        assert "distance 0." in reply.command_reply


async def test_engine_turn_after_new_recalls_only_from_the_new_segment(tmp_path: Path) -> None:
    """/new starts afresh for auto-RAG: the old segment's topic, embedded and a near match by meaning
    and by words, is never recalled, while an older message of the new segment is."""
    harbour = "the southern harbour shelters forty fishing boats during the winter storms"
    async with running_engine(tmp_path, context={"slidingWindow": WINDOW}) as h:
        await h.turn(DEPLOY)
        await h.engine.submit(CHAT, "/new")
        await h.turn(harbour)
        for i in range(WINDOW):
            await h.turn(f"filler number {i} lorem ipsum dolor")
        async with asyncio.timeout(10):
            await h.engine.embedding_queue.wait_idle()
        assert await h.engine.store.vectors.count() >= 4  # both topics and their echoes have vectors

        def recalled_blocks() -> list[str]:
            messages = h.last_request_messages()
            return [m["content"] for m in messages if m["role"] == "system" and m["content"].startswith(HEADER)]

        await h.turn(QUERY)
        assert recalled_blocks() == []
        await h.turn("how many fishing boats does the southern harbour shelter in winter storms?")
        [block] = recalled_blocks()
        assert harbour in block and "deploy" not in block
