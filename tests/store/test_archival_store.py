"""Archival memory and forgetting in SQLite: the `memory_saved` and `forget` folds, chunk search, and
which records make up an exchange or a segment (store/sqlite/archival_fold.py, memory_chunks.py,
history.py)."""

from __future__ import annotations

import pytest

from klaw.home import KlawHome
from klaw.memory.embedder.fake import FakeEmbedder
from klaw.store.archival_records import forget_record, memory_saved_record
from klaw.store.protocol import IndexMismatchError, Storage
from klaw.store.records import MEMORY_TARGET, MESSAGE_TARGET, MessageRecord, MessageType, Role
from klaw.store.sqlite.query import fetch_value
from klaw.store.sqlite.store import SqliteStore
from tests.memory.archive_helpers import DIM, ME, OTHER, ScriptedChat, database_bytes

SECRET = "zanzibarquokka"


async def count(store: SqliteStore, sql: str, *params: object) -> int:
    return int(await store.db.run(lambda c: fetch_value(c, sql, params)))


async def bound(store: Storage) -> FakeEmbedder:
    embedder = FakeEmbedder(dim=DIM)
    await store.vectors.bind_embedder(embedder.model_id, embedder.dim)
    await store.memory_chunks.bind_embedder(embedder.model_id, embedder.dim)
    return embedder


async def test_a_saved_memory_is_a_chunk_with_its_job_and_its_text_is_stored_once(
    home: KlawHome, store: SqliteStore
) -> None:
    chat = ScriptedChat(home, store)
    saved = await chat.accept(memory_saved_record(ME, "Ada's sister lives in Lisbon", chat.tick()))
    chunk = await store.memory_chunks.get(saved.rowid)
    assert chunk is not None and (chunk.content, chunk.chat, chunk.record_id) == (
        "Ada's sister lives in Lisbon",
        ME,
        saved.record.id,
    )
    assert (await store.messages.get(saved.record.id)).content == ""  # type: ignore[union-attr]
    assert await count(store, "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'lisbon'") == 0
    jobs = "SELECT count(*) FROM embedding_jobs WHERE target = ? AND target_rowid = ?"
    assert await count(store, jobs, MEMORY_TARGET, saved.rowid) == 1
    assert [h.chunk.rowid for h in await store.memory_chunks.full_text(ME, "where does the sister live", limit=5)] == [
        saved.rowid
    ]
    assert await store.memory_chunks.full_text(OTHER, "sister", limit=5) == []
    assert (await store.memory_chunks.find(ME, "Ada's sister lives in Lisbon")) == chunk
    assert await store.memory_chunks.texts([saved.rowid, 999]) == {saved.rowid: "Ada's sister lives in Lisbon"}


async def test_memory_vectors_are_per_chat_and_bound_to_one_embedder(home: KlawHome, storage: Storage) -> None:
    embedder = await bound(storage)
    chat = ScriptedChat(home, storage)
    mine = await chat.accept(memory_saved_record(ME, "the bike lock code is 4711", chat.tick()))
    theirs = await chat.accept(memory_saved_record(OTHER, "the bike lock code is 1234", chat.tick()))
    vectors = await embedder.embed(["the bike lock code is 4711", "the bike lock code is 1234"])
    assert await storage.memory_chunks.put([(mine.rowid, vectors[0]), (theirs.rowid, vectors[1])]) == 2
    assert await storage.memory_chunks.put([(mine.rowid, vectors[0]), (12345, vectors[0])]) == 0  # kept; gone: skipped
    query = (await embedder.embed(["bike lock code"]))[0]
    assert [h.chunk.rowid for h in await storage.memory_chunks.nearest(ME, query, limit=5)] == [mine.rowid]
    assert [h.chunk.rowid for h in await storage.memory_chunks.nearest(OTHER, query, limit=5)] == [theirs.rowid]
    newer = await chat.accept(memory_saved_record(ME, "the shed key is under the pot", chat.tick()))
    latest = await storage.memory_chunks.latest(ME, 5)  # `/memory` lists these, newest first
    assert [(m.rowid, m.content) for m in latest] == [
        (newer.rowid, "the shed key is under the pot"),
        (mine.rowid, "the bike lock code is 4711"),
    ]
    assert [m.rowid for m in await storage.memory_chunks.latest(ME, 1)] == [newer.rowid]
    with pytest.raises(IndexMismatchError, match="klaw reindex"):
        await storage.memory_chunks.bind_embedder("another-model", DIM)


