"""`search.word_counts`: how many conversation messages of a scope hold each search word in their own
text (stemmed as full text is), never counting other chats, other segments, the excluded rowids or
tool records, and stopping past the cap."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, MessageRecord, MessageType, Role
from klaw.store.sqlite.store import SqliteStore

ALICE = ChatRef("console", "alice")
BOB = ChatRef("telegram", "bob")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


_tick = iter(range(1, 10**6))


async def say(
    store: Storage, chat: ChatRef, text: str, *, role: Role = Role.USER, type: MessageType = MessageType.TEXT
) -> int:
    record = MessageRecord(chat, role, text, type=type, created_at=T0 + timedelta(seconds=next(_tick)))
    return (await store.messages.append(record)).rowid


async def test_counts_per_word_within_the_scope(storage: Storage) -> None:
    fact = await say(storage, ALICE, "my sister's dog is called Zorblax")
    await say(storage, ALICE, "the dogs barked all night")
    await say(storage, ALICE, "the dog park again")
    await say(storage, BOB, "zorblax zorblax dog")  # another chat
    await say(storage, ALICE, "zorblax", type=MessageType.TOOL_RESULT, role=Role.TOOL)  # not a conversation message
    segment = (await storage.segments.current(ALICE)).id
    found = await storage.search.word_counts(ALICE, "Zorblax? the dog!", max_share=0.0, min_cap=10, segment_id=segment)
    assert found.messages == 3
    assert found.counts == {"zorblax": 1, "dog": 3}  # "dogs" counts as "dog"; "the" is a stop word
    without = await storage.search.word_counts(ALICE, "zorblax", max_share=0.0, min_cap=10, exclude=[fact])
    assert (without.messages, without.counts) == (2, {"zorblax": 0})


async def test_counting_stops_past_the_cap(storage: Storage) -> None:
    for i in range(30):
        await say(storage, ALICE, f"the weather again, day {i}")
    found = await storage.search.word_counts(ALICE, "weather", max_share=0.1, min_cap=2)
    assert found.messages == 30
    assert found.counts == {"weather": 4}  # cap 3 (a tenth of 30), counted no further than one past it


async def test_an_unknown_chat_or_segment_counts_nothing(storage: Storage) -> None:
    await say(storage, ALICE, "zorblax")
    assert (await storage.search.word_counts(BOB, "zorblax", max_share=0.1, min_cap=2)).counts == {"zorblax": 0}
    assert (await storage.search.word_counts(ALICE, "zorblax", max_share=0.1, min_cap=2, segment_id=99)).counts == {
        "zorblax": 0
    }


async def test_a_segments_size_is_kept_by_the_database_through_inserts_deletes_and_refiling(
    store: SqliteStore,
) -> None:
    """The segment's conversation messages are counted by triggers (migration 0006), so the gate
    reads one row instead of the whole segment: the kept count equals a fresh count through inserts,
    tool and control records, an excluded rowid, a delete (`/forget`) and a row moved to another
    segment, and another chat's segment reads as empty."""
    rowids = [await say(store, ALICE, f"note {i} about the garden") for i in range(6)]
    await say(store, ALICE, "garden", type=MessageType.TOOL_RESULT, role=Role.TOOL)
    await say(store, ALICE, "", type=MessageType.EXCHANGE_OPEN, role=Role.SYSTEM)
    segment = (await store.segments.current(ALICE)).id

    async def sizes(exclude: list[int]) -> tuple[int, int]:
        kept = await store.search.word_counts(
            ALICE, "garden", max_share=0.0, min_cap=10, segment_id=segment, exclude=exclude
        )
        fresh = await store.search.word_counts(
            ALICE,
            "garden",
            max_share=0.0,
            min_cap=10,
            segment_id=segment,
            exclude=exclude,
            until=T0 + timedelta(days=1),
        )  # with `until`, the size is counted row by row
        return kept.messages, fresh.messages

    assert await sizes([]) == (6, 6)
    assert await sizes([rowids[0], rowids[1], 10**9]) == (4, 4)
    await store.db.run(lambda c: c.execute("DELETE FROM messages WHERE rowid = ?", (rowids[2],)))
    assert await sizes([]) == (5, 5)
    other = await store.db.run(
        lambda c: c.execute("INSERT INTO segments (chat, started_at) VALUES (1, 0) RETURNING id").fetchall()[0][0]
    )
    await store.db.run(lambda c: c.execute("UPDATE messages SET segment_id = ? WHERE rowid = ?", (other, rowids[3])))
    assert await sizes([]) == (4, 4)
    kept = await store.db.run(
        lambda c: c.execute("SELECT conversation_messages FROM segments WHERE id = ?", (segment,)).fetchall()
    )
    assert kept == [(4,)]
    await say(store, BOB, "garden")
    bobs = (await store.segments.current(BOB)).id
    found = await store.search.word_counts(ALICE, "garden", max_share=0.0, min_cap=10, segment_id=bobs)
    assert found.messages == 0
