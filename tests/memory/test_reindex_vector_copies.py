"""`klaw reindex` leaves the int8 copy of each large chat saved beside the database it swaps in
(decision 236), so the first search after it reads nothing from `vec_messages`; a log on disk, a
real SQLite file with sqlite-vec, FakeEmbedder (dim 32)."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from klaw.config import EngineConfig
from klaw.home import KlawHome
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.embedder.fake import FakeEmbedder
from klaw.memory.reindex import reindex
from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.sqlite.rebuild import SqliteRebuild
from klaw.store.sqlite.store import SqliteStore
from klaw.store.sqlite.vector_snapshot import SnapshotFolder
from tests.store.statement_trace import store_statements

BIG = ChatRef("console", "me")
SMALL = ChatRef("telegram", "42")
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
MIN_ROWS = 20  # chats this large are saved (the default is 20k; small here to keep the test fast)
TOPICS = ("lighthouse keeper", "southern harbour", "mountain railway", "river ferry", "old observatory")


def config() -> EngineConfig:
    return EngineConfig.model_validate({"embedder": {"backend": "fake", "dim": 32}})


def message(chat: ChatRef, n: int) -> MessageRecord:
    text = f"tell me everything about the {TOPICS[n % len(TOPICS)]} and what happened there on day {n} of the year"
    return MessageRecord(chat, Role.USER, text, created_at=T0 + timedelta(minutes=n), id=f"{chat.chat_id}-{n}")


@pytest.fixture
def home(tmp_path: Path) -> KlawHome:
    home = KlawHome(tmp_path / "home")
    home.root.mkdir()
    return home


async def open_store(live: Path) -> SqliteStore:
    store = await SqliteStore.open(live, vector_cache_bytes=64 << 20, vector_snapshot_min_rows=MIN_ROWS)
    embedder = FakeEmbedder(32)
    await store.vectors.bind_embedder(embedder.model_id, embedder.dim)
    return store


async def test_after_a_reindex_the_large_chat_is_searched_from_its_saved_copy(home: KlawHome) -> None:
    log = ConversationLog(home.conversations)
    await log.append_many([message(BIG, n) for n in range(40)] + [message(SMALL, n) for n in range(5)])
    live = home.database_file("klaw.db")
    report = await reindex(home, config(), backend=SqliteRebuild(live, copy_min_rows=MIN_ROWS))
    assert report.counts.vectors == 45

    folder = SnapshotFolder.beside(live)
    assert sorted(p.name for p in folder.path.iterdir()) == ["chat-1"]  # the large chat only
    assert not SnapshotFolder.beside(live.with_name("klaw.db.reindex")).path.exists()
    query = (await FakeEmbedder(32).embed(["what about the river ferry on day 13"]))[0]

    unsaved = live.with_name("unsaved.db")  # the same database without saved copies: read from the table
    shutil.copy(live, unsaved)
    fresh = await open_store(unsaved)
    try:
        expected = [(h.message.rowid, h.score) for h in await fresh.search.nearest(BIG, query, limit=10)]
    finally:
        await fresh.aclose()
    store = await open_store(live)
    try:
        statements = await store_statements(store)
        hits = await store.search.nearest(BIG, query, limit=10)
        assert [(h.message.rowid, h.score) for h in hits] == expected
        # Loaded from the saved copy: neither vec0's rows nor its chunks were read.
        assert [sql for sql in statements if "vec_messages WHERE chat_key" in sql or "_chunks" in sql] == []
        view = store.vector_cache.cached_view(1, 32)
        assert view is not None and len(view) == 40 and np.all(np.diff(view.rowids) > 0)
    finally:
        await store.aclose()
