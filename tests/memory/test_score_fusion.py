"""Weighted score fusion and the share of a hit's score lent to its neighbours (pure functions)."""

from __future__ import annotations

import pytest

from klaw.memory.fusion import MIN_SHARE, min_max, score_fusion
from klaw.memory.neighbour_scores import Spread, spread_to_neighbours, step_weight


def test_min_max_maps_best_to_one_and_worst_to_the_floor() -> None:
    middle = MIN_SHARE + (1 - MIN_SHARE) / 2
    assert min_max({1: 10.0, 2: 6.0, 3: 2.0}) == pytest.approx({1: 1.0, 2: middle, 3: MIN_SHARE})
    assert min_max({1: -3.0, 2: -5.0}, floor=0.0) == {1: 1.0, 2: 0.0}


def test_min_max_of_equal_scores_or_one_candidate_is_one_and_of_none_is_empty() -> None:
    assert min_max({4: 0.3, 5: 0.3}) == {4: 1.0, 5: 1.0}
    assert min_max({7: -12.5}) == {7: 1.0}
    assert min_max({}) == {}


def test_score_fusion_weights_each_side_and_adds_a_rowid_found_by_both() -> None:
    vector = {1: 0.9, 2: 0.5}  # cosine similarity
    text = {2: 8.0, 3: 2.0}  # −bm25
    fused = score_fusion([(vector, 0.4), (text, 0.6)])
    assert fused == pytest.approx({1: 0.4, 2: 0.4 * MIN_SHARE + 0.6, 3: 0.6 * MIN_SHARE})
    assert max(fused, key=fused.__getitem__) == 2


def test_score_fusion_keeps_the_gap_rank_fusion_would_flatten() -> None:
    # Full text's best is far ahead of its second; the vector side barely separates its two.
    fused = score_fusion([({1: 0.51, 2: 0.50}, 0.4), ({2: 20.0, 1: 1.0}, 0.6)])
    assert fused[2] > fused[1]


def test_score_fusion_with_an_empty_side_and_bad_weight() -> None:
    assert score_fusion([({}, 0.4), ({5: 1.0}, 0.6)]) == {5: 0.6}
    assert score_fusion([]) == {}
    with pytest.raises(ValueError, match="weights"):
        score_fusion([({1: 1.0}, -0.1)])


def test_step_weight_halves_per_step() -> None:
    assert [step_weight(0.4, d) for d in (1, 2, 3)] == pytest.approx([0.4, 0.2, 0.1])


def test_neighbours_receive_a_share_and_may_enter_the_ranking() -> None:
    scores = {10: 1.0, 20: 0.5}
    neighbours = {10: [(9, 1), (11, 1), (12, 2)], 20: [(19, 1), (21, 1)]}
    spread = spread_to_neighbours(scores, neighbours, 0.4)
    assert spread[10] == Spread(1.0, 1.0, None)
    assert (spread[11].own, spread[11].lender) == (0.0, 10)
    assert spread[11].score == pytest.approx(0.4)
    assert spread[12].score == pytest.approx(0.2)
    assert spread[19].score == pytest.approx(0.2) and spread[19].lender == 20
    assert set(spread) == {9, 10, 11, 12, 19, 20, 21}


def test_a_candidate_next_to_another_adds_both_and_names_its_biggest_lender() -> None:
    spread = spread_to_neighbours({1: 1.0, 2: 0.5, 3: 0.25}, {1: [(2, 1)], 3: [(2, 1)], 2: [(1, 1), (3, 1)]}, 0.4)
    assert spread[2].score == pytest.approx(0.5 + 0.4 * 1.0 + 0.4 * 0.25)
    assert spread[2].own == 0.5 and spread[2].lender == 1
    assert spread[1].score == pytest.approx(1.0 + 0.4 * 0.5)


def test_excluded_rowids_receive_nothing_and_weight_zero_lends_nothing() -> None:
    neighbours = {1: [(2, 1), (3, 2)]}
    assert set(spread_to_neighbours({1: 1.0}, neighbours, 0.4, excluded=frozenset({2}))) == {1, 3}
    assert spread_to_neighbours({1: 1.0}, neighbours, 0.0) == {1: Spread(1.0, 1.0, None)}
    with pytest.raises(ValueError, match="weight"):
        spread_to_neighbours({1: 1.0}, neighbours, -1.0)


def test_equal_loans_name_the_smaller_lender() -> None:
    spread = spread_to_neighbours({5: 1.0, 3: 1.0}, {5: [(4, 1)], 3: [(4, 1)]}, 0.4)
    assert spread[4].lender == 3
