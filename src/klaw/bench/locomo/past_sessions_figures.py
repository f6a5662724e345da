"""The past-sessions bench's figures, computed from each query's rankings (`past_sessions.Asked`).

What the stages would keep at a gate `t` is derived, not asked again: `SimilarSegments` keeps, of the
`conversationLimit` most similar past segments, those at least `t`, and `SimilarExchanges` keeps, of
each kept segment's `exchangeLimitPerConversation` most similar exchanges, those at least `t`. Both are
a prefix of the ranking the bench asked for with the gate open, so the derivation is exact (the tests
check it against the pipeline run at the gate).

Per kind of query:

- similarity spreads: the best evidence session (exchange) of each question; every other session of
  the chat (every other exchange of that evidence session); the most similar session (exchange of
  any session) of each query;
- hit@k: share of questions with an evidence session among the k most similar segments (for
  exchanges: the best evidence exchange among the k most similar of its own session); recall@k: mean
  share of a question's evidence sessions among the k most similar;
- per gate: `evidence_passes`, the share of questions whose best evidence similarity reaches it;
  `evidence_found`, the share for which the stages at this gate and the limits in force find an
  evidence segment (exchange); `any_found`, the share of queries for which they find anything; and
  how many they find per query.

Exchange figures count only questions with an exchange summary holding evidence (`missing` the rest).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np

from klaw.bench.locomo.past_sessions import Asked
from klaw.config import RagConfig

THRESHOLDS: Final = tuple(round(0.2 + 0.05 * step, 2) for step in range(11))  # 0.20 … 0.70
SEGMENT_KS: Final = (1, 3, 5)
EXCHANGE_KS: Final = (1, 2, 3)
EVIDENCE_KINDS: Final = ("question", "adversarial")
KINDS: Final = ("question", "adversarial", "other_conversation", "chitchat")


@dataclass(frozen=True, slots=True)
class Spread:
    count: int
    mean: float
    p10: float
    p25: float
    p50: float
    p75: float
    p90: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Spread | None:
        data = np.fromiter(values, dtype=np.float64)
        if data.size == 0:
            return None
        p10, p25, p50, p75, p90 = (float(v) for v in np.percentile(data, [10, 25, 50, 75, 90]))
        return cls(int(data.size), float(data.mean()), p10, p25, p50, p75, p90)


@dataclass(frozen=True, slots=True)
class GateRow:
    threshold: float
    evidence_passes: float | None  # None for unrelated queries
    evidence_found: float | None
    any_found: float
    found_per_query: float


@dataclass(frozen=True, slots=True)
class LevelFigures:
    """One kind of query at one level (segments, or exchanges with one exchange text)."""

    kind: str
    count: int  # queries counted
    missing: int  # questions left out: no exchange summary holds their evidence (exchanges only)
    evidence: Spread | None
    others: Spread | None
    top: Spread | None
    hit_at: dict[int, float]
    recall_at: dict[int, float]
    gate: tuple[GateRow, ...]


def found_segments(asked: Asked, threshold: float, rag: RagConfig) -> list[tuple[int, float]]:
    """The past sessions `SimilarSegments` keeps at `threshold`: (number, similarity), best first."""
    return [
        (session, similarity)
        for session, similarity in asked.segments[: rag.conversation_limit]
        if similarity >= threshold
    ]


def found_exchanges(asked: Asked, threshold: float, rag: RagConfig) -> list[tuple[bool, float]]:
    """The exchanges `SimilarExchanges` keeps at `threshold` in the segments kept: (is evidence, similarity)."""
    return [
        (is_evidence, similarity)
        for session, _ in found_segments(asked, threshold, rag)
        for is_evidence, similarity in asked.exchanges.get(session, ())[: rag.exchange_limit_per_conversation]
        if similarity >= threshold
    ]


def segment_figures(asked: Sequence[Asked], kind: str, rag: RagConfig) -> LevelFigures:
    queries = [a for a in asked if a.kind == kind]
    evidence = kind in EVIDENCE_KINDS
    best = [_best_evidence_session(a) for a in queries] if evidence else []
    others = [s for a in queries for n, s in a.segments if n not in a.evidence_sessions] if evidence else []
    gate = tuple(
        _row(
            queries,
            threshold,
            lambda a, t: [n in a.evidence_sessions for n, _ in found_segments(a, t, rag)],
            best if evidence else None,
        )
        for threshold in THRESHOLDS
    )
    return LevelFigures(
        kind=kind,
        count=len(queries),
        missing=0,
        evidence=Spread.of(b for b in best if b is not None),
        others=Spread.of(others),
        top=Spread.of(a.segments[0][1] for a in queries if a.segments),
        hit_at={k: _mean(_ranked_evidence(a, k) > 0 for a in queries) for k in SEGMENT_KS} if evidence else {},
        recall_at={k: _mean(_ranked_evidence(a, k) / len(a.evidence_sessions) for a in queries) for k in SEGMENT_KS}
        if evidence
        else {},
        gate=gate,
    )


def exchange_figures(asked: Sequence[Asked], kind: str, rag: RagConfig) -> LevelFigures:
    evidence = kind in EVIDENCE_KINDS
    of_kind = [a for a in asked if a.kind == kind]
    queries = [a for a in of_kind if a.evidence_exchange is not None] if evidence else of_kind
    best = [a.evidence_exchange.similarity if a.evidence_exchange else None for a in queries] if evidence else []
    gate = tuple(
        _row(queries, threshold, lambda a, t: [e for e, _ in found_exchanges(a, t, rag)], best if evidence else None)
        for threshold in THRESHOLDS
    )
    return LevelFigures(
        kind=kind,
        count=len(queries),
        missing=len(of_kind) - len(queries),
        evidence=Spread.of(b for b in best if b is not None),
        others=Spread.of(s for a in queries if a.evidence_exchange for s in a.evidence_exchange.others),
        top=Spread.of(max(hits[0][1] for hits in a.exchanges.values() if hits) for a in queries if a.exchanges),
        hit_at={
            k: _mean(a.evidence_exchange is not None and a.evidence_exchange.rank <= k for a in queries)
            for k in EXCHANGE_KS
        }
        if evidence
        else {},
        recall_at={},
        gate=gate,
    )


def _row(
    queries: Sequence[Asked],
    threshold: float,
    found: Callable[[Asked, float], list[bool]],
    best: Sequence[float | None] | None,
) -> GateRow:
    """`found(a, t)` says, for each item the stages keep at `t`, whether it holds evidence."""
    kept = [found(a, threshold) for a in queries]
    return GateRow(
        threshold=threshold,
        evidence_passes=None if best is None else _mean(b is not None and b >= threshold for b in best),
        evidence_found=None if best is None else _mean(any(flags) for flags in kept),
        any_found=_mean(bool(flags) for flags in kept),
        found_per_query=_mean(float(len(flags)) for flags in kept),
    )


def _best_evidence_session(asked: Asked) -> float | None:
    found = [s for n, s in asked.segments if n in asked.evidence_sessions]
    return max(found) if found else None


def _ranked_evidence(asked: Asked, k: int) -> int:
    """How many of the question's evidence sessions are among the k most similar."""
    return sum(1 for n, _ in asked.segments[:k] if n in asked.evidence_sessions)


