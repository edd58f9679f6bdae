"""Backbone robustness on two score tables with known rank agreement."""

import math

import polars as pl
import pytest

from argus_dagster.protocols import robustness as rb


def _videos(means: dict[str, float], task: str = "T2V", inputs=("p1", "p2")) -> pl.DataFrame:
    # every input gets the model's mean +/- 0.5, so the per-model mean is exactly ``means[model]``
    rows = [{"task": task, "model": m, "input_id": i, "final_score": v + (0.5 if k == 0 else -0.5)}
            for m, v in means.items() for k, i in enumerate(inputs)]
    return pl.DataFrame(rows)


def test_one_adjacent_swap_has_known_tau_and_spearman():
    a = _videos({"m1": 8.0, "m2": 6.0, "m3": 4.0, "m4": 2.0})
    b = _videos({"m1": 7.0, "m2": 3.0, "m3": 5.0, "m4": 1.0})  # m2 and m3 swap
    ranks, moves = rb.rank_agreement({"default": a, "vlm-only": b})
    r = ranks.row(0, named=True)
    # 6 pairs, 1 discordant: tau = (5 - 1) / 6; spearman = 1 - 6 * (1 + 1) / (4 * 15) = 0.8
    assert r["kendall_tau"] == pytest.approx(4 / 6) and r["spearman"] == pytest.approx(0.8)
    assert (r["n_models"], r["n_videos"], r["top1_a"], r["top1_b"], r["top1_agree"]) == (4, 8, "m1", "m1", True)
    top = moves.head(2)
    assert sorted(top["model"].to_list()) == ["m2", "m3"] and sorted(top["rank_change"].to_list()) == [-1, 1]
    assert moves.filter(pl.col("model") == "m1")["rank_change"][0] == 0
    assert moves.filter(pl.col("model") == "m2")["mean_b"][0] == pytest.approx(3.0)


def test_reversed_leaderboard_and_top1_and_three_profiles():
    a = _videos({"m1": 8.0, "m2": 6.0, "m3": 4.0})
    b = _videos({"m1": 2.0, "m2": 5.0, "m3": 9.0})
    c = _videos({"m1": 8.5, "m2": 6.5, "m3": 4.5})
    ranks, moves = rb.rank_agreement({"a": a, "b": b, "c": c})
    by = {(r["profile_a"], r["profile_b"]): r for r in ranks.iter_rows(named=True)}
    assert set(by) == {("a", "b"), ("a", "c"), ("b", "c")}
    assert by[("a", "b")]["kendall_tau"] == pytest.approx(-1.0) and by[("a", "b")]["spearman"] == pytest.approx(-1.0)
    assert not by[("a", "b")]["top1_agree"] and by[("a", "b")]["top1_b"] == "m3"
    assert by[("a", "c")]["kendall_tau"] == pytest.approx(1.0) and by[("a", "c")]["top1_agree"]
    ab = moves.filter((pl.col("profile_a") == "a") & (pl.col("profile_b") == "b"))
    assert ab["model"][0] in ("m1", "m3") and abs(ab["rank_change"][0]) == 2


def test_only_videos_both_scored_count_and_tasks_are_separate():
    a = pl.concat([_videos({"m1": 8.0, "m2": 6.0}), _videos({"m1": 1.0, "m2": 9.0}, task="TI2V")])
    b = _videos({"m1": 8.0, "m2": 6.0}).with_columns(
        pl.when((pl.col("model") == "m1") & (pl.col("input_id") == "p2")).then(None)
        .otherwise(pl.col("final_score")).alias("final_score"))
    ranks, _ = rb.rank_agreement({"a": a, "b": b})
    assert ranks["task"].to_list() == ["T2V"]  # TI2V was scored by one profile only
    r = ranks.row(0, named=True)
    assert r["n_videos"] == 3 and r["n_models"] == 2
    with pytest.raises(ValueError, match="at least two profiles"):
        rb.rank_agreement({"a": a})