async def test_an_exchange_is_its_burst_its_turn_and_not_what_was_typed_mid_turn(
    home: KlawHome, storage: Storage
) -> None:
    chat = ScriptedChat(home, storage)
    first = await chat.turn("hello", reply="hi there")
    burst = await chat.say("one more thing")
    second = await chat.turn("and another", reply=None, pending=[burst], tools=[("current_time", "09:00")])
    third_user = await chat.say("typed while the turn ran")  # belongs to the next exchange
    third = await chat.turn("so?", reply="done", pending=[third_user], memories=["likes tea"])
    for turn in (first, second, third):
        got = await storage.history.exchange_messages(await chat.exchange_id(turn))
        assert [m.record.id for m in got or []] == [m.record.id for m in turn.all]
    assert await storage.history.exchange_messages(9999) is None


async def test_a_turn_still_open_ends_where_the_next_one_starts(home: KlawHome, storage: Storage) -> None:
    from klaw.store.exchange_records import exchange_open_record

    chat = ScriptedChat(home, storage)
    user = await chat.say("crash during this turn")
    opened = await chat.accept(exchange_open_record(ME, user.record.id, chat.tick()))
    call = await chat.accept(
        MessageRecord(ME, Role.ASSISTANT, "", type=MessageType.TOOL_CALL, created_at=chat.tick(), metadata={})
    )
    later = await chat.turn("after the restart", reply="back")
    [crashed, _] = await storage.exchanges.for_segment(user.segment_id)
    got = await storage.history.exchange_messages(crashed.id)
    assert [m.rowid for m in got or []] == [user.rowid, opened.rowid, call.rowid]
    assert later.users[0].rowid not in {m.rowid for m in got or []}


async def test_a_segment_is_all_of_its_records_but_new_and_model(home: KlawHome, storage: Storage) -> None:
    chat = ScriptedChat(home, storage)
    turn = await chat.turn("first segment", reply="ok")
    brk = await chat.new_segment()
    await chat.turn("second segment", reply="ok")
    got = await storage.history.segment_messages(turn.opened.segment_id)
    assert [m.rowid for m in got] == [m.rowid for m in turn.all]
    assert brk.rowid not in {m.rowid for m in got}


