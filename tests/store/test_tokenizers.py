"""Full-text search with each tokenizer a home may use (`database.tokenizer`), on a real SQLite file:
a Chinese word found inside a sentence (trigram), a name shorter than a trigram found by substring,
Russian words kept whole (unicode61), the index bound to its tokenizer, and no text a person types
able to raise an FTS5 syntax error whatever the tokenizer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from klaw.config import FullTextTokenizer
from klaw.store.protocol import IndexMismatchError
from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.sqlite.fts_query import search_terms
from klaw.store.sqlite.store import SqliteStore
from klaw.store.sqlite.tokenizers import indexed_tokenizer

ME = ChatRef("console", "me")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
CHINESE = [
    "上周我们在全聚德吃了北京烤鸭，味道很好。",
    "我妹妹的狗叫旺财，是一只灰色的小猎犬。",
    "明天要下雨，记得带伞。",
]
# "бегали" is not next to "Бег": a message is also found by its neighbours' words (full_text.py).
RUSSIAN = ["Мы бегали в парке всё утро.", "Собаку моей сестры зовут Шарик.", "Бег по утрам полезен."]


async def opened(path: Path, tokenizer: FullTextTokenizer, texts: list[str]) -> SqliteStore:
    store = await SqliteStore.open(path, tokenizer=tokenizer)
    records = [MessageRecord(ME, Role.USER, text, created_at=T0 + timedelta(seconds=i)) for i, text in enumerate(texts)]
    await store.messages.append_many(records)
    return store


async def found(store: SqliteStore, text: str) -> list[str]:
    return [hit.message.content for hit in await store.search.full_text(ME, text, limit=5)]


@pytest.fixture
async def chinese(tmp_path: Path) -> AsyncIterator[SqliteStore]:
    store = await opened(tmp_path / "zh.db", "trigram", CHINESE)
    yield store
    await store.aclose()


async def test_trigram_finds_a_chinese_word_inside_a_sentence(chinese: SqliteStore, tmp_path: Path) -> None:
    # (The message after it is found too, below it: its full-text entry holds the previous message's words.)
    assert (await found(chinese, "北京烤鸭"))[0] == CHINESE[0]
    assert CHINESE[2] not in await found(chinese, "北京烤鸭")
    assert (await found(chinese, "你们吃过北京烤鸭吗？"))[0] == CHINESE[0]  # a question around the word
    # porter, the English default, keeps each clause as one word: the same search finds nothing.
    english = await opened(tmp_path / "en.db", "porter", CHINESE)
    try:
        assert await found(english, "北京烤鸭") == []
    finally:
        await english.aclose()


async def test_trigram_finds_a_name_shorter_than_three_characters_by_substring(chinese: SqliteStore) -> None:
    assert await found(chinese, "旺财") == [CHINESE[1]]
    assert await found(chinese, "旺财?") == [CHINESE[1]]
    segment = (await chinese.segments.current(ME)).id
    counts = await chinese.search.word_counts(ME, "旺财 烤鸭店", max_share=0.0, min_cap=10, segment_id=segment)
    assert counts.counts == {"旺财": 1, "烤鸭店": 0}


async def test_unicode61_keeps_russian_words_whole_without_english_stemming(tmp_path: Path) -> None:
    store = await opened(tmp_path / "ru.db", "unicode61", RUSSIAN)
    try:
        assert (await found(store, "Как зовут собаку?"))[0] == RUSSIAN[1]
        assert (await found(store, "шарик"))[0] == RUSSIAN[1]  # case folded
        assert (await found(store, "бег"))[0] == RUSSIAN[2]  # a whole word: "бегали" is another
        assert RUSSIAN[0] not in await found(store, "бег")
    finally:
        await store.aclose()


def test_trigram_terms_cut_unspaced_runs_and_keep_latin_words_apart() -> None:
    assert search_terms("北京烤鸭", "trigram") == ["北京烤", "京烤鸭"]
    assert search_terms("我的猫叫Mimi", "trigram") == ["我的猫", "的猫叫", "mimi"]
    assert search_terms("北京烤鸭", "porter") == ["北京烤鸭"]


async def test_an_empty_database_takes_the_configured_tokenizer_and_a_filled_one_refuses(tmp_path: Path) -> None:
    path = tmp_path / "klaw.db"
    store = await SqliteStore.open(path)  # made with porter
    await store.aclose()
    store = await opened(path, "trigram", CHINESE)  # nothing indexed yet: switched
    assert await store.db.run(indexed_tokenizer) == "trigram"
    assert await store.db.run(lambda c: indexed_tokenizer(c, "memory_chunks_fts")) == "trigram"
    await store.aclose()
    with pytest.raises(IndexMismatchError) as refused:
        await SqliteStore.open(path, tokenizer="porter")
    message = str(refused.value)
    assert "uses the trigram tokenizer" in message and "database.tokenizer: porter" in message
    assert "klaw reindex" in message
    store = await SqliteStore.open(path, tokenizer="trigram")  # the file was left as it was
    assert (await found(store, "北京烤鸭"))[0] == CHINESE[0]
    await store.aclose()


TOKENIZERS: list[FullTextTokenizer] = ["porter", "unicode61", "trigram"]


async def search_everything(store: SqliteStore, text: str, segment: int) -> None:
    await store.search.full_text(ME, text, limit=5, segment_id=segment)
    await store.search.full_text(ME, text, limit=5)
    await store.search.word_counts(ME, text, max_share=0.02, min_cap=2, segment_id=segment)
    await store.memory_chunks.full_text(ME, text, limit=5)


@pytest.mark.parametrize("tokenizer", TOKENIZERS)
def test_no_typed_text_raises_whatever_the_tokenizer(tmp_path: Path, tokenizer: FullTextTokenizer) -> None:
    """Property: any text (quotes, FTS5 operators, lone marks, any script) searches without an error."""
    loop = asyncio.new_event_loop()
    try:
        texts = [*CHINESE, *RUSSIAN, 'the "deploy" plan: NEAR(a b) -x* {col} ^start']
        store = loop.run_until_complete(opened(tmp_path / "any.db", tokenizer, texts))
        segment = loop.run_until_complete(store.segments.current(ME)).id

        @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
        @given(st.text(max_size=40) | st.sampled_from(['"', '""', "a*", "NEAR(", "{x}:", "旺", "北京", "-", "^"]))
        def typed(text: str) -> None:
            loop.run_until_complete(search_everything(store, text, segment))

        typed()
        loop.run_until_complete(store.aclose())
    finally:
        loop.close()


async def test_a_name_said_in_another_form_is_counted_and_not_taken_for_unknown(tmp_path: Path) -> None:
    """Without a stemmer, "Шарика" (genitive) must still count the message saying "Шарик": a name
    counted as never said shuts meaning out of past-conversation recall (memory/unknown_names.py)."""
    from klaw.memory.unknown_names import unknown_names
    from klaw.memory.word_evidence import WordScope

    for tokenizer in ("unicode61", "trigram"):
        store = await opened(tmp_path / f"{tokenizer}.db", tokenizer, RUSSIAN)
        try:
            counts = await store.search.word_counts(ME, "Шарика Шарику Мурзика", max_share=0.0, min_cap=10)
            assert counts.counts == {"шарика": 1, "шарику": 1, "мурзика": 0}, tokenizer
            assert await unknown_names(store, WordScope(ME), "А как там у Шарика дела?") == (), tokenizer
            assert await unknown_names(store, WordScope(ME), "А как там у Мурзика дела?") == ("мурзика",), tokenizer
        finally:
            await store.aclose()
