"""FIRM-Video's preference accuracy (pairs within a prompt, ties within 0.5), by hand."""

import math

import numpy as np
import polars as pl
import pytest

from argus_dagster.protocols.alignment import metrics as al


def test_preference_counts_by_hand():
    # pairs (a,b), (a,c), (b,c); human 5, 3, 3 -> a>b, a>c, b=c
    # pred 4, 2, 2.4 -> a>b (1), a>c (1), |2-2.4| = 0.4 <= 0.5 tie, human tie -> 0.5 ; total 2.5 / 3
    assert al.preference_counts([4, 2, 2.4], [5, 3, 3]) == (2.5, 3)
    # pred 4, 2, 3 -> b<c is a preference where the humans tie -> 0 ; total 2 / 3
    assert al.preference_counts([4, 2, 3], [5, 3, 3]) == (2.0, 3)
    # a wrong order and a tie called where humans prefer -> 0 each
    assert al.preference_counts([1, 1.5], [2, 4]) == (0.0, 1)  # diff 0.5 exactly is a tie
    assert al.preference_counts([1, 1.6], [2, 4]) == (1.0, 1)
    assert al.preference_counts([2, 1], [2, 4]) == (0.0, 1)
    # human difference within 0.5 is a tie (averaged ratings): 3.0 vs 3.5
    assert al.preference_counts([3, 3], [3.0, 3.5]) == (0.5, 1)
    assert al.preference_counts([7], [3]) == (0.0, 0)


def test_preference_accuracy_pools_pairs_within_prompts_only():
    pred = np.array([4, 2, 2.4, 1, 5])
    human = np.array([5, 3, 3, 1, 2])
    groups = ["p1", "p1", "p1", "p2", "p2"]
    # p1: 2.5 of 3 (above); p2: pred 1 < 5 and human 1 < 2 (a gap of 1 > 0.5) -> 1. Cross-prompt
    # pairs (p1's 4 against p2's 1, ...) are never formed: 4 pairs, 3.5 credit.
    acc, n = al.preference_accuracy(pred, human, groups)
    assert (n, acc) == (4, pytest.approx(3.5 / 4))
    acc, n = al.preference_accuracy(pred, human, ["p"] * 5)
    assert n == 10


def test_preference_pred_tolerance_for_other_scales():
    # a 0-10 evaluator whose 1-point gap should count as a tie on its own scale
    assert al.preference_counts([6, 7], [3, 3], pred_tie_tolerance=1.0) == (0.5, 1)
    assert al.preference_counts([6, 7], [3, 3]) == (0.0, 1)


def test_align_reports_preference_on_the_human_scale():
    # evaluator on 0-10, humans on 1-5; mapped: 0->1, 10->5, so 6 and 7 are 3.4 and 3.8 (a tie)
    res = al.align(np.array([0, 10, 6, 7]), np.array([1, 5, 3, 3]), ["p", "p", "p", "p"],
                   pred_range=(0, 10), human_range=(1, 5), n_boot=0)
    # pairs: (0,10) 1; (0,6) 1; (0,7) 1; (10,6) 1; (10,7) 1; (6,7) tie/tie 0.5 -> 5.5/6
    assert res.preference_acc == pytest.approx(5.5 / 6)
    table = al.alignment_table(pl.DataFrame({"input_id": ["p"] * 4, "model": list("abcd"), "dimension": ["if"] * 4,
                                             "score": [1.0, 5, 3, 3]}),
                               pl.DataFrame({"input_id": ["p"] * 4, "model": list("abcd"), "evaluator": ["firm_if"] * 4,
                                             "dimension": ["if"] * 4, "score": [1.0, 5, 3, 3]}), n_boot=0)
    assert table["preference_acc"].to_list() == [pytest.approx(5.5 / 6)]
    assert "pref" in al.format_alignment(table) and not math.isnan(table["preference_acc"][0])
