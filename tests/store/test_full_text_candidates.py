"""SQLite full text ranks candidates, not every message holding a common word (decision 235): the
messages holding a rare word of the search, or two of its common ones, are scored as the full ranking
scores them, and when they fill the places asked for they are the answer; otherwise every match is
ranked as before."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path
from typing import Any, cast

import apsw
import pytest

from klaw.store.records import ChatRef, MessageRecord, Role
from klaw.store.sqlite import full_text
from klaw.store.sqlite.store import SqliteStore
from klaw.store.sqlite.term_counts import TermCounts
from tests.store.statement_trace import traced

ALICE = ChatRef("console", "alice")
FILLER = 2400  # "garden" in half of them, "water" in the other half: each held by 1,200 (> 1,000, > 1 %)


async def chat_with_orchids(store: SqliteStore, orchids: int) -> list[int]:
    """The filler, each message holding one common word, then `orchids` messages naming the orchid
    (every other one with "garden" too); their rowids."""
    texts = [f"{'garden' if i % 2 else 'water'} chat line {i}" for i in range(FILLER)]
    await store.messages.append_many([MessageRecord(ALICE, Role.USER, text) for text in texts])
    rare = [f"the orchid {'garden ' if i % 2 else ''}bloomed, note {i}" for i in range(orchids)]
    stored = await store.messages.append_many([MessageRecord(ALICE, Role.USER, text) for text in rare])
    # One more message, so the orchids are all in `messages_fts` (the last one waits in the small table).
    await store.messages.append(MessageRecord(ALICE, Role.USER, "ok"))
    return [m.rowid for m in stored]


def every_match(store: SqliteStore, text: str, limit: int) -> Any:
    """The ranking of every match (no candidates), for the chat's scope: what a search gave before."""

    def rank(connection: apsw.Connection) -> list[tuple[int, float]]:
        terms = full_text.match_terms(connection, text.split(), TermCounts())
        rows = full_text.ranked_matches(connection, terms, "m.chat = (SELECT id FROM chats)", [], None, limit)
        return [(int(row[0]), float(row[-1])) for row in rows]

    return store.db.run(rank)


def scored_rows(path: Path, statements: list[tuple[str, object]]) -> int:
    """How many rows the search's bm25 statements scored: each run again without its LIMIT (every row
    its WHERE keeps is scored to be ordered)."""
    ranking = [(sql, b) for sql, b in statements if "bm25(messages_fts" in sql and "FROM messages_fts WHERE" in sql]
    assert ranking
    connection = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return sum(len(connection.execute(sql, (*cast(tuple[Any, ...], b)[:-1], -1)).fetchall()) for sql, b in ranking)
    finally:
        connection.close()


async def test_a_rare_word_is_found_first_without_scoring_every_common_match(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ "garden" and "water" are each held by 1,200 of 2,409 messages; "orchid" by 8. Before, bm25
    scored all 2,408 messages matching any of the three to return 5; now only those holding the rare
    word are candidates (no message holds both common words), and they fill the 5 places."""
    statements = traced(monkeypatch)
    path = tmp_path / "candidates.db"
    store = await SqliteStore.open(path)
    try:
        orchids = await chat_with_orchids(store, 8)
        statements.clear()
        hits = await store.search.full_text(ALICE, "garden water orchid", limit=5)
        searched = list(statements)
        before = await every_match(store, "garden water orchid", 5)
    finally:
        await store.aclose()
    assert {hit.message.rowid for hit in hits} <= set(orchids)
    assert [(hit.message.rowid, hit.score) for hit in hits] == before  # the same hits, the same scores
    # The 8, and the message before the first, which holds "orchid" among the next message's words.
    assert scored_rows(path, searched) == 9


async def test_too_few_candidates_rank_every_match(tmp_path: Path) -> None:
    """Two messages hold the rare word: the candidates cannot fill 5 places, so every match is ranked
    (the three best common-word messages follow the orchids), as before."""
    store = await SqliteStore.open(tmp_path / "few.db")
    try:
        orchids = await chat_with_orchids(store, 2)
        hits = await store.search.full_text(ALICE, "garden water orchid", limit=5)
        before = await every_match(store, "garden water orchid", 5)
    finally:
        await store.aclose()
    assert {hit.message.rowid for hit in hits[:2]} == set(orchids)
    assert [(hit.message.rowid, hit.score) for hit in hits] == before


async def test_candidates_are_the_rows_holding_a_rare_term_or_two_common_ones_found_in_fewer_places(
    store: SqliteStore,
) -> None:
    """The candidates' expression keeps the rows every pair written out keeps, for 2 to 8 common words
    over every combination of them, and FTS5 reads each word's entries in fewer places: 8 for 4
    common words and 24 for 8, where the pairs took 12 and 56 (decision 301)."""
    words = [f"w{i}" for i in range(8)]
    texts = [" ".join(w for i, w in enumerate(words) if mask >> i & 1) or "nothing" for mask in range(256)]
    said = [f"{text} orchid" if n % 37 == 0 else text for n, text in enumerate(texts)]
    await store.messages.append_many([MessageRecord(ALICE, Role.USER, text) for text in said])
    await store.messages.append(MessageRecord(ALICE, Role.USER, "ok"))  # every row above in `messages_fts`

    def rows(connection: apsw.Connection, expression: str) -> list[int]:
        return [
            int(row[0])
            for row in connection.execute("SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", (expression,))
        ]

    def compare(connection: apsw.Connection) -> dict[int, int]:
        places = {}
        for k in range(2, 9):
            common = [f'{{content}} : "{word}"' for word in words[:k]]
            terms = ['"orchid"', *common]
            pairs = " OR ".join(['"orchid"', *(f"({a} AND {b})" for a, b in combinations(common, 2))])
            expression = full_text.candidates(terms, common)
            assert rows(connection, expression) == rows(connection, pairs)
            places[k] = expression.count("{content}")
        return places

    places = await store.db.run(compare)
    assert places[4] == 8 and places[8] == 24


async def test_candidates_weaker_than_a_common_word_said_once_give_way_to_every_match(tmp_path: Path) -> None:
    """Decision 449. "garden" is common (in 350 of 5,000 messages' own words, so in ~1,050 rows with its
    neighbours' columns); "orchid", rare, is in three long messages and, at a fifth of the weight, in
    their six neighbours' rows. Those nine candidates fill 5 places, but the fifth is a neighbour's row,
    weaker than a short message saying "garden" once: the full ranking puts garden messages there. The
    candidates are not the answer then (they were, before), and the search gives the full ranking's."""
    texts = [f"filler {i}" for i in range(5000)]
    for i in range(10, 5000, 14):
        texts[i] = f"garden {i}"
    long = " ".join(f"petal{j}" for j in range(28))
    orchids = (2001, 3003, 4005)
    for i in orchids:
        texts[i] = f"orchid {long}"
    store = await SqliteStore.open(tmp_path / "weak.db")
    try:
        stored = await store.messages.append_many([MessageRecord(ALICE, Role.USER, text) for text in texts])
        await store.messages.append(MessageRecord(ALICE, Role.USER, "ok"))
        hits = await store.search.full_text(ALICE, "garden orchid", limit=5)
        before = await every_match(store, "garden orchid", 5)
    finally:
        await store.aclose()
    said = {m.rowid: m.content for m in stored}
    assert [(hit.message.rowid, hit.score) for hit in hits] == before
    assert {hit.message.rowid for hit in hits[:3]} == {stored[i].rowid for i in orchids}
    assert [said[hit.message.rowid].split()[0] for hit in hits[3:]] == ["garden", "garden"]
