"""Reciprocal rank fusion (the rrfMerge tests, docs/decisions/009-carried-over-requirements.md)."""

from __future__ import annotations

import pytest

from klaw.memory.fusion import RRF_K, reciprocal_rank_fusion


def test_score_is_one_over_k_plus_rank_plus_one() -> None:
    fused = reciprocal_rank_fusion([[10, 20]])
    assert [item.rowid for item in fused] == [10, 20]
    assert fused[0].score == pytest.approx(1 / (RRF_K + 1))
    assert fused[1].score == pytest.approx(1 / (RRF_K + 2))


def test_document_in_both_sets_scores_higher_than_unique() -> None:
    # 3 is only third in each list, yet beats 1 and 2, each first in one list only.
    fused = reciprocal_rank_fusion([[1, 5, 3], [2, 6, 3]])
    assert fused[0].rowid == 3
    assert fused[0].score == pytest.approx(2 / (RRF_K + 3))
    assert fused[0].score > max(item.score for item in fused[1:])


def test_deduplicates_by_rowid() -> None:
    fused = reciprocal_rank_fusion([[1, 2, 3], [3, 2, 1], [2, 2]])
    assert sorted(item.rowid for item in fused) == [1, 2, 3]
    by_rowid = {item.rowid: item.score for item in fused}
    # A rowid repeated inside one ranking counts once, at its first position.
    assert by_rowid[2] == pytest.approx(2 / (RRF_K + 2) + 1 / (RRF_K + 1))


def test_ties_are_deterministic_better_position_then_earlier_ranking_then_rowid() -> None:
    # 7 (first in ranking 0) and 9 (first in ranking 1) tie: the earlier ranking wins.
    assert [i.rowid for i in reciprocal_rank_fusion([[7], [9]])] == [7, 9]
    assert [i.rowid for i in reciprocal_rank_fusion([[9], [7]])] == [9, 7]
    # Same score and position in the same ranking cannot happen; equal everything but rowid can:
    fused = reciprocal_rank_fusion([[5, 4], [4, 5]])
    assert [i.rowid for i in fused] == [5, 4]  # both 1/61 + 1/62; 5 is first in the earlier ranking


def test_empty_rankings_fuse_to_nothing_and_k_must_not_be_negative() -> None:
    assert reciprocal_rank_fusion([]) == []
    assert reciprocal_rank_fusion([[], []]) == []
    with pytest.raises(ValueError, match="k must be"):
        reciprocal_rank_fusion([[1]], k=-1)
