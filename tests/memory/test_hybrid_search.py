"""Hybrid search over a real SQLite file with sqlite-vec and the fake embedder; the FTS query builder."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path

import apsw
import numpy as np
import numpy.typing as npt
import pytest

from klaw.memory.embedder.fake import FakeEmbedder
from klaw.memory.hybrid_search import HybridSearch
from klaw.store.records import MessageType, Role
from klaw.store.sqlite.fts_query import fts5_match_expression, search_words
from klaw.store.sqlite.store import SqliteStore
from tests.memory.recall_helpers import ALICE, BOB, DIM, BrokenEmbedder, Conversation

SYNTAX_QUERIES = [
    '"unbalanced quote',
    "it's \"quoted\" 'twice'",
    "(parenthesised (deploy",
    "deploy)",
    "a AND OR NOT b",
    "deploy AND",
    "NEAR(deploy plan, 3)",
    "NEAR",
    "deploy*",
    "*",
    "^deploy",
    "col:deploy",
    "messages_fts:deploy",
    ":",
    "-deploy",
    "--",
    "a^b",
    "'; DROP TABLE messages;--",
    "{deploy plan}",
    "deploy + plan",
    "Деплой в пятницу",
    "デプロイ",
    "café déploiement",
    "🚀 deploy 🚀",
    "🚀",
    "",
    "   ",
    '""',
    "\x00",
]


@pytest.fixture
async def chat(store: SqliteStore) -> Conversation:
    return await Conversation(store).bind()


async def test_search_words_drop_stop_words_but_keep_all_when_all_are_stop_words() -> None:
    assert search_words("What did we decide about the deploy?") == ["decide", "deploy"]
    assert search_words("what is it?") == ["what", "is", "it"]
    assert search_words("Deploy deploy DEPLOY") == ["deploy"]
    assert search_words("don't forget the keys") == ["forget", "keys"]
    assert search_words("?! ...") == []


@pytest.mark.parametrize("text", SYNTAX_QUERIES)
async def test_fts_expression_quotes_every_term(text: str) -> None:
    expression = fts5_match_expression(text)
    if expression is not None:
        for term in expression.split(" OR "):
            assert term.startswith('"') and term.endswith('"')


@pytest.mark.parametrize("text", SYNTAX_QUERIES)
async def test_fts_special_characters_never_raise(chat: Conversation, text: str) -> None:
    await chat.say("the deploy plan: NEAR the col value, minus (parentheses) and café")
    await chat.say("Деплой в пятницу 🚀")
    hybrid = HybridSearch(chat.store, chat.embedder)
    await hybrid.search(ALICE, text)
    await chat.store.search.full_text(ALICE, text, limit=5)


async def test_stop_words_do_not_rank_function_word_matches_first(chat: Conversation) -> None:
    await chat.say("what did you do about it? we were about to leave the house")
    await chat.new_segment()  # not next to each other: a message is also found by its neighbours' words
    decision = await chat.say("decision: the deploy moves to Friday")
    hits = await chat.store.search.full_text(ALICE, "what did we decide about the deploy", limit=5)
    assert [h.message.rowid for h in hits] == [decision.rowid]


async def test_message_found_by_both_sides_ranks_first(chat: Conversation) -> None:
    await chat.say("deploy")  # full text only: no vector (the queue has not reached it)
    both = await chat.say("the deploy pipeline for staging", embed=True)
    await chat.say("pipeline staging lunch", embed=True)
    hits = await HybridSearch(chat.store, chat.embedder).search(ALICE, "deploy pipeline staging")
    assert hits[0].message.rowid == both.rowid
    assert hits[0].distance is not None and hits[0].fts_rank is not None and hits[0].bm25 is not None
    assert len({h.message.rowid for h in hits}) == len(hits)  # each message once
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


async def test_scoped_to_chat_and_segment(chat: Conversation) -> None:
    await chat.say("the deploy happens on Friday", chat=BOB)
    old = await chat.say("the deploy happens on Monday")
    await chat.new_segment()
    new = await chat.say("the deploy happens on Tuesday")
    hybrid = HybridSearch(chat.store, chat.embedder)
    everything = await hybrid.search(ALICE, "deploy")
    assert {h.message.rowid for h in everything} == {old.rowid, new.rowid}
    scoped = await hybrid.search(ALICE, "deploy", segment_id=await chat.segment_id())
    assert [h.message.rowid for h in scoped] == [new.rowid]


async def test_excluded_rowids_take_no_place_and_only_conversation_messages_are_returned(chat: Conversation) -> None:
    shown = await chat.say("deploy checklist one")
    kept = await chat.say("deploy checklist two", Role.ASSISTANT)
    await chat.say("deploy", Role.ASSISTANT, type=MessageType.TOOL_CALL, embed=False, metadata={"tool_calls": []})
    await chat.say("deploy checklist result", Role.TOOL, type=MessageType.TOOL_RESULT, embed=False)
    hybrid = HybridSearch(chat.store, chat.embedder)
    hits = await hybrid.search(ALICE, "deploy checklist", limit=1, exclude=[shown.rowid])
    assert [h.message.rowid for h in hits] == [kept.rowid]


async def test_vector_side_unavailable_gives_full_text_results_and_a_warning_without_content(
    chat: Conversation, caplog: pytest.LogCaptureFixture
) -> None:
    found = await chat.say("the secret deploy password is hunter2", embed=False)
    broken = BrokenEmbedder()
    with caplog.at_level(logging.WARNING):
        hits = await HybridSearch(chat.store, broken).search(ALICE, "secret deploy")
    assert broken.calls == 1
    assert [(h.message.rowid, h.distance, h.fts_rank) for h in hits] == [(found.rowid, None, 1)]
    assert "vector side unavailable (RuntimeError)" in caplog.text
    assert "secret" not in caplog.text and "hunter2" not in caplog.text


async def test_no_vector_table_and_no_embedder_mean_full_text_only(store: SqliteStore) -> None:
    chat = Conversation(store)  # never bound: vec_messages does not exist
    found = await chat.say("deploy notes", embed=False)
    with_embedder = await HybridSearch(store, FakeEmbedder(dim=DIM)).search(ALICE, "deploy")
    without = await HybridSearch(store, None).search(ALICE, "deploy")
    assert [h.message.rowid for h in with_embedder] == [h.message.rowid for h in without] == [found.rowid]


async def test_blank_text_and_unknown_chat_find_nothing(chat: Conversation) -> None:
    await chat.say("deploy")
    hybrid = HybridSearch(chat.store, chat.embedder)
    assert await hybrid.search(ALICE, "  ") == []
    assert await hybrid.search(BOB, "deploy") == []
    assert await hybrid.search(ALICE, "deploy", limit=0) == []


async def test_full_text_runs_while_the_query_is_being_embedded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two sides overlap: with the embedder held, the full-text query still reaches the database
    (on a read connection, decision 216: every connection of the store is traced)."""
    loop = asyncio.get_running_loop()
    full_text_ran = asyncio.Event()

    def watch(cursor: object, sql: str, bindings: object) -> bool:
        if "messages_fts MATCH" in sql:
            loop.call_soon_threadsafe(full_text_ran.set)
        return True

    monkeypatch.setattr(apsw, "connection_hooks", [lambda connection: setattr(connection, "exec_trace", watch)])
    store = await SqliteStore.open(tmp_path / "traced.db")
    try:
        await _full_text_while_embedding(store, full_text_ran)
    finally:
        await store.aclose()


async def _full_text_while_embedding(store: SqliteStore, full_text_ran: asyncio.Event) -> None:
    conversation = await Conversation(store).bind()
    await conversation.say("the deploy moved to friday")
    await conversation.say("lunch was good")
    held = GatedEmbedder(DIM)
    full_text_ran.clear()
    search = asyncio.create_task(HybridSearch(store, held).search(ALICE, "when is the deploy"))
    await asyncio.wait_for(held.entered.wait(), timeout=60)
    await asyncio.wait_for(full_text_ran.wait(), timeout=60)  # sequential sides would wait here forever
    assert not search.done()
    held.gate.set()
    hits = await asyncio.wait_for(search, timeout=60)
    assert hits[0].message.record.content == "the deploy moved to friday"
    assert hits[0].distance is not None and hits[0].fts_rank == 1


class GatedEmbedder(FakeEmbedder):
    """Waits at `gate` before answering; `entered` is set once a call is waiting."""

    def __init__(self, dim: int) -> None:
        super().__init__(dim=dim)
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()

    async def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.entered.set()
        await self.gate.wait()
        return await super().embed(texts)
