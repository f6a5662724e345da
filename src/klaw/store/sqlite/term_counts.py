"""How many messages hold a word in their own text, remembered between searches while only inserts happen.

`full_text.match_expression` asks two questions of every word searched: "held by more than
`CONTEXT_MAX_MATCHES` messages?" and, for such a word, "held by half the index or more?". Each is a
count through FTS5 that reads the word's matches one by one, and the second reads up to half the
index: ~9 ms per search at 100k messages for a word every message holds, asked again on every turn
(docs/decisions/196-term-count-memo.md).

Between two searches the index mostly only grows, and then a count can only grow, by at most the
rows added. So a count taken once is kept with the index's size at the time, and a later question
is answered from it whenever the bounds decide it: a word counted above the bound is still above
it; a word counted exactly at `c` with `k` rows added since holds at most `c + k`. Only an answer
the bounds cannot decide counts again. That is exact, never an estimate: the answers are those a
fresh count would give.

What the bounds need is kept by triggers in `message_counts` (migration 0012): the index's size
(bm25's N, every `messages` row) and the deletes ever made, in the same transactions as the rows (a
rollback takes them back too), so the snapshot a search reads holds the numbers that are true of
it. A delete (`/forget`) breaks the bounds (a count can fall, a rowid can be reused), so any delete
empties the memo. Full text runs on the read connections (decision 216), each thread with a memo of
its own: one thread's snapshots only move forward, which the bounds need. (Before migration 0012
TEMP triggers of the engine's connection kept the two numbers, readable only there.)

`at_least` keeps a second kind of count, for the common-word filter's check (decision 449): the rows
of `messages_fts` matching a phrase with its column filter, bm25's n, from which its idf is bounded.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import apsw

from klaw.store.sqlite.query import fetch_one, fetch_value

KEPT_TERMS = 4096
RECOUNT_GROWTH = 0.01  # a phrase's rows are counted again once the index has grown by this share


@dataclass(frozen=True, slots=True)
class _Rows:
    held: int  # rows of `messages_fts` matching the phrase when counted
    rows: int  # messages in the index then


@dataclass(frozen=True, slots=True)
class _Count:
    held: int  # messages holding the term, exact when below `limit`, else at least `limit`
    limit: int  # the count stopped here
    rows: int  # messages in the index when counted


class TermCounts:
    """One thread's memo of `{content} : term` counts, valid while no message is deleted."""

    def __init__(self) -> None:
        self._counts: OrderedDict[str, _Count] = OrderedDict()
        self._phrases: OrderedDict[str, _Rows] = OrderedDict()
        self._deletes: int | None = None  # None: never refreshed
        self._rows = 0

    def refresh(self, connection: apsw.Connection) -> int:
        """The index's size (bm25's N: every `messages` row), forgetting every count if a message was
        deleted since the last refresh; call once per search, in the same snapshot, before `more_than`."""
        row = fetch_one(connection, "SELECT rows, deletes FROM message_counts")
        rows, deletes = (0, 0) if row is None else (int(row[0]), int(row[1]))
        if deletes != self._deletes or rows < self._rows:
            self._counts.clear()
            self._phrases.clear()
            self._deletes = deletes
        self._rows = rows
        return rows

    @property
    def rows(self) -> int:
        """The index's size at the last `refresh`."""
        return self._rows

    def more_than(self, connection: apsw.Connection, term: str, bound: int, *, exact: bool = False) -> bool:
        """Whether more than `bound` messages hold `term` (an FTS5 string) in their own words.
        `exact` counts every match when a count is needed (for a bound that moves with the index's
        size, so the next searches can decide from it), else it stops at `bound + 1`."""
        kept = self._counts.get(term)
        if kept is not None:
            self._counts.move_to_end(term)
            added = self._rows - kept.rows
            if kept.held > bound:
                return True
            if kept.held < kept.limit and kept.held + added <= bound:
                return False
        limit = self._rows + 1 if exact else bound + 1
        held = 0
        for table in ("messages_fts", "messages_fts_last"):  # every message is in one of them (migration 0013)
            row = fetch_one(
                connection,
                f"SELECT count(*) FROM (SELECT 1 FROM {table} WHERE {table} MATCH ? LIMIT ?)",
                ("{content} : " + term, limit - held),
            )
            held += 0 if row is None else int(row[0])
        self._counts[term] = _Count(held, limit, self._rows)
        while len(self._counts) > KEPT_TERMS:
            self._counts.popitem(last=False)
        return held > bound

    def at_least(self, connection: apsw.Connection, phrase: str) -> int:
        """Rows of `messages_fts` matching `phrase` (an FTS5 phrase with its column filter, as the search
        writes it): bm25's n for its idf, or fewer. A count is kept until the index has grown by
        `RECOUNT_GROWTH` since: with no delete, rows holding a phrase are only ever added, so a kept count
        is a lower bound of today's, and the idf from it (with `rows`, at least bm25's N) an upper bound."""
        kept = self._phrases.get(phrase)
        if kept is not None and self._rows <= kept.rows * (1 + RECOUNT_GROWTH):
            self._phrases.move_to_end(phrase)
            return kept.held
        held = int(fetch_value(connection, "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?", (phrase,)))
        self._phrases[phrase] = _Rows(held, self._rows)
        while len(self._phrases) > KEPT_TERMS:
            self._phrases.popitem(last=False)
        return held