def test_criterion_agreement_by_hand():
    def crit(scores):
        return pl.DataFrame({"task": "T2V", "model": "m", "input_id": ["p1", "p1", "p2", "p2"],
                             "criterion_id": ["c1", "c2", "c1", "c2"], "dimension": [1, 5, 1, 5], "score": scores})
    a = crit([8, 5, 6, 9])
    b = crit([7, 2, 6, None])
    out = rb.criterion_agreement({"a": a, "b": b})
    rows = {r["criterion"]: r for r in out.iter_rows(named=True)}
    # c1: |8-7| = 1, |6-6| = 0 -> mad 0.5, within 1: 2/2; c2: |5-2| = 3 (p2 unscored in b) -> 3.0, 0/1
    assert (rows["c1"]["mean_abs_diff"], rows["c1"]["within_1"], rows["c1"]["n_pairs"]) == (0.5, 1.0, 2)
    assert (rows["c2"]["mean_abs_diff"], rows["c2"]["within_1"], rows["c2"]["n_pairs"]) == (3.0, 0.0, 1)
    assert rows[rb.ALL]["mean_abs_diff"] == pytest.approx(4 / 3) and rows[rb.ALL]["within_1"] == pytest.approx(2 / 3)
    dims = {r["criterion"]: r for r in rb.criterion_agreement({"a": a, "b": b}, key="dimension").iter_rows(named=True)}
    assert set(dims) == {"1", "5", rb.ALL} and dims["1"]["mean_abs_diff"] == 0.5
    with pytest.raises(ValueError, match="key must be"):
        rb.criterion_agreement({"a": a, "b": b}, key="rubric")


def test_criterion_agreement_pairs_each_sample_with_itself():
    """Two samples per input: per input, profile a scores the samples 0 and 8, profile b 1 and 7. The
    pairs are (0, 1) and (8, 7): 4 pairs over two inputs, each |diff| 1.0. Joined without the sample,
    every sample would meet both (|0-1|, |0-7|, |8-1|, |8-7|): 8 pairs at a mean of 4.0."""
    def crit(s0, s1):
        return pl.DataFrame({"task": "T2V", "model": "m", "input_id": ["p1", "p1", "p2", "p2"],
                             "sample": ["0", "1", "0", "1"], "criterion_id": "c1", "dimension": 3,
                             "score": [s0, s1, s0, s1]})
    for key in ("criterion", "dimension"):
        out = rb.criterion_agreement({"a": crit(0.0, 8.0), "b": crit(1.0, 7.0)}, key=key)
        rows = {r["criterion"]: r for r in out.iter_rows(named=True)}
        assert (rows[rb.ALL]["n_pairs"], rows[rb.ALL]["mean_abs_diff"], rows[rb.ALL]["within_1"]) == (4, 1.0, 1.0)
    # a table without a sample column is one video per input, as before
    single = rb.criterion_agreement({"a": crit(0.0, 8.0).drop("sample").head(1), "b": crit(1.0, 7.0).drop("sample").head(1)})
    assert single.filter(pl.col("criterion") == rb.ALL)["n_pairs"][0] == 1


def test_format_robustness():
    a = _videos({"m1": 8.0, "m2": 6.0, "m3": 4.0, "m4": 2.0})
    b = _videos({"m1": 7.0, "m2": 3.0, "m3": 5.0, "m4": 1.0})
    ranks, moves = rb.rank_agreement({"default": a, "vlm-only": b})
    crit = pl.DataFrame({"task": "T2V", "model": "m1", "input_id": "p1", "criterion_id": "c1", "dimension": 1,
                         "score": [7]})
    text = rb.format_robustness(ranks, moves, rb.criterion_agreement({"default": crit, "vlm-only": crit}))
    assert "T2V: default vs vlm-only (4 models, 8 videos scored by both)" in text
    assert "kendall tau 0.667  spearman 0.800  top-1 same (m1 / m1)" in text
    assert "mean |diff| 0.000, within 1 point 1.000 over 1 pairs" in text
    assert rb.format_robustness(ranks.clear(), moves) == "no video scored by both profiles"
    assert math.isnan(rb.rank_agreement({"a": _videos({"m1": 1.0}), "b": _videos({"m1": 2.0})})[0]["spearman"][0])
