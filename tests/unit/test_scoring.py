"""Aggregation (method §8) and the leaderboard (method §9)."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from argus_dagster.method.leaderboard import bootstrap_ci, build_leaderboard, format_leaderboard
from argus_dagster.method.scoring import DEFAULT_ALPHA, ScoredCriterion, aggregate


def sc(cid, importance, score, type_="soft", cap=None, threshold=5.0):
    return ScoredCriterion(cid, importance, type_, score, cap, threshold)


def test_base_is_importance_weighted_mean():
    # (3*8 + 2*5 + 1*2) / (3 + 2 + 1) = 36 / 6 = 6.0
    agg = aggregate([sc("a", "high", 8), sc("b", "medium", 5), sc("c", "low", 2)], alpha=1.0)
    assert agg.base_score == pytest.approx(6.0)
    assert agg.final_score == pytest.approx(6.0)
    assert agg.cap == 10.0 and agg.caps_fired == []
    assert (agg.n_scored, agg.n_criteria) == (3, 3)


def test_weights_differ_by_importance():
    # Two criteria, one 10 one 0: which one is high decides the base.
    assert aggregate([sc("a", "high", 10), sc("b", "low", 0)]).base_score == pytest.approx(7.5)
    assert aggregate([sc("a", "low", 10), sc("b", "high", 0)]).base_score == pytest.approx(2.5)
    assert aggregate([sc("a", "medium", 10), sc("b", "low", 1)]).base_score == pytest.approx(7.0)


def test_hard_criterion_fires_below_threshold():
    crits = [sc("hard", "high", 4, "hard", cap=4), sc("b", "high", 10), sc("c", "medium", 10)]
    agg = aggregate(crits, alpha=1.0)
    # base = (12 + 30 + 20) / 8 = 7.75
    assert agg.base_score == pytest.approx(7.75)
    assert agg.cap == 4.0 and agg.caps_fired == ["hard"]
    assert agg.final_score == pytest.approx(4.0)


def test_hard_criterion_does_not_fire_at_threshold():
    crits = [sc("hard", "high", 5, "hard", cap=2), sc("b", "high", 9)]
    agg = aggregate(crits, alpha=1.0)
    assert agg.caps_fired == [] and agg.cap == 10.0
    assert agg.final_score == pytest.approx(7.0)


def test_custom_fail_threshold():
    crits = [sc("hard", "high", 6, "hard", cap=6, threshold=7), sc("b", "high", 10)]
    agg = aggregate(crits, alpha=1.0)
    assert agg.caps_fired == ["hard"] and agg.final_score == pytest.approx(6.0)


def test_soft_criterion_never_fires():
    agg = aggregate([sc("soft", "high", 0, "soft", cap=2), sc("b", "high", 10)], alpha=1.0)
    assert agg.caps_fired == [] and agg.cap == 10.0 and agg.final_score == pytest.approx(5.0)


def test_smallest_cap_among_fired():
    crits = [sc("h6", "high", 1, "hard", cap=6), sc("h2", "low", 3, "hard", cap=2),
             sc("h4", "medium", 0, "hard", cap=4), sc("ok", "high", 9, "hard", cap=2),
             sc("nocap", "high", 0, "hard", cap=None)]
    agg = aggregate(crits, alpha=1.0)
    assert agg.cap == 2.0
    assert agg.caps_fired == ["h6", "h2", "h4"]  # "ok" did not fire; "nocap" has no cap
    assert agg.final_score == pytest.approx(min(agg.base_score, 2.0))


def test_cap_above_base_changes_nothing():
    crits = [sc("h", "high", 4, "hard", cap=6), sc("b", "high", 4)]
    agg = aggregate(crits, alpha=1.0)
    assert agg.cap == 6.0 and agg.final_score == pytest.approx(agg.base_score) == pytest.approx(4.0)


@pytest.mark.parametrize("alpha, expected", [(0.0, 7.75), (1.0, 4.0), (0.5, 5.875), (0.25, 6.8125)])
def test_alpha_blend(alpha, expected):
    crits = [sc("hard", "high", 4, "hard", cap=4), sc("b", "high", 10), sc("c", "medium", 10)]
    agg = aggregate(crits, alpha=alpha)
    assert agg.base_score == pytest.approx(7.75)
    assert agg.final_score == pytest.approx(expected)
    assert agg.cap_alpha == alpha


def test_default_alpha_is_released_half():
    assert DEFAULT_ALPHA == 0.5
    crits = [sc("hard", "high", 2, "hard", cap=2), sc("b", "high", 10)]
    assert aggregate(crits).final_score == pytest.approx(0.5 * 6 + 0.5 * 2)


def test_unscored_criteria_excluded_from_weights():
    crits = [sc("a", "high", 6), sc("b", "medium", None), sc("c", "low", 9),
             sc("hard_unscored", "high", None, "hard", cap=2)]
    agg = aggregate(crits, alpha=1.0)
    assert agg.base_score == pytest.approx((18 + 9) / 4)
    assert agg.caps_fired == [] and agg.cap == 10.0
    assert (agg.n_scored, agg.n_criteria) == (2, 4)


def test_all_unscored_gives_no_scores():
    agg = aggregate([sc("a", "high", None), sc("b", "low", None, "hard", cap=2)])
    assert agg.base_score is None and agg.final_score is None
    assert agg.n_scored == 0 and agg.n_criteria == 2 and agg.caps_fired == []
    assert aggregate([]).final_score is None


@pytest.mark.parametrize("alpha", [-0.01, 1.01, 2, float("nan")])
def test_alpha_outside_unit_interval_raises(alpha):
    with pytest.raises(ValueError, match="alpha"):
        aggregate([sc("a", "high", 5)], alpha=alpha)


# --- leaderboard ------------------------------------------------------------------------------

def test_bootstrap_ci_edge_cases():
    lo, hi = bootstrap_ci(np.array([]))
    assert math.isnan(lo) and math.isnan(hi)
    assert bootstrap_ci(np.array([7.5])) == (7.5, 7.5)
    assert bootstrap_ci(np.array([4.0, 4.0, 4.0])) == pytest.approx((4.0, 4.0))


def test_bootstrap_ci_brackets_mean_and_is_seeded():
    rng = np.random.default_rng(1)
    values = rng.uniform(0, 10, 40)
    lo, hi = bootstrap_ci(values)
    assert lo < values.mean() < hi
    assert values.min() <= lo and hi <= values.max()
    assert (lo, hi) == bootstrap_ci(values)
    assert (lo, hi) != bootstrap_ci(values, seed=1)
    # More data, narrower interval.
    lo2, hi2 = bootstrap_ci(np.tile(values, 10))
    assert hi2 - lo2 < hi - lo


def _scores():
    return pl.DataFrame({
        "task": ["T2V", "T2V", "T2V", "T2V", "T2V", "TI2V", "TI2V"],
        "model": ["a", "a", "a", "b", "b", "a", "c"],
        "input_id": ["1", "2", "3", "1", "2", "1", "1"],
        "final_score": [6.0, 8.0, None, 9.0, 9.5, None, 3.0],
    }, schema_overrides={"final_score": pl.Float64})


def test_build_leaderboard_means_errors_and_order():
    lb = build_leaderboard(_scores(), bench="b1", profile="vlm-only")
    assert set(lb["bench"]) == {"b1"} and set(lb["profile"]) == {"vlm-only"}
    assert lb.columns == ["bench", "profile", "task", "model", "mean_final", "ci_low", "ci_high", "n_videos", "n_errors",
                          "n_scored", "n_criteria", "weight_scored", "covers", "judge", "needs_vlm", "ci_scope",
                          "rank", "rank_low", "rank_high", "shares_top", "loses_to", "partial_evidence", "not_judged",
                          "dimensions", "dimension_means", "judge_sd", "rank_holds_under_noise"]
    rows = {(r["task"], r["model"]): r for r in lb.iter_rows(named=True)}
    a = rows[("T2V", "a")]
    assert a["mean_final"] == pytest.approx(7.0)
    assert (a["n_videos"], a["n_errors"]) == (2, 1)
    assert 6.0 <= a["ci_low"] <= 7.0 <= a["ci_high"] <= 8.0
    b = rows[("T2V", "b")]
    assert b["mean_final"] == pytest.approx(9.25) and b["n_errors"] == 0
    only_errors = rows[("TI2V", "a")]
    assert only_errors["mean_final"] is None and only_errors["ci_low"] is None
    assert (only_errors["n_videos"], only_errors["n_errors"]) == (0, 1)
    # Sorted by task, best model first, models with no score last.
    assert lb.select("task", "model").rows() == [("T2V", "b"), ("T2V", "a"), ("TI2V", "c"), ("TI2V", "a")]
    text = format_leaderboard(lb)
    assert "T2V" in text and "TI2V" in text and "     -" in text


def test_build_leaderboard_empty():
    empty = pl.DataFrame(schema={"task": pl.String, "model": pl.String, "final_score": pl.Float64})
    lb = build_leaderboard(empty)
    assert lb.height == 0 and "mean_final" in lb.columns
