"""Per-question retrieval figures and their means, exactly as `bench/METRICS.md` defines them.

A ranking is the retrieved turn ids, best first (at most 50 are kept); the evidence is the
question's normalised, distinct turn ids. Every figure is a fraction in [0, 1]:

- R@k = |evidence ∩ top-k| / |evidence| for k in 5, 10, 25, 50 (LoCoMo's own recall accuracy), and
  for 1 and 3: auto-RAG shows `autoRag.topK` 3 hits, so the first three are what the model sees;
- AllHit@10 = 1 when every evidence turn is in the top 10;
- MRR@50 = 1 / position of the first evidence turn within the top 50 (0 if none);
- NDCG@10 with binary relevance: Σ 1/log2(i+1) over evidence hits at positions i ≤ 10, divided by
  the same sum for an ideal ranking (min(|evidence|, 10) hits first);
- session recall@5: the ranked turns mapped to their sessions, each session kept at its first
  occurrence; the fraction of the evidence's sessions among the first 5 sessions.

Means are plain means over questions (each question weighs the same), per category, over the
headline categories 1–4 (multi-hop, temporal, open-domain, single-hop) and over all categories.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields

RECALL_KS = (1, 3, 5, 10, 25, 50)
TOP_K = max(RECALL_KS)
HEADLINE_CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


@dataclass(frozen=True, slots=True)
class QuestionScores:
    r1: float
    r3: float
    r5: float
    r10: float
    r25: float
    r50: float
    all_hit10: float
    mrr50: float
    ndcg10: float
    session_r5: float


METRIC_NAMES = tuple(f.name for f in fields(QuestionScores))


@dataclass(frozen=True, slots=True)
class MeanScores(QuestionScores):
    """Each `QuestionScores` field as its mean over `n` questions (all zero when n = 0)."""

    n: int = field(kw_only=True)

    def as_dict(self) -> dict[str, float | int]:
        return {"n": self.n, **{name: getattr(self, name) for name in METRIC_NAMES}}


def score_question(ranking: Sequence[str], evidence: Iterable[str], session_of: Mapping[str, int]) -> QuestionScores:
    """The figures of one question. Only the first occurrence of a turn id in `ranking` counts,
    and only the first `TOP_K` distinct ids; `session_of` maps each turn id to its session."""
    gold = list(dict.fromkeys(evidence))
    if not gold:
        raise ValueError("a question without evidence cannot be scored")
    wanted = set(gold)
    ranked = list(dict.fromkeys(ranking))[:TOP_K]
    hit_positions = [position for position, turn in enumerate(ranked, start=1) if turn in wanted]

    def hits(k: int) -> int:
        return sum(1 for position in hit_positions if position <= k)

    dcg = sum(1.0 / math.log2(position + 1) for position in hit_positions if position <= 10)
    ideal = sum(1.0 / math.log2(position + 1) for position in range(1, min(len(gold), 10) + 1))

    ranked_sessions = list(dict.fromkeys(session_of[turn] for turn in ranked if turn in session_of))[:5]
    gold_sessions = {session_of[turn] for turn in gold}
    session_hits = sum(1 for session in gold_sessions if session in ranked_sessions)

    return QuestionScores(
        r1=hits(1) / len(gold),
        r3=hits(3) / len(gold),
        r5=hits(5) / len(gold),
        r10=hits(10) / len(gold),
        r25=hits(25) / len(gold),
        r50=hits(50) / len(gold),
        all_hit10=1.0 if hits(10) == len(gold) else 0.0,
        mrr50=1.0 / hit_positions[0] if hit_positions else 0.0,
        ndcg10=dcg / ideal,
        session_r5=session_hits / len(gold_sessions),
    )


def mean_scores(scores: Sequence[QuestionScores]) -> MeanScores:
    if not scores:
        return MeanScores(*(0.0 for _ in METRIC_NAMES), n=0)
    return MeanScores(*(sum(getattr(s, name) for s in scores) / len(scores) for name in METRIC_NAMES), n=len(scores))


@dataclass(frozen=True, slots=True)
class Summary:
    """One variant's means: the headline (categories 1–4), all categories, and per category."""

    headline: MeanScores
    overall: MeanScores
    by_category: dict[int, MeanScores]


def summarise(scored: Sequence[tuple[int, QuestionScores]]) -> Summary:
    """Means of `(category, scores)` pairs."""
    categories = sorted({category for category, _ in scored})
    return Summary(
        headline=mean_scores([s for category, s in scored if category in HEADLINE_CATEGORIES]),
        overall=mean_scores([s for _, s in scored]),
        by_category={c: mean_scores([s for category, s in scored if category == c]) for c in categories},
    )
