"""Forgetting (memory/forgetting.py): an exchange, a segment or a saved memory leaves the database, its
indexes, vectors, jobs, summaries and the log, a tombstone stays, and neither crash recovery nor
`klaw reindex` brings the text back."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import apsw
import pytest

from klaw.engine.clock import ManualClock
from klaw.home import KlawHome
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.embedder.fake import FakeEmbedder
from klaw.memory.embedding_queue import EmbeddingQueue
from klaw.memory.forgetting import PENDING_KEY, ForgetError, ForgetKind, Forgetting
from klaw.memory.ingestion import Ingestion
from klaw.memory.reindex import reindex
from klaw.store.archival_records import forget_record, shown_memory_id
from klaw.store.log_format import decode_record
from klaw.store.records import MessageType
from klaw.store.sqlite.fts_merge import merge_step
from klaw.store.sqlite.query import Row, fetch_all
from klaw.store.sqlite.store import SqliteStore
from klaw.store.summaries.records import SUMMARY_TARGET
from tests.memory.archive_helpers import DIM, ME, OTHER, ScriptedChat, config, database_bytes, log_text

SECRET = "quixoticpangolin"


@pytest.fixture
async def store(home: KlawHome) -> AsyncIterator[SqliteStore]:
    home.root.mkdir(parents=True)
    opened = await SqliteStore.open(home.database_file("klaw.db"))
    embedder = FakeEmbedder(DIM)
    await opened.vectors.bind_embedder(embedder.model_id, DIM)
    await opened.memory_chunks.bind_embedder(embedder.model_id, DIM)
    try:
        yield opened
    finally:
        await opened.aclose()


async def summarise(store: SqliteStore, chat_key: int, segment_id: int, exchange_id: int | None, text: str) -> int:
    """A summary row as the summarizer writes it, with its embedding job."""

    def insert(connection: apsw.Connection) -> int:
        kind = "segment" if exchange_id is None else "exchange"
        connection.execute(
            "INSERT INTO summaries (kind, chat, segment_id, exchange_id, text, model, final, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, 'fake/small', 1, 0, 0)",
            (kind, chat_key, segment_id, exchange_id, text),
        )
        summary_id = int(connection.last_insert_rowid())
        connection.execute(
            "INSERT INTO embedding_jobs (target, target_rowid, status, attempts, next_attempt_at, created_at)"
            " VALUES (?, ?, 'pending', 0, 0, 0)",
            (SUMMARY_TARGET, summary_id),
        )
        return summary_id

    return await store.db.run(insert)


async def rows(store: SqliteStore, sql: str) -> list[Row]:
    return await store.db.run(lambda c: fetch_all(c, sql))


async def everything_mentioning(store: SqliteStore, word: str) -> dict[str, int]:
    """How many rows of each text-bearing table still hold `word`."""
    checks = {
        "messages": f"SELECT count(*) FROM messages WHERE content LIKE '%{word}%' OR metadata LIKE '%{word}%'",
        "messages_fts": f"SELECT count(*) FROM messages_fts WHERE messages_fts MATCH '{word}'",
        "memory_chunks": f"SELECT count(*) FROM memory_chunks WHERE content LIKE '%{word}%'",
        "memory_chunks_fts": f"SELECT count(*) FROM memory_chunks_fts WHERE memory_chunks_fts MATCH '{word}'",
        "summaries": f"SELECT count(*) FROM summaries WHERE text LIKE '%{word}%'",
    }
    return {name: int((await rows(store, sql))[0][0]) for name, sql in checks.items()}


async def test_forgetting_an_exchange_erases_it_everywhere_and_leaves_a_content_free_tombstone(
    home: KlawHome, store: SqliteStore
) -> None:
    chat = ScriptedChat(home, store)
    kept = await chat.turn("remind me to water the garden", reply="I will remind you about the garden")
    gone = await chat.turn(
        f"my bank pin is {SECRET}",
        reply=f"noted, {SECRET}",
        tools=[("file_write", f"wrote {SECRET} to notes")],
        memories=[f"pin: {SECRET}"],
    )
    await EmbeddingQueue(store, FakeEmbedder(DIM), ManualClock(chat.now), batch_size=16).run_until_idle()
    kept_id, gone_id = await chat.exchange_id(kept), await chat.exchange_id(gone)
    segment_id = gone.opened.segment_id
    chat_key = int((await rows(store, "SELECT id FROM chats WHERE chat_id = 'me'"))[0][0])
    await summarise(store, chat_key, segment_id, kept_id, "the person wants a garden reminder")
    await summarise(store, chat_key, segment_id, gone_id, f"the person shared the pin {SECRET}")
    await summarise(store, chat_key, segment_id, None, f"garden reminder; pin {SECRET}")
    assert SECRET in log_text(home)

    forgetting = Forgetting(chat.ingestion, chat.tick)
    with pytest.raises(ForgetError, match="no exchange 999 in this chat"):
        await forgetting.plan(ForgetKind.EXCHANGE, 999, ME)
    with pytest.raises(ForgetError, match=f"no exchange {gone_id} in this chat"):
        await forgetting.plan(ForgetKind.EXCHANGE, gone_id, OTHER)
    plan = await forgetting.plan(ForgetKind.EXCHANGE, gone_id, ME)
    assert (plan.messages, plan.memories, plan.describe()) == (4, 1, "4 message(s), 1 saved memory")
    outcome = await forgetting.forget(plan)

    assert outcome.files_rewritten == 1
    assert await everything_mentioning(store, SECRET) == dict.fromkeys(
        ("messages", "messages_fts", "memory_chunks", "memory_chunks_fts", "summaries"), 0
    )
    assert await store.exchanges.get(gone_id) is None and await store.exchanges.get(kept_id) is not None
    assert await rows(store, "SELECT kind, exchange_id FROM summaries") == [("exchange", kept_id)]
    jobs = await rows(store, f"SELECT target FROM embedding_jobs WHERE target = '{SUMMARY_TARGET}'")
    assert len(jobs) == 1  # the kept exchange's summary job only
    assert await store.memory_chunks.vector_count() == 0
    assert SECRET not in log_text(home) and "garden" in log_text(home)
    [tombstone] = [r for r in map(decode_record, log_text(home).splitlines()) if r.type is MessageType.FORGET]
    assert set(tombstone.metadata["ids"]) == {m.record.id for m in gone.all}  # type: ignore[index]
    assert tombstone.content == "" and tombstone.metadata["target"] == f"exchange {gone_id}"  # type: ignore[index]
    assert await store.settings.get(PENDING_KEY) is None
    assert SECRET.encode() not in database_bytes(home.database_file("klaw.db"))
    # The engine merges the full-text index in the background (decision 251): nothing comes back.
    while await store.db.run(merge_step):
        pass
    assert SECRET.encode() not in database_bytes(home.database_file("klaw.db"))


async def test_forgetting_a_segment_takes_its_exchanges_and_memories_but_keeps_its_boundary(
    home: KlawHome, store: SqliteStore
) -> None:
    chat = ScriptedChat(home, store)
    first = await chat.turn(f"{SECRET} is the wifi password", reply="saved", memories=[f"wifi: {SECRET}"])
    await chat.turn(f"and the guest wifi is {SECRET}2", reply="ok")
    boundary = await chat.new_segment()
    later = await chat.turn("what is for dinner", reply="soup")
    forgetting = Forgetting(chat.ingestion, chat.tick)
    plan = await forgetting.plan(ForgetKind.SEGMENT, first.opened.segment_id, ME)
    assert plan.describe() == "4 message(s), 2 exchange(s), 1 saved memory"
    await forgetting.forget(plan)

    assert await store.exchanges.for_segment(first.opened.segment_id) == []
    assert await store.memory_chunks.count(ME) == 0
    assert await store.messages.get(boundary.record.id) is not None  # segments keep their shape
    assert [s.id for s in await store.segments.list(ME)] == [first.opened.segment_id, later.opened.segment_id]
    assert SECRET not in log_text(home) and "dinner" in log_text(home)
    with pytest.raises(ForgetError, match="nothing left to forget"):
        await forgetting.plan(ForgetKind.SEGMENT, first.opened.segment_id, ME)


async def test_forgetting_one_saved_memory_erases_it_and_the_call_that_saved_it(
    home: KlawHome, store: SqliteStore
) -> None:
    chat = ScriptedChat(home, store)
    save = ("memory_save", "Saved as memory 3.", json.dumps({"text": f" {SECRET} one "}))
    turn = await chat.turn(
        "remember two things", reply="done", tools=[save, ("current_time", "09:00")], memories=[f"{SECRET} one", "keep"]
    )
    call, result, other_call, other_result, gone, kept = turn.steps
    forgetting = Forgetting(chat.ingestion, chat.tick)
    memory_id = shown_memory_id(gone.record.id)
    with pytest.raises(ForgetError, match="no memory"):
        await forgetting.plan(ForgetKind.MEMORY, memory_id, OTHER)
    plan = await forgetting.plan(ForgetKind.MEMORY, memory_id, None)
    assert plan.label == f"memory {memory_id}"
    assert [m.rowid for m in plan.records] == [call.rowid, result.rowid, gone.rowid]
    await forgetting.forget(plan)
    assert await store.memory_chunks.get(gone.rowid) is None
    assert await store.messages.get(other_call.record.id) is not None
    assert await store.messages.get(other_result.record.id) is not None
    assert await store.memory_chunks.get(kept.rowid) is not None
    assert await store.exchanges.get(await chat.exchange_id(turn)) is not None  # the turn itself stays
    assert SECRET not in log_text(home) and '"keep"' in log_text(home)


async def test_a_replayed_forget_command_changes_nothing_twice(home: KlawHome, store: SqliteStore) -> None:
    chat = ScriptedChat(home, store)
    first = await chat.turn("one", reply="1")
    second = await chat.turn("two", reply="2")
    forgetting = Forgetting(chat.ingestion, chat.tick)
    first_plan = await forgetting.plan(ForgetKind.EXCHANGE, await chat.exchange_id(first), ME)
    done = await forgetting.forget(first_plan, record_id="command-1")
    assert done.plan is not None and await forgetting.already_done("command-1")
    second_plan = await forgetting.plan(ForgetKind.EXCHANGE, await chat.exchange_id(second), ME)
    again = await forgetting.forget(second_plan, record_id="command-1")
    assert again.plan is None and await store.exchanges.get(await chat.exchange_id(second)) is not None


async def test_reindex_after_forgetting_does_not_bring_it_back_even_from_a_restored_log(home: KlawHome) -> None:
    home.root.mkdir(parents=True)
    store = await SqliteStore.open(home.database_file("klaw.db"))
    try:
        chat = ScriptedChat(home, store)
        await chat.turn("the plumber comes on tuesday", reply="noted", memories=["plumber: tuesday"])
        gone = await chat.turn(f"the door code is {SECRET}", reply="ok", memories=[f"door {SECRET}"])
        day_files = {p: p.read_bytes() for p in home.conversations.rglob("*.jsonl")}
        forgetting = Forgetting(chat.ingestion, chat.tick)
        await forgetting.forget(await forgetting.plan(ForgetKind.EXCHANGE, await chat.exchange_id(gone), ME))
        tombstones = [line for line in log_text(home).splitlines() if '"type":"forget"' in line]
    finally:
        await store.aclose()

    await reindex(home, config())
    await assert_rebuilt_without_secret(home)

    # a backup of the log from before the forget is restored, tombstone appended to it
    for path, content in day_files.items():
        path.write_bytes(content + "".join(line + "\n" for line in tombstones).encode())
    assert SECRET in log_text(home)
    await reindex(home, config())
    await assert_rebuilt_without_secret(home)


async def assert_rebuilt_without_secret(home: KlawHome) -> None:
    store = await SqliteStore.open(home.database_file("klaw.db"))
    try:
        assert await everything_mentioning(store, SECRET) == dict.fromkeys(
            ("messages", "messages_fts", "memory_chunks", "memory_chunks_fts", "summaries"), 0
        )
        [memory] = await store.memory_chunks.full_text(ME, "plumber", limit=3)  # saved memories are rebuilt
        assert memory.chunk.content == "plumber: tuesday"
        assert await store.memory_chunks.vector_count() == 1  # and embedded by the reindex's queue
        assert len(await store.exchanges.for_segment(memory.chunk.segment_id)) == 1
    finally:
        await store.aclose()
    assert SECRET.encode() not in database_bytes(home.database_file("klaw.db"))


async def test_recovery_skips_forgotten_records_and_finishes_an_interrupted_rewrite(
    home: KlawHome, store: SqliteStore
) -> None:
    chat = ScriptedChat(home, store)
    gone = await chat.turn(f"temporary secret {SECRET}", reply="ok")
    ids = [m.record.id for m in gone.all]
    # a crash right after the tombstone was logged and folded, before the log files were rewritten
    tombstone = forget_record(ME, ids, "exchange 1", [gone.opened.record.created_at.date().isoformat()], chat.tick())
    await store.settings.set(PENDING_KEY, [tombstone.id])
    await chat.accept(tombstone)
    assert SECRET in log_text(home)

    restarted = Ingestion(ConversationLog(home.conversations), store)
    assert await restarted.recover() == 0  # the forgotten lines still in the log are not replayed
    assert await store.messages.get(ids[0]) is None
    assert await Forgetting(restarted, chat.tick).finish_pending() == 1
    assert SECRET not in log_text(home)
    assert await store.settings.get(PENDING_KEY) is None
