"""Archival memory: memory_save's durable chunks, and memory_search over saved memories and every past
message of the chat (memory/archival_memory.py, chunk_search.py) on a real store and queue."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from klaw.engine.clock import ManualClock
from klaw.home import KlawHome
from klaw.memory.archival_memory import ArchivalError, ArchivalMemory
from klaw.memory.embedder.fake import FakeEmbedder
from klaw.memory.embedding_queue import EmbeddingQueue
from klaw.store.log_format import decode_record
from klaw.store.records import MessageType
from klaw.store.sqlite.store import SqliteStore
from tests.memory.archive_helpers import DIM, ME, OTHER, ScriptedChat, log_text
from tests.memory.test_hybrid_search import SYNTAX_QUERIES

BIRTHDAY = "Ada's birthday is on the 4th of March; she likes lemon cake"


@pytest.fixture
async def store(home: KlawHome) -> AsyncIterator[SqliteStore]:
    home.root.mkdir(parents=True)
    clock = ManualClock()
    opened = await SqliteStore.open(home.root / "klaw.db", clock=clock.now)
    embedder = FakeEmbedder(DIM)
    await opened.vectors.bind_embedder(embedder.model_id, DIM)
    try:
        yield opened
    finally:
        await opened.aclose()


def archival(chat: ScriptedChat, *, embedder: FakeEmbedder | None = None, max_chars: int = 2000) -> ArchivalMemory:
    return ArchivalMemory(chat.ingestion, embedder or FakeEmbedder(DIM), chat.tick, max_chars=max_chars)


async def drain(store: SqliteStore) -> int:
    """Run the embedding queue as the engine would, until nothing is due (message and memory jobs)."""
    return await EmbeddingQueue(store, FakeEmbedder(DIM), ManualClock(), batch_size=8).run_until_idle()


async def test_a_saved_memory_is_logged_and_found_by_words_at_once_and_by_meaning_once_embedded(
    home: KlawHome, store: SqliteStore
) -> None:
    chat = ScriptedChat(home, store)
    memory = archival(chat)
    saved = await memory.save(ME, f"  {BIRTHDAY}  ")
    assert saved.created
    [line] = [decode_record(line) for line in log_text(home).splitlines()]
    assert (line.type, line.content) == (MessageType.MEMORY_SAVED, BIRTHDAY)  # the log can rebuild it

    [found] = await memory.search(ME, "when is the birthday", limit=5)
    assert (found.kind, found.id, found.text) == ("memory", saved.memory_id, BIRTHDAY)
    assert found.fts_rank == 1 and found.distance is None  # not embedded yet

    assert await drain(store) == 1
    assert await store.memory_chunks.vector_count() == 1
    [found] = await memory.search(ME, "when is the birthday", limit=5)
    assert found.fts_rank == 1 and found.distance is not None and found.distance < 0.9
    [by_meaning] = await memory.search(ME, "lemon birthday cake?", limit=5)  # fake embedder: shared words
    assert by_meaning.id == saved.memory_id


async def test_saving_the_same_text_twice_keeps_one_memory(home: KlawHome, store: SqliteStore) -> None:
    memory = archival(ScriptedChat(home, store))
    first = await memory.save(ME, BIRTHDAY)
    again = await memory.save(ME, BIRTHDAY)
    elsewhere = await memory.save(OTHER, BIRTHDAY)
    assert (again.memory_id, again.created) == (first.memory_id, False)
    assert elsewhere.created and elsewhere.memory_id != first.memory_id
    assert await store.memory_chunks.count(ME) == 1


async def test_empty_and_too_long_memories_are_refused(home: KlawHome, store: SqliteStore) -> None:
    memory = archival(ScriptedChat(home, store), max_chars=20)
    with pytest.raises(ArchivalError, match="empty"):
        await memory.save(ME, "   ")
    with pytest.raises(ArchivalError, match=r"at most 20 \(memory.saveMaxChars\)"):
        await memory.save(ME, "x" * 21)
    with pytest.raises(ArchivalError, match="query is empty"):
        await memory.search(ME, " ", limit=3)
    assert await store.memory_chunks.count() == 0


async def test_search_covers_memories_and_every_segment_of_the_chat_but_no_other_chat(
    home: KlawHome, store: SqliteStore
) -> None:
    chat = ScriptedChat(home, store)
    memory = archival(chat)
    old = await chat.turn("the boiler makes a knocking noise since monday", reply="call the boiler technician")
    await chat.new_segment()
    await chat.turn("what should we cook tonight", reply="pasta with pesto")
    await chat.turn("the boiler knocking in their flat", reply="noted", chat=OTHER)
    await memory.save(OTHER, "their boiler brand is Vaillant")
    saved = await memory.save(ME, "the boiler technician is called Rui")
    await drain(store)

    results = await memory.search(ME, "boiler knocking technician", limit=10)
    assert {r.kind for r in results} == {"memory", "message"}
    assert all("their" not in r.text and "Vaillant" not in r.text for r in results)
    assert saved.memory_id in {r.id for r in results if r.kind == "memory"}
    by_id = {r.id: r for r in results if r.kind == "message"}
    assert set(by_id) >= {old.users[0].rowid, old.final.rowid}  # type: ignore[union-attr]
    exchange_id = await chat.exchange_id(old)
    assert by_id[old.users[0].rowid].exchange_id == exchange_id
    assert by_id[old.users[0].rowid].segment_id == old.opened.segment_id
    assert by_id[old.users[0].rowid].role == "user"


async def test_search_can_leave_out_what_the_window_shows(home: KlawHome, store: SqliteStore) -> None:
    chat = ScriptedChat(home, store)
    memory = archival(chat)
    early = await chat.turn("the spare key is under the blue flower pot", reply="good to know")
    recent = await chat.turn("where is the spare key again?", reply="under the blue pot")
    everything = {r.id for r in await memory.search(ME, "spare key blue pot", limit=10)}
    assert {recent.users[0].rowid, early.users[0].rowid} <= everything
    skipped = {r.id for r in await memory.search(ME, "spare key blue pot", limit=10, skip_recent=2)}
    assert recent.users[0].rowid not in skipped and recent.final.rowid not in skipped  # type: ignore[union-attr]
    assert early.users[0].rowid in skipped


async def test_search_degrades_to_full_text_when_the_embedder_fails(home: KlawHome, store: SqliteStore) -> None:
    from tests.memory.recall_helpers import BrokenEmbedder

    chat = ScriptedChat(home, store)
    await archival(chat).save(ME, BIRTHDAY)
    [found] = await archival(chat, embedder=BrokenEmbedder()).search(ME, "birthday", limit=3)
    assert found.text == BIRTHDAY and found.distance is None


async def test_what_only_the_vector_side_found_far_away_is_left_out(home: KlawHome, store: SqliteStore) -> None:
    chat = ScriptedChat(home, store)
    await chat.turn("the boiler makes a knocking noise", reply="call the technician")
    await archival(chat).save(ME, "the boiler technician is called Rui")
    await drain(store)
    unrelated = "quantum chromodynamics lattice"
    assert await archival(chat).search(ME, unrelated, limit=5)  # nearest neighbours always exist
    gated = ArchivalMemory(chat.ingestion, FakeEmbedder(DIM), chat.tick, max_chars=100, relevance_threshold=0.5)
    assert await gated.search(ME, unrelated, limit=5) == []
    found = await gated.search(ME, "boiler technician", limit=5)
    assert {r.kind for r in found} == {"memory", "message"}


@pytest.mark.parametrize("text", SYNTAX_QUERIES)
async def test_search_never_raises_on_fts_syntax_characters(home: KlawHome, store: SqliteStore, text: str) -> None:
    """memory_search passes the model's query to both FTS5 indexes (saved memories, messages)."""
    chat = ScriptedChat(home, store)
    await archival(chat).save(ME, "the deploy plan: NEAR the col value, minus (parentheses) and café")
    await chat.turn("deploy) on friday? AND OR NOT", reply='yes, "quoted" deploy*')
    if not text.strip():
        with pytest.raises(ArchivalError, match="the query is empty"):  # a clear error the model reads
            await archival(chat).search(ME, text, limit=5)
    else:
        await archival(chat).search(ME, text, limit=5)
