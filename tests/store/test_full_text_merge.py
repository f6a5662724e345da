"""The full-text index is merged after bulk appends (decision 251): by `klaw reindex` before the file goes
live, and by the engine in the background. Real SQLite files; the segment count is FTS5's own
structure record. Each transaction of appends writes a segment of its own, so a history appended
in several transactions is in several segments until something merges them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from klaw.config import EngineConfig
from klaw.engine.full_text_upkeep import FullTextUpkeep
from klaw.home import KlawHome
from klaw.memory.conversation_log import ConversationLog
from klaw.memory.reindex import reindex
from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.sqlite.fts_merge import merge_step, segment_count
from klaw.store.sqlite.store import SqliteStore

CHAT = ChatRef("console", "me")
T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
WORDS = ["harbour", "lighthouse", "keeper", "storm", "orchid", "garden", "ferry", "island", "diary", "boat"]
BATCHES = 6


def day_of_messages(day: int, count: int = 12) -> list[MessageRecord]:
    """`count` messages of day `day`, alternating roles, each naming a few of `WORDS`."""
    start = T0 + timedelta(days=day)
    return [
        MessageRecord(
            CHAT,
            Role.USER if n % 2 == 0 else Role.ASSISTANT,
            f"{WORDS[(day + n) % len(WORDS)]} and the {WORDS[(day * 3 + n) % len(WORDS)]} on day {day} note {n}",
            created_at=start + timedelta(minutes=n),
            id=f"m-{day}-{n}",
        )
        for n in range(count)
    ]


async def segments(store: SqliteStore) -> int:
    return await store.db.run(segment_count)


async def filled(path: Path) -> SqliteStore:
    """A store whose messages were appended in `BATCHES` transactions, as `klaw reindex` and a
    turn's appends write them."""
    store = await SqliteStore.open(path, vector_cache_bytes=0)
    for day in range(BATCHES):
        await store.messages.append_many(day_of_messages(day))
    return store


async def hits(store: SqliteStore, text: str) -> list[tuple[str, float]]:
    found = await store.search.full_text(CHAT, text, limit=20)
    return [(hit.message.record.id, hit.score) for hit in found]


async def test_merge_steps_leave_fewer_segments_and_the_same_answers(tmp_path: Path) -> None:
    store = await filled(tmp_path / "klaw.db")
    try:
        before = await segments(store)
        answers = {text: await hits(store, text) for text in ("orchid garden", "storm island ferry", "keeper")}
        steps = 0
        while await store.db.run(merge_step):
            steps += 1
        assert before >= BATCHES - 1  # one segment a transaction (a level of 16 is merged by FTS5 itself)
        assert steps >= 1
        assert await segments(store) == 1
        for text, expected in answers.items():
            assert await hits(store, text) == expected  # the same messages with the same bm25 scores
        assert not await store.db.run(merge_step)  # nothing left: the next check is a no-op
    finally:
        await store.aclose()


async def test_the_engines_upkeep_merges_in_the_background(tmp_path: Path) -> None:
    store = await filled(tmp_path / "klaw.db")
    upkeep = FullTextUpkeep(store.db, interval=3600.0, pause=0.0)
    try:
        assert await segments(store) > 1
        upkeep.start()
        for _ in range(500):  # no time asserted: the task is given the loop until it has merged
            if await segments(store) == 1:
                break
            await asyncio.sleep(0.01)
        assert await segments(store) == 1
        assert upkeep.steps >= 1
    finally:
        await upkeep.stop()
        await store.aclose()


async def test_no_merge_step_starts_while_a_turn_is_under_way(tmp_path: Path) -> None:
    """While the engine says a turn is under way the upkeep waits; once none is, it merges."""
    store = await filled(tmp_path / "klaw.db")
    turning = True
    upkeep = FullTextUpkeep(store.db, interval=3600.0, pause=0.0, busy=lambda: turning)
    try:
        before = await segments(store)
        upkeep.start()
        for _ in range(50):  # the task is given the loop many times over
            await asyncio.sleep(0.01)
        assert upkeep.steps == 0 and await segments(store) == before
        turning = False
        for _ in range(500):
            if await segments(store) == 1:
                break
            await asyncio.sleep(0.01)
        assert await segments(store) == 1
    finally:
        await upkeep.stop()
        await store.aclose()


def config(**overrides: Any) -> EngineConfig:
    return EngineConfig.model_validate({"embedder": {"backend": "fake", "dim": 32}, **overrides})


@pytest.fixture
def klaw_home(tmp_path: Path) -> KlawHome:
    home = KlawHome(tmp_path / "home")
    home.root.mkdir()
    return home


async def test_reindex_leaves_the_full_text_index_merged(klaw_home: KlawHome) -> None:
    """`klaw reindex` appends each day of the log in transactions of its own; the file that goes live
    is in one segment, so the first searches after a reindex do not read one a day."""
    log = ConversationLog(klaw_home.conversations)
    for day in range(BATCHES):
        await log.append_many(day_of_messages(day))
    cfg = config()
    await reindex(klaw_home, cfg)
    store = await SqliteStore.open(klaw_home.database_file(cfg.database.path), vector_cache_bytes=0)
    try:
        assert await segments(store) == 1
        assert [m for m, _ in await hits(store, "orchid")]  # still found
    finally:
        await store.aclose()
