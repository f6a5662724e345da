"""`full_text.ranked_matches`: the fast path (best matches of the index first, then scope) gives
exactly what the plain join-filter-sort query gives, including when other chats crowd it out; and
`match_terms`: a very common word is matched in messages' own words only, and the counts that
decide it, kept between searches, answer as fresh counts would through inserts and deletes."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime, timedelta

import apsw
import pytest

from klaw.store.records import ChatRef, MessageRecord, MessageType, Role
from klaw.store.shared.rows import MESSAGE_COLUMNS
from klaw.store.sqlite import full_text
from klaw.store.sqlite.fts_query import fts5_match_expression
from klaw.store.sqlite.full_text import _BM25, _WEIGHTS, FAST_MINIMUM
from klaw.store.sqlite.last_messages import last_scores
from klaw.store.sqlite.query import fetch_all
from klaw.store.sqlite.store import SqliteStore
from klaw.store.sqlite.term_counts import TermCounts

ALICE = ChatRef("console", "alice")
BOB = ChatRef("telegram", "bob")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


async def say(store: SqliteStore, chat: ChatRef, texts: list[str]) -> list[int]:
    records = [
        MessageRecord(chat, Role.USER, text, created_at=T0 + timedelta(seconds=i)) for i, text in enumerate(texts)
    ]
    return [m.rowid for m in await store.messages.append_many(records)]


async def exact(store: SqliteStore, chat: ChatRef, text: str, limit: int, segment_id: int | None = None) -> list[int]:
    """The plain query: every match joined to `messages`, filtered, sorted."""
    scope = "m.chat = (SELECT id FROM chats WHERE channel = ? AND chat_id = ?)"
    params: list[object] = [chat.channel, chat.chat_id]
    if segment_id is not None:
        scope += " AND m.segment_id = ?"
        params.append(segment_id)
    sql = (
        f"SELECT {MESSAGE_COLUMNS}, {_BM25} AS score FROM messages_fts JOIN messages m ON m.rowid = messages_fts.rowid"
        f" WHERE messages_fts MATCH ? AND {scope} ORDER BY score, m.rowid LIMIT ?"
    )
    expression = fts5_match_expression(text)
    assert expression is not None

    def plain(c: apsw.Connection) -> list[tuple[float, int]]:
        ranked = [(float(row[-1]), int(row[0])) for row in fetch_all(c, sql, (expression, *params, limit))]
        # The open segments' last messages, scored with `messages_fts`'s statistics (test_last_messages.py).
        last = last_scores(c, expression.split(" OR "), None, _WEIGHTS)
        marks = ",".join("?" * len(last))
        kept = fetch_all(c, f"SELECT m.rowid FROM messages m WHERE m.rowid IN ({marks}) AND {scope}", (*last, *params))
        return sorted([*ranked, *((last[row[0]], int(row[0])) for row in kept)])[:limit]

    return [rowid for _, rowid in await store.db.run(plain)]


async def fast(store: SqliteStore, chat: ChatRef, text: str, limit: int, segment_id: int | None = None) -> list[int]:
    return [h.message.rowid for h in await store.search.full_text(chat, text, limit=limit, segment_id=segment_id)]


async def test_matches_the_plain_query_when_the_chat_has_enough_matches(store: SqliteStore) -> None:
    await say(store, ALICE, [f"garden note {i} " + "tomato " * (i % 5) for i in range(60)])
    assert await fast(store, ALICE, "tomato garden", 20) == await exact(store, ALICE, "tomato garden", 20)


async def test_matches_the_plain_query_when_another_chat_crowds_the_best_matches(store: SqliteStore) -> None:
    # Bob's messages match better (short, the word twice) and outnumber what the fast path reads.
    await say(store, BOB, ["tomato tomato"] * (FAST_MINIMUM + 50))
    mine = await say(store, ALICE, [f"a long note about the garden and one tomato, number {i}" for i in range(30)])
    found = await fast(store, ALICE, "tomato", 20)
    assert found == await exact(store, ALICE, "tomato", 20)
    assert len(found) == 20 and set(found) <= set(mine)


async def test_a_segment_search_reads_only_that_segments_rowids_and_matches_the_plain_query(
    store: SqliteStore,
) -> None:
    await say(store, ALICE, [f"old tomato talk {i}" for i in range(40)])
    await store.messages.append(MessageRecord(ALICE, Role.SYSTEM, "", type=MessageType.SESSION_BREAK, created_at=T0))
    segment = (await store.segments.current(ALICE)).id
    newer = await say(store, ALICE, ["fresh tomato salad", "nothing here", "tomato soup again"])
    found = await fast(store, ALICE, "tomato", 10, segment)
    assert found == await exact(store, ALICE, "tomato", 10, segment)
    assert set(found) == set(newer) and found[-1] == newer[1]  # "nothing here" only by its context


async def test_an_empty_or_unknown_segment_finds_nothing(store: SqliteStore) -> None:
    await say(store, ALICE, ["tomato"])
    assert await fast(store, ALICE, "tomato", 5, segment_id=999) == []


async def test_a_word_in_many_messages_is_matched_in_their_own_words_only(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(full_text, "CONTEXT_MAX_MATCHES", 3)
    # Another chat's messages keep "tea" under half of the index (a word in half or more is left out
    # of the search altogether: the next test).
    await say(store, BOB, ["good morning", "see you", "on my way", "ok"])
    rowids = await say(store, ALICE, ["tea time", "tea again", "more tea", "tea please", "lovely pottery", "thanks"])
    # "tea" is in 4 messages' own words (> 3): only those match it, not the message after the last one.
    assert sorted(await fast(store, ALICE, "tea", 10)) == rowids[:4]
    # "pottery" is rare: the messages around it match through their context and following columns, below it.
    pottery = await fast(store, ALICE, "pottery", 10)
    assert pottery[0] == rowids[4] and set(pottery) == set(rowids[3:6])
    expression = await store.db.run(lambda c: " OR ".join(full_text.match_terms(c, ["tea", "pottery"], TermCounts())))
    assert expression == '{content} : "tea" OR "pottery"'


async def test_a_word_in_half_the_index_or_more_is_left_out_of_the_search(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bm25 weighs such a word 1e-6 (its idf is at most 0): it cannot change which messages rank
    first, and scoring its matches was most of a search's time at 100k messages. Alone, it is kept."""
    monkeypatch.setattr(full_text, "CONTEXT_MAX_MATCHES", 3)
    texts = ["garden party", "garden gnome", "the garden", "garden tools", "a rare orchid", "garden hose"]
    rowids = await say(store, ALICE, [*texts, "garden bench", "garden bench again"])
    expression = await store.db.run(lambda c: " OR ".join(full_text.match_terms(c, ["garden", "orchid"], TermCounts())))
    assert expression == '"orchid"'
    # The message that holds the rare word, and the ones around it through their context and following columns.
    orchid = await fast(store, ALICE, "garden orchid", 10)
    assert orchid[0] == rowids[4] and set(orchid) == set(rowids[3:6])
    alone = await store.db.run(lambda c: " OR ".join(full_text.match_terms(c, ["garden"], TermCounts())))
    assert alone == '{content} : "garden"'
    assert len(await fast(store, ALICE, "garden", 10)) == 7


