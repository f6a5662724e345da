"""A search scoped to a chat's past conversations (`before_segment_id`: its segments before one) finds
their messages only, whatever another chat said in between, on both backends: full text, vectors and
word counts (decision 187)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from klaw.store.protocol import Storage
from klaw.store.records import ChatRef, MessageRecord, MessageType, Role, StoredMessage

ALICE = ChatRef("console", "alice")
BOB = ChatRef("console", "bob")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
DIM = 8


class Chats:
    """Messages a minute apart, each with a vector of its own."""

    def __init__(self, store: Storage) -> None:
        self.store = store
        self.minute = 0

    async def say(self, chat: ChatRef, text: str, role: Role = Role.USER) -> StoredMessage:
        self.minute += 1
        stored = await self.store.messages.append(
            MessageRecord(chat, role, text, created_at=T0 + timedelta(minutes=self.minute))
        )
        vector = np.zeros(DIM, dtype=np.float32)
        vector[self.minute % DIM] = 1.0
        await self.store.vectors.put([(stored.rowid, vector)])
        return stored

    async def new_segment(self, chat: ChatRef) -> int:
        self.minute += 1
        await self.store.messages.append(
            MessageRecord(
                chat, Role.SYSTEM, "", type=MessageType.SESSION_BREAK, created_at=T0 + timedelta(minutes=self.minute)
            )
        )
        return (await self.store.segments.current(chat)).id


async def test_the_past_of_a_chat_is_its_earlier_segments_and_nothing_else(storage: Storage) -> None:
    await storage.vectors.bind_embedder("test", DIM)
    chats = Chats(storage)
    naples = await chats.say(ALICE, "pizza in Naples")
    await chats.say(ALICE, "the oven was wood-fired", Role.ASSISTANT)  # found by its neighbour's words
    await chats.say(BOB, "pizza in Turin")  # another chat, between Alice's segments
    second = await chats.new_segment(ALICE)
    rome = await chats.say(ALICE, "pizza in Rome")
    await chats.say(BOB, "pizza in Genoa")
    current = await chats.new_segment(ALICE)
    await chats.say(ALICE, "pizza in Milan")  # the current segment: not the past
    await chats.say(BOB, "pizza in Bari")

    async def found(before: int) -> tuple[set[str], set[str], tuple[int, int]]:
        by_words = await storage.search.full_text(ALICE, "pizza", limit=10, before_segment_id=before)
        by_vector = await storage.search.nearest(
            ALICE, np.ones(DIM, dtype=np.float32), limit=10, before_segment_id=before
        )
        counts = await storage.search.word_counts(ALICE, "pizza", max_share=0.0, min_cap=10, before_segment_id=before)
        return (
            {hit.message.content for hit in by_words if hit.message.content.startswith("pizza")},
            {hit.message.content for hit in by_vector if hit.message.content.startswith("pizza")},
            (counts.messages, counts.counts["pizza"]),
        )

    assert await found(current) == ({"pizza in Naples", "pizza in Rome"}, {"pizza in Naples", "pizza in Rome"}, (3, 2))
    assert await found(second) == ({"pizza in Naples"}, {"pizza in Naples"}, (2, 1))
    assert await found(naples.segment_id) == (set(), set(), (0, 0))  # the chat's first segment has no past
    left_out = await storage.search.word_counts(
        ALICE, "pizza", max_share=0.0, min_cap=10, before_segment_id=current, exclude=[rome.rowid]
    )
    assert (left_out.messages, left_out.counts["pizza"]) == (2, 1)
