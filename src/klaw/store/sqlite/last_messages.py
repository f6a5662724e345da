"""The last conversation message of each open segment: matched in `messages_fts_last`, scored by bm25
as if it were in `messages_fts` (migration 0013, docs/decisions/218-append-only-full-text.md).

A message's full-text entry holds the text of the message after it, so it is final only when that
message arrives (or its segment ends). Until then it waits in `messages_fts_last`, at most one row a
chat, and `messages_fts` only ever grows on an append. Search asks both tables the same MATCH. A
match in `messages_fts` is scored by FTS5's `bm25()`; a match in the small table is scored here by
the same formula (fts5_aux.c: k1 1.2, b 0.75, each phrase's hits weighed by their column's weight,
the row's length against the average, idf from the rows that hold the phrase, at least 1e-6) with
the statistics of `messages_fts`: its rows, its tokens and its rows holding each phrase. So every
score of a search comes from one set of statistics, and a message in either table gets the score
FTS5 gives it there. The hits of each phrase a last message holds are counted, as `bm25()` counts
them for its own table: one count per such phrase, only when a last message in scope matches.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Sequence
from typing import Any

import apsw

from klaw.store.shared.rows import MESSAGE_COLUMNS
from klaw.store.sqlite.query import fetch_all, fetch_value

K1 = 1.2  # FTS5's bm25 constants (fts5_aux.c)
B = 0.75
_PARTS = "klaw_bm25_parts"
_TOTALS = "klaw_fts_totals"


def register_scoring(connection: apsw.Connection) -> None:
    """The two FTS5 auxiliary functions `last_scores` reads, on this connection (klaw.db's opener)."""
    connection.register_fts5_function(_PARTS, _bm25_parts)
    connection.register_fts5_function(_TOTALS, _totals)


def _bm25_parts(api: apsw.FTS5ExtensionApi, *weights: apsw.SQLiteValue) -> str:
    """This row's length in tokens and each phrase's hits weighed by column, as `bm25()` sums them."""
    frequencies = []
    for phrase in range(api.phrase_count):
        total = 0.0
        for column, offsets in enumerate(api.phrase_locations(phrase)):
            weight = weights[column] if column < len(weights) else 1.0
            total += (float(weight) if isinstance(weight, (int, float)) else 1.0) * len(offsets)
        frequencies.append(total)
    return json.dumps([api.column_size(-1), frequencies])


def _totals(api: apsw.FTS5ExtensionApi, *_: apsw.SQLiteValue) -> str:
    """The table's rows and tokens (all columns): bm25's N and, divided, its average length."""
    return json.dumps([api.row_count, api.column_total_size(-1)])


def last_scores(
    connection: apsw.Connection,
    terms: Sequence[str],
    bounds: tuple[int, int] | None,
    weights: Sequence[float],
    exclude: Collection[int] = (),
) -> dict[int, float]:
    """rowid → bm25 score (lower is better) of each last message matching the OR of `terms` (one FTS5
    phrase each, with its column filter), rowids within `bounds` when given and not in `exclude`;
    `weights` per column. A turn's own message is its segment's last and matches its own words: the
    search leaves it out (`exclude`), and then the phrases' counts are not read for it."""
    in_range = " AND rowid BETWEEN ? AND ?" if bounds else ""
    found = fetch_all(
        connection,
        f"SELECT rowid, {_PARTS}(messages_fts_last, {_arguments(weights)}) FROM messages_fts_last"
        f" WHERE messages_fts_last MATCH ?{in_range}",
        (" OR ".join(terms), *(bounds or ())),
    )
    return _scores(connection, terms, [(int(rowid), value) for rowid, value in found if rowid not in exclude])


def last_matches(
    connection: apsw.Connection,
    terms: Sequence[str],
    bounds: tuple[int, int] | None,
    weights: Sequence[float],
    where: str,
    params: Sequence[Any],
) -> list[tuple[Any, ...]]:
    """`last_scores` for the last messages a search's scope keeps: rows of `MESSAGE_COLUMNS` plus the
    score, of those `where` (over `messages m`, its parameters `params`) keeps. The scope is tested
    before a row is scored, so a turn's own message (excluded) and other chats' last messages cost
    neither their hits' count nor the phrases' counts in `messages_fts` (decision 300)."""
    in_range = " AND messages_fts_last.rowid BETWEEN ? AND ?" if bounds else ""
    found = fetch_all(
        connection,
        f"SELECT {MESSAGE_COLUMNS}, {_PARTS}(messages_fts_last, {_arguments(weights)}) FROM messages_fts_last"
        f" CROSS JOIN messages m ON m.rowid = messages_fts_last.rowid"
        f" WHERE messages_fts_last MATCH ?{in_range} AND {where}",
        (" OR ".join(terms), *(bounds or ()), *params),
    )
    scores = _scores(connection, terms, [(int(row[0]), row[-1]) for row in found])
    return [(*row[:-1], scores[int(row[0])]) for row in found]


def _arguments(weights: Sequence[float]) -> str:
    return ", ".join(str(float(weight)) for weight in weights)


def _scores(connection: apsw.Connection, terms: Sequence[str], found: list[tuple[int, Any]]) -> dict[int, float]:
    """rowid → bm25 score of the last messages `found` (each with its `_PARTS` value)."""
    if not found:
        return {}
    # The statistics of `messages_fts`; of the small table itself while the large one is empty (a new
    # home's first message), where bm25 is that table's own.
    table = "messages_fts"
    totals = fetch_value(connection, f"SELECT {_TOTALS}(messages_fts) FROM messages_fts LIMIT 1")
    if totals is None:
        table = "messages_fts_last"
        totals = fetch_value(connection, f"SELECT {_TOTALS}(messages_fts_last) FROM messages_fts_last LIMIT 1")
    rows, tokens = json.loads(str(totals))
    average = float(tokens) / float(rows)
    parts = [(rowid, json.loads(str(value))) for rowid, value in found]
    held = sorted({i for _, (_, frequencies) in parts for i, f in enumerate(frequencies) if f > 0})
    idf = {i: _idf(connection, table, terms[i], int(rows)) for i in held}
    scores: dict[int, float] = {}
    for rowid, (length, frequencies) in parts:
        score = 0.0
        for i, f in enumerate(frequencies):
            if f > 0:
                score += idf[i] * ((f * (K1 + 1.0)) / (f + K1 * (1 - B + B * float(length) / average)))
        scores[rowid] = -1.0 * score
    return scores


def _idf(connection: apsw.Connection, table: str, phrase: str, rows: int) -> float:
    hits = int(fetch_value(connection, f"SELECT count(*) FROM {table} WHERE {table} MATCH ?", (phrase,)) or 0)
    value = math.log((rows - hits + 0.5) / (hits + 0.5))
    return value if value > 0.0 else 1e-6
