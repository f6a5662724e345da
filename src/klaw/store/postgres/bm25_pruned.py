"""Full text's best matches without scoring every message that holds a common word (decision 213).

`bm25.ranked_sql` scores every message matching any search word. At 100k messages a word of everyday
speech is held by 5-10k of them (its neighbours' words count), and scoring those rows was most of a
search's work, although a message holding one common word and nothing rarer seldom reaches the best
60: its score is one small idf. So the candidates are the messages holding a rare word or two common
words (held by 1 % of the messages or more, from the counts `search_terms` already made): one tsquery,
the rare words and every pair of common words OR-ed, answered by the GIN index. Each candidate is
fetched once and scored on every word with the same bm25 terms summed in the same order as
`ranked_sql` (a word it does not hold adds exactly 0), so its score is the very number the full
statement gives it; only which messages are ranked differs. When the candidates do not fill the
places asked for, the caller ranks every match as before.

Not exact, and measured instead (decision 213): the exact rule (MaxScore: leave a message out only
when the last candidate kept outscores the most one common word can add, idf x (k1 + 1)) held for 1
of 89 bench queries, since that bound is twice what a word said once adds.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations

from klaw.store.postgres.bm25 import QUERY, Terms, contribution, frequency
from klaw.store.shared.common_words import common_cut, pairable
from klaw.store.shared.rows import MESSAGE_COLUMNS


def common_words(terms: Terms) -> list[str] | None:
    """The matched words treated as common, or None when the first pass cannot help (no common word,
    or too many to pair)."""
    matched = set(terms.matched)
    cut = common_cut(terms.rows)
    common = [w for w, n in zip(terms.words, terms.held, strict=True) if w in matched and n >= cut]
    return common if pairable(common, len(matched)) else None


def pruned_sql(
    terms: Terms, common: Sequence[str], where: str, params: Sequence[object], limit: int
) -> tuple[str, list[object]]:
    """(SQL for the best `limit` candidates as `MESSAGE_COLUMNS` plus the negated bm25 score, best
    first; its parameters). Scores are those of `ranked_sql`: the matched words' terms in order, then
    the other words' terms (`ranked_sql` adds those after its sum)."""
    matched = set(terms.matched)
    rare = [w for w in terms.words if w in matched and w not in common]
    alternatives = [QUERY] * len(rare) + [f"({QUERY} && {QUERY})"] * len(list(combinations(common, 2)))
    candidate_params: list[object] = [*rare, *(w for pair in combinations(common, 2) for w in pair)]
    order = [i for i, w in enumerate(terms.words) if w in matched] + [
        i for i, w in enumerate(terms.words) if w not in matched
    ]
    guarded = ", ".join(f"CASE WHEN m.search @@ {QUERY} THEN {frequency()} ELSE 0 END AS f{i}" for i in order)
    guarded_params = [value for i in order for value in (terms.words[i], terms.words[i])]
    total = " + ".join(contribution(f"x.f{i}") for i in order)
    total_params = [value for i in order for value in (terms.idf[i], terms.avgdl)]
    sql = (
        f"SELECT {MESSAGE_COLUMNS}, -({total}) AS score FROM messages m, LATERAL (SELECT {guarded} OFFSET 0) AS x"
        f" WHERE m.search @@ ({' || '.join(alternatives)}) AND {where} ORDER BY score, m.rowid LIMIT %s"
    )
    return sql, [*total_params, *guarded_params, *candidate_params, *params, limit]
