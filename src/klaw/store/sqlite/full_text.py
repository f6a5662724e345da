"""Ranking `messages_fts` matches by bm25 within a chat, segment and time range, quickly.

The full-text index covers every chat, so a search must rank matches and keep those in scope. The
plain way (join every match to `messages`, filter, sort) pays a `messages` lookup per match: with
an OR of common words on 100k messages that is thousands of lookups, most of the query's time.
Instead:

1. the best `limit × FAST_FACTOR` matches by bm25 are taken from the index alone, within the rowid
   range of the scope's segments when the search has them (one segment, or the chat's past ones:
   `scope_rowids`; FTS5 seeks to it, so history outside it is never read);
2. only those are looked up and filtered by scope, with the matches among the open segments' last
   messages, which wait in `messages_fts_last` until their next message arrives (migration 0013) and
   are scored there with the statistics of `messages_fts` (last_messages.py).

That is exact whenever step 2 keeps `limit` rows (a row in scope outside step 1's best scores
worse than every row step 1 kept) or step 1 returned every match. Otherwise (other chats or
segments crowd the best matches) the plain query runs.

The cost of a query is the number of messages it matches: bm25 is computed for each. The
`context` and `following` columns (the words of the messages before and after, migrations 0004 and
0011) triple that number for every word, and for a common word that is thousands of messages,
the most expensive part of a search at scale, for a word that says little about which message a
reply answers. So a word found in the own words of more than `CONTEXT_MAX_MATCHES` messages is
matched in messages' own words only (`{content} : "word"`); rarer words, the telling ones, are
matched in all three columns. Below that
size nothing changes (LoCoMo's conversations never reach it); at 100k messages of bench scale's
Zipfian text it brings full text back to the cost it had with one column.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import apsw

from klaw.store.shared.common_words import common_cut, pairable
from klaw.store.shared.rows import MESSAGE_COLUMNS
from klaw.store.sqlite.fts_query import quoted
from klaw.store.sqlite.last_messages import last_matches
from klaw.store.sqlite.query import fetch_all, fetch_one
from klaw.store.sqlite.term_counts import TermCounts

# bm25 weight of the neighbours' words, the message before (`context`) and after (`following`); the
# message's own weigh 1. The same for both sides: neither is the message, and each is one step away.
CONTEXT_WEIGHT = 0.2
_WEIGHTS = (1.0, CONTEXT_WEIGHT, CONTEXT_WEIGHT)
CONTEXT_MAX_MATCHES = 1000  # a word in more messages' own words is not matched in `context`
FAST_FACTOR = 4
FAST_MINIMUM = 200
_BM25 = f"bm25(messages_fts, {', '.join(map(str, _WEIGHTS))})"
_OWN_WORDS = "{content} : "  # a phrase matched in a message's own words only
# A term reaching this share of the index's rows or more is common (`common_terms`): measured on bench
# scale's chat, 0.5 % left the best 20 of 100 searches as they were and scored a third fewer rows;
# PostgreSQL's 1 % of the holders, here, kept almost every row a candidate (decision 235).
COMMON_REACH_SHARE = 0.005


Rowids = tuple[int, int]
NO_ROWIDS: Rowids = (1, 0)  # the range of a scope without messages: nothing lies between


def scope_rowids(
    connection: apsw.Connection, chat_key: int, segment_id: int | None, before_segment_id: int | None
) -> Rowids | None:
    """The first and last rowid of the scope's messages when it names segments: one segment's, or
    those of the chat's segments before `before_segment_id` (its past conversations: their messages
    were all appended before that segment's, `shared/search_scope.py`); `NO_ROWIDS` when it has none,
    None for a scope of the whole chat. Index seeks only (`messages_by_segment`, `segments_by_chat`)."""
    if segment_id is not None:
        # Two subqueries: SQLite answers a lone min() or max() from the index, both together by a scan.
        row = fetch_one(
            connection,
            "SELECT (SELECT min(rowid) FROM messages WHERE segment_id = ?1),"
            " (SELECT max(rowid) FROM messages WHERE segment_id = ?1)",
            (segment_id,),
        )
    elif before_segment_id is not None:
        # The first message of the chat's first past segment holding any, and the last of its last.
        row = fetch_one(connection, _PAST_ROWIDS, (chat_key, before_segment_id))
    else:
        return None
    if row is None or row[0] is None or row[1] is None:
        return NO_ROWIDS
    return int(row[0]), int(row[1])


_PAST_ROWIDS = (
    "SELECT (SELECT (SELECT min(rowid) FROM messages WHERE segment_id = s.id) AS r FROM segments s"
    " WHERE s.chat = ?1 AND s.id < ?2 AND r IS NOT NULL ORDER BY s.id LIMIT 1),"
    " (SELECT (SELECT max(rowid) FROM messages WHERE segment_id = s.id) AS r FROM segments s"
    " WHERE s.chat = ?1 AND s.id < ?2 AND r IS NOT NULL ORDER BY s.id DESC LIMIT 1)"
)


def ranked_matches(
    connection: apsw.Connection,
    terms: list[str],
    where: str,
    params: list[Any],
    bounds: Rowids | None,
    limit: int,
    exclude: frozenset[int] = frozenset(),
    common: Common | None = None,
) -> list[tuple[Any, ...]]:
    """Rows of `MESSAGE_COLUMNS` plus the bm25 score (lower is better), best first, at most `limit`,
    matching the OR of `terms` (`match_terms`); `where`/`params` filter `messages m` (chat, segment,
    time, and `exclude`'s rowids left out: `excluding`), whose rowids lie within `bounds`
    (`scope_rowids`) when given. The open segments' last messages come from `messages_fts_last`,
    scored alike (last_messages.py); one in `exclude` is not scored. `common` (`common_terms`): the
    terms whose rows are ranked only among the candidates, when those fill `limit` places and the
    last of them outscores a message saying one common word once (`Common.weight`)."""
    if bounds == NO_ROWIDS:
        return []  # an empty or unknown segment, a chat without past ones
    expression = " OR ".join(terms)
    in_range = " AND rowid BETWEEN ? AND ?" if bounds else ""
    found = None
    if common is not None and common.terms:
        # The candidates (a rare word, or two common ones) are the answer when they fill the places asked
        # for, the last of them scoring better than a message of average length saying one of the common
        # words once (decision 449): those messages, left out unscored, are the ones that would rank first.
        best = _best(connection, expression, bounds, limit, exclude, terms, common.terms)
        found = _best_in_scope(connection, best, where, params, limit)
        found = found if found is not None and len(found) == limit and found[-1][-1] < -common.weight else None
    if found is None:
        found = _best_in_scope(connection, _best(connection, expression, bounds, limit, exclude), where, params, limit)
    # Only the last messages in scope are scored (a turn's own, excluded, and other chats' are not).
    lasts = last_matches(connection, terms, bounds, _WEIGHTS, where, params)
    if found is None:
        # CROSS JOIN: the index drives. With the rowid range, the planner would otherwise walk the
        # segment's rows and ask FTS5 whether each one matches.
        within = in_range.replace("rowid", "messages_fts.rowid")
        found = fetch_all(
            connection,
            f"SELECT {MESSAGE_COLUMNS}, {_BM25} AS score FROM messages_fts CROSS JOIN messages m"
            f" ON m.rowid = messages_fts.rowid WHERE messages_fts MATCH ?{within}"
            f" AND {where} ORDER BY score, m.rowid LIMIT ?",
            (expression, *(bounds or ()), *params, limit),
        )
    return sorted([*found, *lasts], key=lambda row: (row[-1], row[0]))[:limit]


def _best(
    connection: apsw.Connection,
    expression: str,
    bounds: Rowids | None,
    limit: int,
    exclude: frozenset[int] = frozenset(),
    terms: Sequence[str] = (),
    common: Sequence[str] = (),
) -> list[tuple[Any, ...]]:
    """(rowid, bm25) of the index's best `max(FAST_FACTOR * limit, FAST_MINIMUM)` matches of
    `expression`, within `bounds`, the rowids of `exclude` left out; with `common`, only among the
    candidates: the rows holding a term of `terms` that is not in `common`, or two of `common`
    (`candidates`). A candidate's score is the one the full ranking gives it (the same `expression`);
    only which rows are scored differs."""
    in_range = " AND rowid BETWEEN ? AND ?" if bounds else ""
    among = ""
    among_params: list[Any] = []
    if exclude:
        # The turn's window: the newest messages, often the best matches of its own words. Left out
        # here, unscored, rather than looked up and dropped by `_in_scope`, so that the first rows
        # looked up are the answer (decision 300).
        left_out, among_params = outside("+rowid", exclude)
        among = f" AND {left_out}"
    if common:
        # `+rowid`: the rowid is not offered to FTS5 as a lookup (each would start the query again);
        # the candidates are found once, by the index, and each match outside them is skipped unscored.
        among += f" AND +rowid IN (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?{in_range})"
        among_params += [candidates(terms, common), *(bounds or ())]
    return fetch_all(
        connection,
        f"SELECT rowid, {_BM25} AS score FROM messages_fts WHERE messages_fts MATCH ?{in_range}{among}"
        " ORDER BY score, rowid LIMIT ?",
        (expression, *(bounds or ()), *among_params, max(FAST_FACTOR * limit, FAST_MINIMUM)),
    )


def candidates(terms: Sequence[str], common: Sequence[str]) -> str:
    """The FTS5 expression of the rows worth ranking: holding a term of `terms` not in `common`, or
    two of `common` (`shared/common_words.py`)."""
    rare = [term for term in terms if term not in common]
    return " OR ".join([*rare, *_two_of(common)])


def _two_of(common: Sequence[str]) -> list[str]:
    """FTS5 expressions whose OR holds the rows holding two or more of `common`: one of each half, or
    two of one half. FTS5 reads a phrase's entries once per place it takes in the expression: 8 places
    for 4 common words, 24 for 8, where every pair written out takes 12 and 56 (decision 300)."""
    if len(common) < 2:
        return []
    if len(common) == 2:
        return [f"({common[0]} AND {common[1]})"]
    half = len(common) // 2
    left, right = common[:half], common[half:]
    return [f"({_one_of(left)} AND {_one_of(right)})", *_two_of(left), *_two_of(right)]


def _one_of(terms: Sequence[str]) -> str:
    return terms[0] if len(terms) == 1 else f"({' OR '.join(terms)})"


def _best_in_scope(
    connection: apsw.Connection, best: list[tuple[Any, ...]], where: str, params: list[Any], limit: int
) -> list[tuple[Any, ...]] | None:
    """The first `limit` of `best` (rowid, score: the index's best matches in order) that are in scope,
    with their scores, looked up a slice at a time in that order, so a search whose first matches are
    in scope reads `limit` rows, not every match; None when that is not the answer (`best` was cut
    short by its limit before `limit` of them were in scope: rows past it may be in scope)."""
    found: list[tuple[Any, ...]] = []
    start, size = 0, max(limit, 1)
    while start < len(best) and len(found) < limit:
        part = best[start : start + size]
        scores = {int(rowid): float(score) for rowid, score in part}
        found += [(*row, scores[row[0]]) for row in _in_scope(connection, list(scores), where, params)]
        start, size = start + size, size * 2
    if len(found) >= limit:
        return found[:limit]
    return found if len(best) < max(FAST_FACTOR * limit, FAST_MINIMUM) else None


def _in_scope(connection: apsw.Connection, rowids: list[int], where: str, params: list[Any]) -> list[tuple[Any, ...]]:
    """Rows of `MESSAGE_COLUMNS` of `rowids` that `where` keeps, in the order of `rowids`."""
    if not rowids:
        return []
    # CROSS JOIN keeps this order: one rowid lookup per match. Left to itself the planner may walk
    # the whole segment through `messages_by_segment` and test each row against the list.
    return fetch_all(
        connection,
        f"SELECT {MESSAGE_COLUMNS} FROM json_each(?) AS j CROSS JOIN messages m ON m.rowid = j.value WHERE {where}",
        (json.dumps(rowids), *params),
    )


def excluding(where: str, params: list[Any], exclude: frozenset[int]) -> tuple[str, list[Any]]:
    """`where` over `messages m` with the rowids of `exclude` left out (unchanged when it is empty)."""
    if not exclude:
        return where, params
    left_out, left_params = outside("+m.rowid", exclude)
    return f"{where} AND {left_out}", [*params, *left_params]


def outside(column: str, exclude: frozenset[int]) -> tuple[str, list[Any]]:
    """SQL true when `column` (a rowid) is not in `exclude` (not empty), and its parameters. The set is
    probed only for rowids between its smallest and largest: SQLite runs `NOT IN (subquery)` with its
    NULL rule, a rewind of the set's table and a seek in it for every row tested, and the full-text
    statement tests every match of the question's words (~5,000 at 100k messages) against a turn's
    window, its newest rowids, above nearly all of them. Two comparisons settle those rows: the same
    rows left out, ~10 % of the statement's CPU at 100k (decision 484)."""
    return (
        f"({column} < ? OR {column} > ? OR {column} NOT IN (SELECT value FROM json_each(?)))",
        [min(exclude), max(exclude), json.dumps(sorted(exclude))],
    )


def scoped_count(
    connection: apsw.Connection, expression: str, where: str, params: list[Any], bounds: Rowids | None, cap: int
) -> int:
    """How many messages of the scope (`where` over `messages m`, rowids within `bounds` when
    given) match `expression`, counting no further than `cap` + 1, so a common word costs at most
    that many lookups."""
    if bounds == NO_ROWIDS:
        return 0
    held = 0
    for table in ("messages_fts", "messages_fts_last"):  # every message is in one of them
        in_range = f" AND {table}.rowid BETWEEN ? AND ?" if bounds else ""
        row = fetch_one(
            connection,
            f"SELECT count(*) FROM (SELECT 1 FROM {table} CROSS JOIN messages m ON m.rowid = {table}.rowid"
            f" WHERE {table} MATCH ?{in_range} AND {where} LIMIT ?)",
            (expression, *(bounds or ()), *params, cap + 1 - held),
        )
        held += 0 if row is None else int(row[0])
    return held


def substring_matches(
    connection: apsw.Connection, terms: list[str], where: str, params: list[Any], limit: int
) -> list[tuple[Any, ...]]:
    """Rows of the scope whose own text holds any of `terms` (those a trigram index cannot answer:
    under three characters), holding more of them first, then the newest; the score is minus the
    number held (lower is better, as bm25's). A scan of the scope's rows: only for such short queries."""
    held = " + ".join("(instr(lower(m.content), ?) > 0)" for _ in terms)
    return fetch_all(
        connection,
        f"SELECT {MESSAGE_COLUMNS}, -({held}) AS score FROM messages m WHERE {where} AND ({held}) > 0"
        " ORDER BY score, m.rowid DESC LIMIT ?",
        (*terms, *params, *terms, limit),
    )


def scoped_substring_count(connection: apsw.Connection, term: str, where: str, params: list[Any], cap: int) -> int:
    """`scoped_count` for a term a trigram index cannot answer: messages whose own text holds it."""
    row = fetch_one(
        connection,
        f"SELECT count(*) FROM (SELECT 1 FROM messages m WHERE {where} AND instr(lower(m.content), ?) > 0 LIMIT ?)",
        (*params, term, cap + 1),
    )
    return 0 if row is None else int(row[0])


def match_terms(connection: apsw.Connection, words: list[str], counts: TermCounts) -> list[str]:
    """`words` as FTS5 phrases to OR together, a common word limited to the `content` column, and a
    word held by half the index or more left out (unless every word is). `counts` answers the
    "how many hold it?" questions, from memory when an earlier count decides them (term_counts.py)."""
    terms: list[str] = []
    idle: list[str] = []  # words held by half the index or more
    rows = counts.refresh(connection)
    for word in words:
        term = quoted(word)
        if not counts.more_than(connection, term, CONTEXT_MAX_MATCHES):
            terms.append(term)
            continue
        # bm25's idf, log((N - n + 0.5) / (n + 0.5)), is at most 0 once n >= N / 2, and FTS5 then
        # weighs the word 1e-6: it changes no ranking beyond a tie-break, yet scoring its matches
        # was nearly all of a search's time (370 ms for a word in all of 100k messages, 0.3 ms
        # without it). Counting to N / 2 costs ~3 ms at 100k (docs/decisions/095-turn-cost-at-scale.md),
        # so the whole count is taken once and later searches decide from it while the index grows.
        half = (rows + 1) // 2
        (idle if counts.more_than(connection, term, half - 1, exact=True) else terms).append(_OWN_WORDS + term)
    return terms or idle


@dataclass(frozen=True, slots=True)
class Common:
    """The common terms of a search (`common_terms`) and `weight`, the most a message of average length
    saying one of them once (in its own words) adds to a score: bm25 gives such a row its term's idf,
    tf (k1 + 1) / (tf + k1) being 1 at tf 1 and the average length. Decision 449: on bench turn's chat the
    candidates filled the places with rows weaker than that (a rare word in a neighbour's words scores
    a fifth), and rows holding one common word took the best 20 places from them in 30 of 168 searches."""

    terms: tuple[str, ...]
    weight: float


def common_terms(connection: apsw.Connection, terms: list[str], counts: TermCounts) -> Common | None:
    """The terms of `match_terms` common enough that a message holding one of them alone is not a
    candidate (`shared/common_words.py`), None when candidates cannot help. A term's reach is the
    rows it makes bm25 score: the messages holding the word in their own words, three times that
    when it is matched in the neighbours' columns too (each message's words are also its neighbours').
    Common: a reach of `COMMON_REACH_SHARE` of the index or more, and more than `CONTEXT_MAX_MATCHES`
    (no word of a chat of a few thousand messages, such as LoCoMo's, reaches it). Asked of `counts`
    after `match_terms`, in the same snapshot, so answered from its memo but for a first count; so is
    each common term's idf (`TermCounts.at_least`: at least bm25's, from a count at most 1 % old)."""
    cut = common_cut(counts.rows, CONTEXT_MAX_MATCHES + 1, COMMON_REACH_SHARE)
    common = []
    for term in terms:
        own = term.startswith(_OWN_WORDS)
        held = math.ceil(cut / (1 if own else len(_WEIGHTS)))  # held by this many, the term reaches `cut`
        if counts.more_than(connection, term.removeprefix(_OWN_WORDS), held - 1):
            common.append(term)
    if not pairable(common, len(terms)):
        return None
    rows = counts.rows  # every `messages` row: at least bm25's N, the rows of `messages_fts`
    return Common(tuple(common), max(_idf(rows, counts.at_least(connection, term)) for term in common))


def _idf(rows: int, held: int) -> float:
    """FTS5's bm25 idf (fts5_aux.c) of a phrase `held` by that many of `rows` rows."""
    return max(math.log((rows - held + 0.5) / (held + 0.5)), 1e-6)