async def test_forgetting_deletes_rows_indexes_vectors_jobs_exchanges_and_chunks(
    home: KlawHome, store: SqliteStore
) -> None:
    embedder = await bound(store)
    chat = ScriptedChat(home, store)
    keep = await chat.turn("the garden needs watering on sunday", reply="noted for sunday")
    gone = await chat.turn(
        f"my passport number has {SECRET} in it",
        reply=f"I will not repeat {SECRET}",
        tools=[("file_read", f"{SECRET} appears in the file")],
        memories=[f"{SECRET} memo"],
    )
    texts = [m for m in [*keep.all, *gone.all] if m.record.type is MessageType.TEXT]
    await store.vectors.put([(m.rowid, (await embedder.embed([m.content]))[0]) for m in texts])
    memo = gone.steps[-1]
    await store.memory_chunks.put([(memo.rowid, (await embedder.embed([f"{SECRET} memo"]))[0])])
    assert await store.search.nearest(ME, (await embedder.embed([SECRET]))[0], limit=10)  # fills the vector cache
    assert store.vector_cache.cached_bytes > 0
    exchange_id = await chat.exchange_id(gone)

    await chat.accept(forget_record(ME, [m.record.id for m in gone.all], "exchange", ["2026-01-01"], chat.tick()))

    rowids = [m.rowid for m in gone.all]
    marks = ",".join(str(r) for r in rowids)
    assert await count(store, f"SELECT count(*) FROM messages WHERE rowid IN ({marks})") == 0
    assert await count(store, f"SELECT count(*) FROM messages_fts WHERE messages_fts MATCH '{SECRET}'") == 0
    assert await count(store, f"SELECT count(*) FROM memory_chunks_fts WHERE memory_chunks_fts MATCH '{SECRET}'") == 0
    assert await count(store, f"SELECT count(*) FROM vec_messages WHERE rowid IN ({marks})") == 0
    assert await count(store, f"SELECT count(*) FROM vec_memory WHERE rowid IN ({marks})") == 0
    assert await count(store, f"SELECT count(*) FROM memory_chunks WHERE rowid IN ({marks})") == 0
    jobs = f"SELECT count(*) FROM embedding_jobs WHERE target_rowid IN ({marks}) AND target IN (?, ?)"
    assert await count(store, jobs, MESSAGE_TARGET, MEMORY_TARGET) == 0
    assert await store.exchanges.get(exchange_id) is None
    assert store.vector_cache.cached_bytes == 0  # the chat's in-memory copy was dropped
    # what was not forgotten is all still there
    assert [m.rowid for m in await store.history.exchange_messages(await chat.exchange_id(keep)) or []] == [
        m.rowid for m in keep.all
    ]
    assert [h.message.rowid for h in await store.search.full_text(ME, "garden watering", limit=5)]


async def test_a_tombstone_only_ever_touches_its_own_chat(home: KlawHome, storage: Storage) -> None:
    chat = ScriptedChat(home, storage)
    theirs = await chat.turn("their secret plan", reply="ok", chat=OTHER)
    await chat.accept(forget_record(ME, [m.record.id for m in theirs.all], "exchange", [], chat.tick()))
    assert all([await storage.messages.get(m.record.id) for m in theirs.all])


async def test_forgotten_text_leaves_the_database_file(home: KlawHome) -> None:
    path = home.root / "klaw.db"
    home.root.mkdir(parents=True)
    store = await SqliteStore.open(path)
    try:
        chat = ScriptedChat(home, store)
        for n in range(30):  # enough rows that the forgotten ones share pages with kept ones
            await chat.turn(f"ordinary message number {n} about the weather", reply=f"reply {n} about clouds")
        long_result = " ".join(f"line {n} of a long file mentions {SECRET}" for n in range(600))  # overflow pages
        gone = await chat.turn(
            f"the alarm code is {SECRET}",
            reply=f"{SECRET} stored",
            tools=[("file_read", long_result)],
            memories=[f"{SECRET}!"],
        )
        await store.history.checkpoint()
        assert SECRET.encode() in database_bytes(path)
        await chat.accept(forget_record(ME, [m.record.id for m in gone.all], "exchange", [], chat.tick()))
        await store.history.checkpoint()
        assert SECRET.encode() not in database_bytes(path)
        assert b"ordinary message number 7" in database_bytes(path)
    finally:
        await store.aclose()


async def test_forget_and_memory_records_are_control_records(home: KlawHome, storage: Storage) -> None:
    chat = ScriptedChat(home, storage)
    said = await chat.say("hello")
    await chat.accept(memory_saved_record(ME, "a memory", chat.tick()))
    await chat.accept(forget_record(ME, ["unknown-id"], "segment 9", [], chat.tick()))
    assert MessageType.MEMORY_SAVED.is_control and MessageType.FORGET.is_control
    assert [m.rowid for m in await storage.messages.window(said.segment_id, 10)] == [said.rowid]
