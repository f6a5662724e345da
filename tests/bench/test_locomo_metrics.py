"""LoCoMo bench figures on hand-made rankings, and evidence normalisation of data/README.md §1."""

from __future__ import annotations

import math

import pytest

from klaw.bench.locomo.dataset import normalise_evidence
from klaw.bench.locomo.metrics import QuestionScores, mean_scores, score_question, summarise


def filler(count: int, prefix: str = "F") -> list[str]:
    return [f"{prefix}{i}" for i in range(count)]


def test_every_figure_of_one_question() -> None:
    # Evidence at positions 2, 7 and 30; sessions: fillers in 9, 8, 7, 6 come first.
    ranking = filler(30)
    ranking[1], ranking[6], ranking[29] = "D1:1", "D2:5", "D3:2"
    session_of = {"D1:1": 1, "D2:5": 2, "D3:2": 3}
    session_of.update({"F0": 9, "F2": 9, "F3": 8, "F4": 7, "F5": 6})
    session_of.update({name: 5 for name in ranking if name not in session_of})

    scores = score_question(ranking, ["D1:1", "D2:5", "D3:2"], session_of)

    ideal = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert scores == pytest.approx(
        QuestionScores(
            r1=0.0,
            r3=1 / 3,
            r5=1 / 3,
            r10=2 / 3,
            r25=2 / 3,
            r50=1.0,
            all_hit10=0.0,
            mrr50=0.5,
            ndcg10=(1 / math.log2(3) + 1 / math.log2(8)) / ideal,  # 0.4525
            session_r5=1 / 3,  # first five sessions 9, 1, 8, 7, 6: only session 1 of {1, 2, 3}
        )
    )
    assert scores.ndcg10 == pytest.approx(0.45251, abs=1e-5)


def test_all_hit_perfect_ranking_and_ideal_dcg_capped_at_ten() -> None:
    evidence = [f"D1:{i}" for i in range(1, 13)]  # 12 evidence turns
    session_of = {turn: 1 for turn in evidence}
    scores = score_question(evidence, evidence, session_of)
    assert (scores.r5, scores.r10, scores.r25, scores.r50) == pytest.approx((5 / 12, 10 / 12, 1, 1))
    assert scores.all_hit10 == 0.0  # two evidence turns cannot fit in the top 10
    assert scores.ndcg10 == pytest.approx(1.0)  # the ideal ranking also holds only 10
    assert scores.mrr50 == 1.0
    assert scores.session_r5 == 1.0

    two = score_question(["D1:2", "D1:1", "X"], ["D1:1", "D1:2"], {"D1:1": 1, "D1:2": 1, "X": 2})
    assert (two.all_hit10, two.mrr50) == (1.0, 1.0)
    assert two.ndcg10 == pytest.approx(1.0)


def test_only_the_top_fifty_count() -> None:
    ranking = [*filler(50), "D1:1"]
    scores = score_question(ranking, ["D1:1"], {"D1:1": 1, **{f: 2 for f in filler(50)}})
    assert scores == QuestionScores(0, 0, 0, 0, 0, 0, 0, 0, 0, 0)

    at_fifty = score_question([*filler(49), "D1:1"], ["D1:1"], {"D1:1": 1, **{f: 1 for f in filler(49)}})
    assert (at_fifty.r25, at_fifty.r50, at_fifty.mrr50, at_fifty.ndcg10) == (0, 1, 1 / 50, 0)


def test_duplicate_evidence_counts_once_and_a_repeated_turn_at_its_first_position() -> None:
    session_of = {"D1:1": 1, "X": 1, "Y": 1}
    once = score_question(["X", "D1:1"], ["D1:1"], session_of)
    assert score_question(["X", "D1:1"], ["D1:1", "D1:1"], session_of) == once
    assert once.mrr50 == 0.5 and once.r5 == 1.0
    # A ranking that repeats X still puts D1:1 second, not third.
    assert score_question(["X", "X", "D1:1"], ["D1:1"], session_of) == once


def test_empty_ranking_scores_zero_and_evidence_is_required() -> None:
    assert score_question([], ["D1:1"], {"D1:1": 1}) == QuestionScores(0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="without evidence"):
        score_question(["D1:1"], [], {"D1:1": 1})


def test_session_recall_uses_first_occurrences_of_sessions() -> None:
    # Sessions in rank order: 1, 1, 2, 2, 3, 4, 5, 6 → first five distinct: 1, 2, 3, 4, 5.
    ranking = ["a", "b", "c", "d", "e", "f", "g", "h"]
    session_of = {"a": 1, "b": 1, "c": 2, "d": 2, "e": 3, "f": 4, "g": 5, "h": 6}
    assert score_question(ranking, ["g", "h"], session_of).session_r5 == 0.5  # session 5 in, 6 out
    assert score_question(ranking, ["g", "h"], session_of).r5 == 0.0  # while no evidence turn is in the top 5
    assert score_question(ranking, ["b", "d"], session_of).session_r5 == 1.0  # two turns, sessions 1 and 2


def test_means_per_category_headline_and_all() -> None:
    one = QuestionScores(1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
    zero = QuestionScores(0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    half = QuestionScores(0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0, 0.5, 0.5, 0.5)
    summary = summarise([(1, one), (4, zero), (4, half), (5, one), (6, zero)])
    assert summary.headline.n == 3 and summary.headline.r5 == pytest.approx(0.5)  # (1 + 0 + 0.5) / 3
    assert summary.headline.all_hit10 == pytest.approx(1 / 3)
    assert summary.overall.n == 5 and summary.overall.r5 == pytest.approx(2.5 / 5)
    assert summary.by_category[4].r10 == pytest.approx(0.25)
    assert sorted(summary.by_category) == [1, 4, 5, 6]
    assert mean_scores([]).n == 0 and mean_scores([]).r5 == 0.0


KNOWN = {"D8:6", "D9:17", "D9:1", "D4:4", "D4:6", "D22:1", "D22:2", "D9:10", "D9:11", "D11:26", "D30:5", "D1:2"}


@pytest.mark.parametrize(
    ("raw", "valid", "unresolved"),
    [
        (["D8:6; D9:17"], ("D8:6", "D9:17"), ()),  # conv-26: ';'
        (["D9:1 D4:4 D4:6"], ("D9:1", "D4:4", "D4:6"), ()),  # conv-49: spaces
        (["D22:1 D22:2 D9:10 D9:11"], ("D22:1", "D22:2", "D9:10", "D9:11"), ()),
        (["D:11:26"], ("D11:26",), ()),  # conv-43
        (["D30:05"], ("D30:5",), ()),  # conv-50: leading zero
        (["D10:19", "D1:2"], ("D1:2",), ("D10:19",)),  # conv-42: no such turn
        (["D", "D1:2"], ("D1:2",), ("D",)),  # conv-42
        (["(D1:2)"], ("D1:2",), ()),  # parentheses, as LoCoMo's scorer strips them
        (["D1:2,D9:1", "D1:2"], ("D1:2", "D9:1"), ()),  # ',' and a duplicate kept once
        ([], (), ()),  # the 4 open-domain items with no evidence
        ([7, "D1:2"], ("D1:2",), ("7",)),  # not a string: unresolved, never a crash
    ],
)
def test_evidence_normalisation(raw: list[object], valid: tuple[str, ...], unresolved: tuple[str, ...]) -> None:
    assert normalise_evidence(raw, KNOWN) == (valid, unresolved)