def _mean(values: Iterable[float | bool]) -> float:
    data = [float(v) for v in values]
    return sum(data) / len(data) if data else 0.0


@dataclass(frozen=True, slots=True)
class ShownFigures:
    """What the `rag` settings in force show, the block included, for one kind of query."""

    kind: str
    count: int
    evidence_segment: float | None  # share of questions shown an evidence session
    evidence_exchange: float | None  # of questions with an exchange summary holding evidence: shown one
    any_shown: float
    segments_per_query: float
    exchanges_per_query: float
    block_tokens: float  # mean size of the block, over the queries that got one


def shown_figures(asked: Sequence[Asked], kind: str) -> ShownFigures:
    queries = [a for a in asked if a.kind == kind]
    evidence = kind in EVIDENCE_KINDS
    with_exchange = [a for a in queries if a.evidence_exchange is not None]
    blocks = [a.block_tokens for a in queries if a.block_tokens]
    return ShownFigures(
        kind=kind,
        count=len(queries),
        evidence_segment=_mean(bool(a.evidence_sessions & set(a.shown_sessions)) for a in queries)
        if evidence
        else None,
        evidence_exchange=_mean(any(a.shown_exchanges) for a in with_exchange) if evidence else None,
        any_shown=_mean(bool(a.shown_sessions) for a in queries),
        segments_per_query=_mean(float(len(a.shown_sessions)) for a in queries),
        exchanges_per_query=_mean(float(len(a.shown_exchanges)) for a in queries),
        block_tokens=_mean(float(tokens) for tokens in blocks),
    )