async def test_kept_counts_answer_as_fresh_counts_through_inserts_and_deletes(
    store: SqliteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search's own memo (store/sqlite/term_counts.py) is asked each time: a word pushed over half
    the index by inserts is left out, pushed back under it by other inserts is searched again (the
    kept count no longer decides: it is counted again), and after a delete (`/forget`) counts again
    rather than trusting a count that can only have grown."""
    monkeypatch.setattr(full_text, "CONTEXT_MAX_MATCHES", 3)

    kept = TermCounts()  # what each read thread of the search keeps

    async def expression() -> str:
        return await store.db.run(lambda c: " OR ".join(full_text.match_terms(c, ["garden", "orchid"], kept)))

    await say(store, BOB, ["good morning", "ok"])
    await say(store, ALICE, ["garden a", "a rare orchid"])
    assert await expression() == '"garden" OR "orchid"'
    gardens = await say(store, ALICE, [f"garden {i}" for i in range(4)])  # 5 of 8 messages
    assert await expression() == '"orchid"'
    await say(store, BOB, [f"note {i}" for i in range(6)])  # 5 of 14
    assert await expression() == '{content} : "garden" OR "orchid"'
    await store.db.run(
        lambda c: c.execute("DELETE FROM messages WHERE rowid IN (?, ?)", (gardens[0], gardens[1]))
    )  # 3 of 12: no longer over CONTEXT_MAX_MATCHES
    assert await expression() == '"garden" OR "orchid"'
    assert await fast(store, ALICE, "garden orchid", 10) == await exact(store, ALICE, "garden orchid", 10)

    def rolled_back(connection: apsw.Connection) -> None:
        with contextlib.suppress(RuntimeError), connection:
            connection.execute("DELETE FROM messages WHERE rowid = ?", (gardens[2],))
            raise RuntimeError("rolled back")

    await store.db.run(rolled_back)
    # bm25's N, kept by the triggers of `message_counts` (migration 0012), is the table's count through
    # inserts, deletes and a rollback.
    kept_rows = await store.db.run(kept.refresh)
    assert kept_rows == await store.db.run(lambda c: fetch_all(c, "SELECT count(*) FROM messages")[0][0]) == 12
