"""The past-sessions figures on hand-made rankings: every value below is worked out by hand."""

from __future__ import annotations

from dataclasses import astuple, replace

import pytest

from klaw.bench.locomo.past_sessions import Asked, EvidenceExchange
from klaw.bench.locomo.past_sessions_figures import (
    THRESHOLDS,
    GateRow,
    LevelFigures,
    Spread,
    exchange_figures,
    found_exchanges,
    found_segments,
    segment_figures,
    shown_figures,
)
from klaw.config import RagConfig

RAG = RagConfig(conversation_limit=2, exchange_limit_per_conversation=1)

# q1: evidence in session 2, ranked second; its evidence exchange first of its session.
Q1 = Asked(
    sample_id="s",
    kind="question",
    index=0,
    category=4,
    evidence_sessions=frozenset({2}),
    segments=((1, 0.6), (2, 0.5), (3, 0.2)),
    exchanges={1: ((False, 0.55),), 2: ((True, 0.45),), 3: ((False, 0.1),)},
    evidence_exchange=EvidenceExchange(2, 0.45, 1, (0.4, 0.05)),
    shown_sessions=(1, 2),
    shown_exchanges=(False, True),
    block_tokens=120,
)
# q2: evidence in sessions 3 (ranked first) and 4 (no summary); its evidence exchange second of its session.
Q2 = Asked(
    sample_id="s",
    kind="question",
    index=1,
    category=1,
    evidence_sessions=frozenset({3, 4}),
    segments=((3, 0.7), (1, 0.3), (2, 0.25)),
    exchanges={3: ((False, 0.65),), 1: ((False, 0.2),)},
    evidence_exchange=EvidenceExchange(3, 0.5, 2, (0.65,)),
    shown_sessions=(3,),
    shown_exchanges=(False,),
    block_tokens=80,
)
CHAT = Asked(
    sample_id="s",
    kind="chitchat",
    index=0,
    category=None,
    evidence_sessions=frozenset(),
    segments=((2, 0.32), (1, 0.1), (3, 0.05)),
    exchanges={2: ((False, 0.31),)},
    evidence_exchange=None,
)
ASKED = [Q1, Q2, CHAT]


def gate(figures: LevelFigures, threshold: float) -> GateRow:
    return figures.gate[THRESHOLDS.index(threshold)]


def test_found_is_a_prefix_of_the_ranking_within_the_limits() -> None:
    assert found_segments(Q2, 0.25, RAG) == [(3, 0.7), (1, 0.3)]  # (2, 0.25) is third: beyond the limit
    assert found_segments(Q2, 0.35, RAG) == [(3, 0.7)]
    assert found_exchanges(Q1, 0.35, RAG) == [(False, 0.55), (True, 0.45)]
    assert found_exchanges(Q1, 0.5, RAG) == [(False, 0.55)]
    assert found_exchanges(CHAT, 0.3, RAG) == [(False, 0.31)]
    assert found_exchanges(CHAT, 0.35, RAG) == []


def test_segment_figures_of_questions() -> None:
    figures = segment_figures(ASKED, "question", RAG)
    assert figures.count == 2 and figures.missing == 0
    assert figures.evidence is not None  # best evidence: 0.5 and 0.7
    assert astuple(figures.evidence) == pytest.approx(astuple(Spread(2, 0.6, 0.52, 0.55, 0.6, 0.65, 0.68)))
    assert figures.others is not None and figures.others.count == 4
    assert figures.others.p50 == pytest.approx(0.275)
    assert figures.top is not None and figures.top.mean == pytest.approx(0.65)
    assert figures.hit_at == {1: 0.5, 3: 1.0, 5: 1.0}
    assert figures.recall_at == {1: 0.25, 3: 0.75, 5: 0.75}  # session 4 has no summary: never ranked
    assert gate(figures, 0.35) == GateRow(0.35, 1.0, 1.0, 1.0, 1.5)
    assert gate(figures, 0.55) == GateRow(0.55, 0.5, 0.5, 1.0, 1.0)  # q1: only session 1 passes
    assert gate(figures, 0.7) == GateRow(0.7, 0.5, 0.5, 0.5, 0.5)


def test_segment_figures_of_chitchat_count_anything_found() -> None:
    figures = segment_figures(ASKED, "chitchat", RAG)
    assert (figures.count, figures.evidence, figures.others, figures.hit_at) == (1, None, None, {})
    assert gate(figures, 0.3) == GateRow(0.3, None, None, 1.0, 1.0)
    assert gate(figures, 0.35) == GateRow(0.35, None, None, 0.0, 0.0)


def test_exchange_figures_of_questions() -> None:
    figures = exchange_figures(ASKED, "question", RAG)
    assert figures.count == 2 and figures.missing == 0
    assert figures.evidence is not None and figures.evidence.mean == pytest.approx(0.475)
    assert figures.others is not None and figures.others.count == 3
    assert figures.hit_at == {1: 0.5, 2: 1.0, 3: 1.0}
    # q1 finds its evidence exchange at 0.35 (segments 1 and 2, one exchange each); q2's is second in session 3.
    assert gate(figures, 0.35) == GateRow(0.35, 1.0, 0.5, 1.0, 1.5)
    assert gate(figures, 0.5) == GateRow(0.5, 0.5, 0.0, 1.0, 1.0)
    chat = exchange_figures(ASKED, "chitchat", RAG)
    assert gate(chat, 0.3).any_found == 1.0 and gate(chat, 0.35).any_found == 0.0


def test_exchange_figures_leave_out_questions_without_an_evidence_summary() -> None:
    without = replace(Q2, evidence_exchange=None)
    figures = exchange_figures([Q1, without], "question", RAG)
    assert (figures.count, figures.missing, figures.hit_at[1]) == (1, 1, 1.0)


def test_shown_figures() -> None:
    shown = shown_figures(ASKED, "question")
    assert (shown.count, shown.evidence_segment, shown.evidence_exchange, shown.any_shown) == (2, 1.0, 0.5, 1.0)
    assert (shown.segments_per_query, shown.exchanges_per_query, shown.block_tokens) == (1.5, 1.5, 100.0)
    chat = shown_figures(ASKED, "chitchat")
    assert (chat.evidence_segment, chat.any_shown, chat.block_tokens) == (None, 0.0, 0.0)
