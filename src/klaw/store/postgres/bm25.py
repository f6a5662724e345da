"""FTS5's bm25 computed in PostgreSQL, so full text ranks messages as it does on SQLite.

For one search word's tsquery, `ts_rank_cd` over `messages.search` with the weights `RANK_WEIGHTS`
(A 1.0, C 0.2) is exactly that word's frequency as FTS5's bm25 counts it with column weights
(1, 0.2, 0.2): each occurrence in the message's own words counts 1, each in the previous or next
message's (weight C) 0.2. From it, the word's idf and the message's length the score is bm25's,
with FTS5's constants (k1 1.2, b 0.75):

    sum over words of idf(w) * f(w) * (k1 + 1) / (f(w) + k1 * (1 - b + b * |D| / avgdl))

- idf is FTS5's, log((N - n + 0.5) / (n + 0.5)), at least 1e-6: a word held by half the messages or
  more (a speaker's name in a two-person chat) says nothing; N is the table's row estimate, n counted
  through the GIN index no further than `IDF_COUNT_CAP`. Such a word is left out of the match as
  SQLite leaves it out (unless every word is).
- |D| is `messages.search_tokens` (migration 0006: runs of letters and digits of the three columns,
  FTS5's token count); avgdl its mean over the table's first `AVGDL_SAMPLE` rows by rowid (in rowid
  order: a plain LIMIT took the rows a sequential scan met first, and a synchronised scan may start
  mid-table: 52.1 once and 46.7 once on the same 100k table, the scores changing between searches).

Measured on LoCoMo dev (klaw bench locomo's path, MiniLM): full text alone with ts_rank_cd times the
Lucene idf (what this replaces) had R@5 2.9 points under SQLite's, the same top five as SQLite for 3 %
of the questions; with bm25 the same top five for 91 %, R@5 within 0.2 (decision 201).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from klaw.store.postgres.connection import Connection, fetch_value
from klaw.store.shared.rows import MESSAGE_COLUMNS

RANK_WEIGHTS = "{0.1, 0.2, 0.4, 1.0}"  # D, C (the previous and next messages), B, A (the message's own words)
K1 = 1.2
B = 0.75
IDF_FLOOR = 1e-6  # FTS5's idf for a word held by half the rows or more
IDF_COUNT_CAP = 5000
AVGDL_SAMPLE = 1000


@dataclass(frozen=True, slots=True)
class Terms:
    """The words ranked (each with its idf), those the match asks for, and the mean message length."""

    words: list[str]
    idf: list[float]
    held: list[int]  # messages holding each word, counted no further than `IDF_COUNT_CAP`
    rows: float  # the table's messages (its row estimate), N of the idf
    matched: list[str]
    avgdl: float


def fts5_idf(rows: float, held: int) -> float:
    value = math.log((rows - held + 0.5) / (held + 0.5))
    return value if value > 0 else IDF_FLOOR


async def search_terms(connection: Connection, words: Sequence[str]) -> Terms:
    """Each word's idf over the whole table, as FTS5 computes it over its whole index."""
    total = await fetch_value(connection, "SELECT reltuples FROM pg_class WHERE oid = 'messages'::regclass")
    rows = float(total) if total is not None and float(total) > 0 else 0.0
    if rows <= 0:  # never analysed: a new (small) table
        rows = float(await fetch_value(connection, "SELECT count(*) FROM messages"))
    held = [
        int(
            await fetch_value(
                connection,
                "SELECT count(*) FROM (SELECT 1 FROM messages m WHERE m.search @@ plainto_tsquery('english', %s)"
                f" LIMIT {IDF_COUNT_CAP}) AS held",
                (word,),
                prepare=False,  # a rare word's count reads its few rows, a common one's stops at the cap
            )
        )
        for word in words
    ]
    rows = max([rows, *held])
    idf = [fts5_idf(rows, n) for n in held]
    telling = [word for word, weight in zip(words, idf, strict=True) if weight > IDF_FLOOR]
    avgdl = await fetch_value(
        connection,
        "SELECT avg(s.search_tokens) FROM (SELECT search_tokens FROM messages ORDER BY rowid"
        f" LIMIT {AVGDL_SAMPLE}) AS s",
    )
    return Terms(list(words), idf, held, rows, telling or list(words), float(avgdl or 1.0) or 1.0)


def ranked_sql(terms: Terms, where: str, params: Sequence[object], limit: int) -> tuple[str, list[object]]:
    """(SQL for the best `limit` matches as `MESSAGE_COLUMNS` plus the negated bm25 score, best first;
    its parameters). `where` (with `params`) filters `messages m` to the search's scope.

    Each matched word is scored on its own, over the rows the GIN index says hold it, and the parts
    are summed per message (in the words' order, as one expression would): a word's frequency is then
    computed only for the messages holding it, not for every match of any word, which at 100k
    messages was 3-5x the work (a seven-word query: 22k matches times 14 `ts_rank_cd` calls). A word
    left out of the match (`Terms.matched`) still adds its tiny weight, for the matches only."""
    matched = set(terms.matched)
    parts, part_params = [], []
    for i, word in enumerate(terms.words):
        if word in matched:
            parts.append(
                f"SELECT m.rowid, {i} AS i, {contribution('x.f')} AS c FROM messages m,"
                f" LATERAL (SELECT {frequency()} AS f OFFSET 0) AS x WHERE m.search @@ {QUERY} AND {where}"
            )
            part_params += [terms.idf[i], terms.avgdl, word, word, *params]
    idle = [i for i, word in enumerate(terms.words) if word not in matched]
    extra = "".join(f" + {contribution(f'x.f{i}')}" for i in idle)
    idle_params = [value for i in idle for value in (terms.idf[i], terms.avgdl)]
    frequencies = ", ".join(f"{frequency()} AS f{i}" for i in idle)
    grouped = (
        f"SELECT p.rowid, sum(p.c ORDER BY p.i) AS partial FROM ({' UNION ALL '.join(parts)}) AS p GROUP BY p.rowid"
    )
    if not idle:
        sql = (
            f"SELECT {MESSAGE_COLUMNS}, s.score FROM (SELECT g.rowid, -g.partial AS score FROM ({grouped}) AS g"
            " ORDER BY score, g.rowid LIMIT %s) AS s JOIN messages m ON m.rowid = s.rowid ORDER BY s.score, m.rowid"
        )
        return sql, [*part_params, limit]
    sql = (
        f"SELECT {MESSAGE_COLUMNS}, -(g.partial{extra}) AS score FROM ({grouped}) AS g JOIN messages m"
        f" ON m.rowid = g.rowid, LATERAL (SELECT {frequencies} OFFSET 0) AS x"
        " ORDER BY score, m.rowid LIMIT %s"
    )
    words = [terms.words[i] for i in idle]
    return sql, [*idle_params, *part_params, *words, limit]


QUERY = "plainto_tsquery('english', %s)"  # one word, a bound parameter: no character is query syntax


def frequency() -> str:
    return f"ts_rank_cd('{RANK_WEIGHTS}', m.search, {QUERY})"


def contribution(frequency: str) -> str:
    """One word's bm25 term; its parameters: the word's idf, then avgdl."""
    length = f"{K1} * ({1 - B} + {B} * m.search_tokens / %s::float8)"
    return f"%s * {frequency} * {K1 + 1} / ({frequency} + {length})"
