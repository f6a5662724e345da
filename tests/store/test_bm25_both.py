"""Full text ranks as FTS5's bm25 on both backends (store/postgres/bm25.py): a word said once in a
short message outranks the same word said once in a long one (length normalisation), a word said
twice is not worth twice as much (saturation), and a word held by half the messages or more (a
speaker's name) adds nothing. The old PostgreSQL ranking (ts_rank_cd times a Lucene idf) ordered the
first two by rowid and let the name decide the third."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from klaw.store.records import ChatRef, MessageRecord, Role
from tests.conftest import StoreOpener

CHAT = ChatRef("console", "alice")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
FILLER = ["weather was fine today", "we went out for lunch", "the train was late again", "nothing new at work"]


async def ranked(open_store: StoreOpener, texts: list[str], query: str) -> list[str]:
    store = await open_store()
    records = [MessageRecord(CHAT, Role.USER, t, created_at=T0 + timedelta(seconds=i)) for i, t in enumerate(texts)]
    for record in records:
        await store.messages.append(record)
    hits = await store.search.full_text(CHAT, query, limit=10)
    return [hit.message.content for hit in hits]


async def test_a_short_message_outranks_a_long_one_with_the_word_once(open_store: StoreOpener) -> None:
    long = "the tomato plants by the fence grew taller than the old wooden gate this summer season"
    found = await ranked(open_store, [*FILLER, long, *FILLER, "tomato soup", *FILLER], "tomato")
    assert found[:2] == ["tomato soup", long]


async def test_a_word_held_by_half_the_messages_adds_nothing(open_store: StoreOpener) -> None:
    texts = [f"Caroline: {t}" for t in FILLER * 2] + ["Caroline: the pottery class", "Mel: pottery glaze"]
    found = await ranked(open_store, texts, "Caroline pottery")
    # Both hold "pottery"; "Caroline" (in 9 of 10) must not lift the older message above the shorter.
    assert found[:2] == ["Mel: pottery glaze", "Caroline: the pottery class"]
