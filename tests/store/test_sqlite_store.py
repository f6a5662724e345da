"""The storage contract against both backends (`storage`: SQLite with sqlite-vec, and a real PostgreSQL with
pgvector), and what is SQLite's own (`store`: a real file with sqlite-vec loaded through apsw)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import apsw
import numpy as np
import pytest

from klaw.store.protocol import IndexMismatchError, Storage, VectorIndex
from klaw.store.records import ChatRef, MessageRecord, MessageType, Role
from klaw.store.shared.migrations import bundled_migrations
from klaw.store.sqlite.query import fetch_value
from klaw.store.sqlite.store import SqliteStore
from tests.conftest import StoreOpener
from tests.store.raw import message_vectors, rows

ALICE = ChatRef("console", "alice")
BOB = ChatRef("telegram", "-100200")
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def message(chat: ChatRef, text: str, minutes: int = 0, role: Role = Role.USER) -> MessageRecord:
    return MessageRecord(chat=chat, role=role, content=text, created_at=T0 + timedelta(minutes=minutes))


def unit(*values: float) -> np.ndarray:
    vector = np.zeros(8, dtype=np.float32)
    vector[: len(values)] = values
    return vector / np.linalg.norm(vector)


def test_default_python_loads_sqlite_vec_through_apsw() -> None:
    """The machine's default python3 cannot load extensions via sqlite3; apsw always can."""
    code = (
        "import apsw, sqlite_vec; c = apsw.Connection(':memory:'); c.enable_load_extension(True);"
        " c.load_extension(sqlite_vec.loadable_path()); print(c.execute('select vec_version()').fetchone()[0])"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.startswith("v0.")


async def test_migrations_from_empty_create_every_table(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "new.db")
    try:
        assert await store.schema_version() == len(bundled_migrations("klaw.store.sqlite"))
        names = await store.db.run(
            lambda c: {row[0] for row in c.execute("SELECT name FROM sqlite_master WHERE type IN ('table')")}
        )
        for table in (
            "messages",
            "messages_fts",
            "segments",
            "exchanges",
            "sessions",
            "settings",
            "embedding_jobs",
            "index_meta",
            "chats",
        ):
            assert table in names
        mode = await store.db.run(lambda c: fetch_value(c, "PRAGMA journal_mode"))
        assert mode == "wal"
    finally:
        await store.aclose()


async def test_reopening_does_not_migrate_twice(tmp_path: Path) -> None:
    path = tmp_path / "klaw.db"
    first = await SqliteStore.open(path)
    await first.messages.append(message(ALICE, "hello"))
    await first.aclose()
    second = await SqliteStore.open(path)
    try:
        rows = await second.db.run(lambda c: fetch_value(c, "SELECT count(*) FROM schema_version"))
        assert rows == len(bundled_migrations("klaw.store.sqlite"))
        assert await second.messages.count_in_segment((await second.segments.current(ALICE)).id) == 1
    finally:
        await second.aclose()


async def test_newer_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "klaw.db"
    (await SqliteStore.open(path)).db  # noqa: B018 - create it
    connection = apsw.Connection(str(path))
    connection.execute("INSERT INTO schema_version VALUES (999, '0999_future.sql', 0)")
    connection.close()
    with pytest.raises(Exception, match=r"schema version 999.*upgrade klaw"):
        await SqliteStore.open(path)


async def test_append_returns_increasing_rowids_matching_the_database(storage: Storage) -> None:
    store = storage
    stored = [await store.messages.append(message(ALICE, f"m{i}", i)) for i in range(3)]
    assert [s.rowid for s in stored] == sorted(s.rowid for s in stored)
    assert len({s.rowid for s in stored}) == 3
    actual = await rows(store, "SELECT rowid, id FROM messages ORDER BY rowid")
    assert [(s.rowid, s.record.id) for s in stored] == [tuple(row) for row in actual]


async def test_append_is_idempotent_on_message_id(storage: Storage) -> None:
    record = message(ALICE, "once")
    first = await storage.messages.append(record)
    again = await storage.messages.append(record)
    assert again.rowid == first.rowid
    assert await storage.messages.count_in_segment(first.segment_id) == 1


async def test_count_in_segment_at_most_stops_counting_there(storage: Storage) -> None:
    """The auto-RAG guard asks only "more than the window?": a bounded count answers it without
    reading the whole segment, and counts the same rows (control records are left out)."""
    first = await storage.messages.append(message(ALICE, "m0", 0))
    for i in range(1, 6):
        await storage.messages.append(message(ALICE, f"m{i}", i))
    model_switch = MessageRecord(
        ALICE, Role.SYSTEM, "", type=MessageType.MODEL_SWITCH, metadata={"model": "x"}, created_at=T0
    )
    await storage.messages.append(model_switch)
    segment = first.segment_id
    assert await storage.messages.count_in_segment(segment) == 6
    assert [await storage.messages.count_in_segment(segment, at_most=n) for n in (0, 1, 5, 6, 7, 100)] == [
        0,
        1,
        5,
        6,
        6,
        6,
    ]


async def test_window_is_last_messages_oldest_first_with_rowids(storage: Storage) -> None:
    stored = [await storage.messages.append(message(ALICE, f"m{i}", i)) for i in range(5)]
    window = await storage.messages.window(stored[0].segment_id, 3)
    assert [m.content for m in window] == ["m2", "m3", "m4"]
    assert [m.rowid for m in window] == [s.rowid for s in stored[2:]]
    assert window[0].record.created_at == T0 + timedelta(minutes=2)


async def test_window_holds_only_its_chats_messages_when_chats_interleave(storage: Storage) -> None:
    """Spec 001 Stage 4: the window is filtered by chat and segment; two chats writing in turns each
    get their own segment and a window of their own messages only."""
    alice = [await storage.messages.append(message(ALICE, f"alice {i}", 2 * i)) for i in range(3)]
    bob = [await storage.messages.append(message(BOB, f"bob {i}", 2 * i + 1)) for i in range(3)]
    assert alice[0].segment_id != bob[0].segment_id
    assert [m.rowid for m in await storage.messages.window(alice[0].segment_id, 20)] == [m.rowid for m in alice]
    assert [m.rowid for m in await storage.messages.window(bob[0].segment_id, 20)] == [m.rowid for m in bob]


async def test_session_break_starts_a_new_segment(storage: Storage) -> None:
    before = await storage.messages.append(message(ALICE, "old topic"))
    await storage.messages.append(
        MessageRecord(ALICE, Role.SYSTEM, "", type=MessageType.SESSION_BREAK, created_at=T0 + timedelta(minutes=1))
    )
    after = await storage.messages.append(message(ALICE, "new topic", 2))
    assert after.segment_id != before.segment_id
    window = await storage.messages.window(after.segment_id, 20)
    assert [m.content for m in window] == ["new topic"]
    segments = await storage.segments.list(ALICE)
    assert [s.ended_at is None for s in segments] == [False, True]
    assert segments[1].started_at == T0 + timedelta(minutes=1)
    assert (await storage.segments.current(ALICE)).id == after.segment_id


async def test_metadata_round_trips(storage: Storage) -> None:
    record = MessageRecord(ALICE, Role.ASSISTANT, "x", type=MessageType.TOOL_CALL, metadata={"tool_calls": [1]})
    await storage.messages.append(record)
    loaded = await storage.messages.get(record.id)
    assert loaded is not None
    assert loaded.record == record


async def test_full_text_is_scoped_by_chat(storage: Storage) -> None:
    await storage.messages.append(message(ALICE, "my cat is called Whiskers"))
    await storage.messages.append(message(BOB, "Bob's cat is called Tom"))
    hits = await storage.search.full_text(ALICE, "what is my cat called?", limit=10)
    assert [h.message.content for h in hits] == ["my cat is called Whiskers"]


async def test_full_text_is_scoped_by_segment_and_time(storage: Storage) -> None:
    early = await storage.messages.append(message(ALICE, "pizza in January", 0))
    await storage.messages.append(message(ALICE, "pizza in February", 60 * 24 * 31))
    late = T0 + timedelta(days=20)
    since = await storage.search.full_text(ALICE, "pizza", limit=10, since=late)
    assert [h.message.content for h in since] == ["pizza in February"]
    until = await storage.search.full_text(ALICE, "pizza", limit=10, until=late)
    assert [h.message.content for h in until] == ["pizza in January"]
    await storage.messages.append(
        MessageRecord(ALICE, Role.SYSTEM, "", type=MessageType.SESSION_BREAK, created_at=T0 + timedelta(days=40))
    )
    await storage.messages.append(message(ALICE, "pizza again", 60 * 24 * 41))
    current = await storage.segments.current(ALICE)
    scoped = await storage.search.full_text(ALICE, "pizza", limit=10, segment_id=current.id)
    assert [h.message.content for h in scoped] == ["pizza again"]
    old = await storage.search.full_text(ALICE, "pizza", limit=10, segment_id=early.segment_id)
    assert len(old) == 2


async def test_full_text_ranks_more_matching_words_first_and_stems(storage: Storage) -> None:
    await storage.messages.append(message(ALICE, "I was running in the park", 0))
    await storage.messages.append(message(ALICE, "the weather in the park was lovely", 1))
    hits = await storage.search.full_text(ALICE, "run park", limit=10)
    assert hits[0].message.content == "I was running in the park"
    assert len(hits) == 2


@pytest.mark.parametrize(
    "query",
    ['"unbalanced', "a AND OR NOT", "NEAR(x y", "col:value", "*", "(", "-minus", "a^b", "'; DROP TABLE messages;--"],
)
async def test_full_text_never_raises_on_syntax_characters(storage: Storage, query: str) -> None:
    await storage.messages.append(message(ALICE, "value minus table near x"))
    await storage.search.full_text(ALICE, query, limit=5)


async def test_full_text_without_words_returns_nothing(storage: Storage) -> None:
    await storage.messages.append(message(ALICE, "hello"))
    assert await storage.search.full_text(ALICE, "?!  ...", limit=5) == []


async def test_vectors_are_scoped_by_chat_segment_and_time(storage: Storage) -> None:
    await storage.vectors.bind_embedder("test-embedder", 8)
    a1 = await storage.messages.append(message(ALICE, "a1", 0))
    a2 = await storage.messages.append(message(ALICE, "a2", 60))
    b1 = await storage.messages.append(message(BOB, "b1", 0))
    added = await storage.vectors.put([(a1.rowid, unit(1, 0)), (a2.rowid, unit(1, 0.2)), (b1.rowid, unit(1, 0))])
    assert added == 3
    hits = await storage.search.nearest(ALICE, unit(1, 0), limit=10)
    assert [h.message.content for h in hits] == ["a1", "a2"]
    assert hits[0].score == pytest.approx(0.0, abs=1e-6)
    later = await storage.search.nearest(ALICE, unit(1, 0), limit=10, since=T0 + timedelta(minutes=30))
    assert [h.message.content for h in later] == ["a2"]
    earlier = await storage.search.nearest(ALICE, unit(1, 0), limit=10, until=T0 + timedelta(minutes=30))
    assert [h.message.content for h in earlier] == ["a1"]
    top1 = await storage.search.nearest(ALICE, unit(1, 0.2), limit=1)
    assert [h.message.content for h in top1] == ["a2"]
    await storage.messages.append(
        MessageRecord(ALICE, Role.SYSTEM, "", type=MessageType.SESSION_BREAK, created_at=T0 + timedelta(hours=2))
    )
    a3 = await storage.messages.append(message(ALICE, "a3", 180))
    await storage.vectors.put([(a3.rowid, unit(0, 1))])
    scoped = await storage.search.nearest(ALICE, unit(1, 0), limit=10, segment_id=a3.segment_id)
    assert [h.message.content for h in scoped] == ["a3"]


async def test_vec_messages_is_a_vec0_table_of_the_bound_embedder_keyed_by_message_rowid(store: SqliteStore) -> None:
    """Spec 001 Stage 2: vec_messages is a sqlite-vec table (created when the embedder is bound, since
    its size is the embedder's), and vec_messages.rowid is messages.rowid."""
    await store.vectors.bind_embedder("test-embedder", 8)
    sql = await store.db.run(lambda c: fetch_value(c, "SELECT sql FROM sqlite_master WHERE name = 'vec_messages'"))
    assert "USING vec0(" in sql and "float[8]" in sql
    meta = await store.db.run(
        lambda c: c.execute("SELECT embedder_id, dim FROM index_meta WHERE table_name = 'vec_messages'").fetchall()
    )
    assert [tuple(row) for row in meta] == [("test-embedder", 8)]
    first = await store.messages.append(message(ALICE, "first"))
    second = await store.messages.append(message(ALICE, "second", 1))
    await store.vectors.put([(second.rowid, unit(0, 1)), (first.rowid, unit(1))])
    joined = await store.db.run(
        lambda c: c.execute(
            "SELECT m.id, v.embedding FROM vec_messages v JOIN messages m ON m.rowid = v.rowid ORDER BY v.rowid"
        ).fetchall()
    )
    assert [(row[0], row[1]) for row in joined] == [
        (first.record.id, unit(1).tobytes()),
        (second.record.id, unit(0, 1).tobytes()),
    ]


async def test_putting_a_vector_twice_keeps_the_first(storage: Storage) -> None:
    await storage.vectors.bind_embedder("test-embedder", 8)
    stored = await storage.messages.append(message(ALICE, "x"))
    assert await storage.vectors.put([(stored.rowid, unit(1))]) == 1
    assert await storage.vectors.put([(stored.rowid, unit(0, 1))]) == 0
    assert await storage.vectors.count() == 1


async def test_vectors_of_another_embedder_are_refused(open_store: StoreOpener) -> None:
    store = await open_store()
    await store.vectors.bind_embedder("model-a", 8)
    stored = await store.messages.append(message(ALICE, "x"))
    await store.vectors.put([(stored.rowid, unit(1))])
    await store.aclose()
    reopened = await open_store()
    with pytest.raises(IndexMismatchError, match=r"model-a.*model-b.*klaw reindex"):
        await reopened.vectors.bind_embedder("model-b", 16)
    await reopened.vectors.bind_embedder("model-a", 8)  # the same embedder is fine


async def test_an_empty_vector_table_is_rebound_to_a_new_embedder(storage: Storage) -> None:
    await storage.vectors.bind_embedder("model-a", 8)
    await storage.vectors.bind_embedder("model-b", 4)
    stored = await storage.messages.append(message(ALICE, "x"))
    assert await storage.vectors.put([(stored.rowid, np.array([1, 0, 0, 0], dtype=np.float32))]) == 1


async def test_settings_round_trip_json(storage: Storage) -> None:
    assert await storage.settings.get("rag") is None
    await storage.settings.set("rag", {"enabled": False, "limit": 3})
    assert await storage.settings.get("rag") == {"enabled": False, "limit": 3}
    await storage.settings.set("rag", {"enabled": True})
    assert await storage.settings.get("rag") == {"enabled": True}
    await storage.settings.delete("rag")
    assert await storage.settings.get("rag") is None


async def test_counts_and_vector_indexes_answer_what_klaw_db_info_shows(storage: Storage) -> None:
    store = storage
    """The repository methods `klaw db info` and the reindex report use instead of SQL of their own."""
    assert await store.vectors.bound_embedder() is None
    assert await store.vector_indexes() == []
    hello = await store.messages.append(message(ALICE, "hello"), embed=True)
    await store.messages.append(message(BOB, "hi", 1), embed=True)
    await store.messages.append(MessageRecord(ALICE, Role.SYSTEM, "", type=MessageType.SESSION_BREAK, created_at=T0))
    await store.vectors.bind_embedder("fake-8", 8)
    await store.vectors.put([(hello.rowid, unit(1, 0))])  # pays hello's job (decision 229); hi's is still owed

    counts = await store.counts()
    assert (counts.messages, counts.control_records, counts.chats, counts.vectors) == (2, 1, 2, 1)
    assert (counts.embedding_pending, counts.embedding_failed, counts.embedding_errors) == (1, 0, ())
    table = message_vectors(store)
    assert await store.vectors.bound_embedder() == VectorIndex(table, "fake-8", 8)
    assert await store.vector_indexes() == [VectorIndex(table, "fake-8", 8)]
