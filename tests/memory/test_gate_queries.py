"""What the word-evidence gate costs the store: it looks at the candidates the search already
returned first, and when none holds a word of the question written like a name, it neither counts
words in the scope nor searches it a second time (decision 204). Counted with apsw's statement
tracer on a real SQLite store (the fake embedder's vectors far from every query, so only words can
open the gate)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import apsw

from klaw.config import AutoRagConfig, RagConfig
from klaw.memory.auto_rag import AutoRagService
from klaw.memory.hybrid_search import HybridSearch
from klaw.memory.past_conversations.past_messages import PastMessages
from klaw.memory.past_conversations.pipeline import Retrieval
from klaw.store.sqlite.store import SqliteStore
from tests.memory.recall_helpers import ALICE, Conversation, FixedEmbedder, one_hot

T = TypeVar("T")
FACT = "we stayed two nights in Carcassonne with my sister's dog Zorblax"


async def statements(store: SqliteStore, work: Callable[[], Awaitable[T]]) -> tuple[T, list[str]]:
    """`work`'s result and the SQL of every full-text statement it ran (those naming `messages_fts`)."""
    seen: list[str] = []

    def trace(cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
        if "messages_fts" in sql:
            seen.append(sql)
        return True

    await store.db.run(lambda connection: setattr(connection, "exec_trace", trace))
    try:
        return await work(), seen
    finally:
        await store.db.run(lambda connection: setattr(connection, "exec_trace", None))


async def a_chat_with(store: SqliteStore, *, past: bool) -> tuple[Conversation, int]:
    """The fact among many messages sharing its common words (in a past segment when `past`)."""
    chat = await Conversation(store).bind()
    fact = await chat.say(FACT, vector=one_hot(1))
    for i in range(40):
        await chat.say(f"two nights in the old town with my sister, photo {i}", vector=one_hot(2))
    if past:
        await chat.new_segment()
        await chat.say("back home now", vector=one_hot(2))
    return chat, fact.rowid


async def test_a_name_a_candidate_holds_still_opens_the_past_stage(store: SqliteStore) -> None:
    chat, fact = await a_chat_with(store, past=True)
    stage = PastMessages(store, HybridSearch(store, FixedEmbedder(one_hot(0))))
    question = Retrieval(ALICE, await chat.segment_id(), "where did we stay with Zorblax?", RagConfig(), 1000)
    result = await stage(question)
    assert [hit.message.rowid for hit in result.messages][:1] == [fact]


async def test_a_question_whose_candidates_share_no_name_costs_the_gate_nothing(store: SqliteStore) -> None:
    chat, _ = await a_chat_with(store, past=True)
    current = await chat.segment_id()
    search = HybridSearch(store, FixedEmbedder(one_hot(0)))
    stage = PastMessages(store, search)
    question = Retrieval(ALICE, current, "the old town photo with my sister", RagConfig(), 1000)
    await stage(question)
    _, alone = await statements(
        store, lambda: search.search(ALICE, question.query, limit=20, before_segment_id=current)
    )
    result, sql = await statements(store, lambda: stage(question))
    assert result.messages == ()
    assert len(sql) == len(alone), sql


async def test_auto_rag_with_the_vector_gate_shut_and_no_name_shared_runs_only_its_search(
    store: SqliteStore,
) -> None:
    chat, _ = await a_chat_with(store, past=False)
    search = HybridSearch(store, FixedEmbedder(one_hot(0)))
    rag = AutoRagService(AutoRagConfig(), search)
    segment = await chat.segment_id()
    query = "the old town photo with my sister"
    await rag.recall(ALICE, segment, query, ())
    _, alone = await statements(store, lambda: search.search(ALICE, query, segment_id=segment, limit=20))
    recalled, sql = await statements(store, lambda: rag.recall(ALICE, segment, query, ()))
    assert recalled == []
    assert len(sql) == len(alone), sql
