"""argus_dagster.method.compare: B against A, paired by input. The permutation test is checked against
scipy's own (an independent computation), the interval against what pairing must give, the flips and
the gate against tables whose answer is known."""

import numpy as np
import polars as pl
import pytest
from scipy import stats

from argus_dagster.method.compare import EXACT_UP_TO, OVERALL, compare, gate, paired_bootstrap, sign_flip_p, smallest_p


def _scipy_p(diffs: np.ndarray, n_resamples=np.inf) -> float:
    res = stats.permutation_test((diffs,), lambda d: np.mean(d), permutation_type="samples",
                                 n_resamples=n_resamples, alternative="two-sided")
    return float(res.pvalue)


@pytest.mark.parametrize("seed", range(5))
def test_the_exact_sign_flip_p_is_scipys(seed):
    rng = np.random.default_rng(seed)
    diffs = np.round(rng.normal(0.4 * seed, 1.0, size=6 + seed), 1)  # ties among |diffs| included
    assert len(diffs) <= EXACT_UP_TO
    assert sign_flip_p(diffs) == pytest.approx(_scipy_p(diffs))


def test_sign_flip_p_by_hand():
    assert sign_flip_p(np.array([1.0, 2.0, 3.0])) == 0.25  # all + or all - reach |mean| 2: 2 of 8 patterns
    assert sign_flip_p(np.array([1.0, -1.0])) == 1.0
    assert sign_flip_p(np.zeros(7)) == 1.0
    assert sign_flip_p(np.array([])) is None
    assert smallest_p(5) == 2 / 32 and smallest_p(6) == 2 / 64


def test_the_monte_carlo_sign_flip_p_above_the_exact_range():
    rng = np.random.default_rng(1)
    strong = rng.normal(1.0, 0.5, size=40)
    assert sign_flip_p(strong) == pytest.approx(1 / 20_001)  # no random pattern reaches it
    null = rng.normal(0.0, 1.0, size=40)
    assert abs(sign_flip_p(null) - _scipy_p(null, 20_000)) < 0.02  # the same test, both sampled


def test_the_interval_is_paired_over_inputs():
    # Inputs differ a lot from one another; B is A plus one point on each: a paired interval is that
    # point exactly, where one over unpaired means would span several points.
    a = np.array([1.0, 9.0, 3.0, 7.0, 5.0, 2.0, 8.0])
    assert paired_bootstrap(a + 1.0 - a) == (1.0, 1.0)
    low, high = paired_bootstrap(np.array([0.5, 1.5, 1.0, 0.8, 1.2, 0.9, 1.1]))
    assert 0.5 < low < 1.0 < high < 1.5
    assert paired_bootstrap(np.array([2.0])) == (2.0, 2.0)


def _scores(model: str, finals: dict[str, float], task: str = "T2V", judge: str = "evidence-only") -> pl.DataFrame:
    return pl.DataFrame({"task": task, "model": model, "input_id": list(finals), "sample": "",
                         "final_score": list(finals.values()), "judge": judge})


def _criteria(model: str, rows: list[tuple]) -> pl.DataFrame:
    """rows: (input_id, criterion_id, dimension, type, hard_cap, score, rationale)."""
    return pl.DataFrame([{"task": "T2V", "model": model, "input_id": i, "sample": "", "criterion_id": c, "dimension": d,
                          "type": t, "hard_cap": cap, "fail_threshold": 5.0, "score": s, "rationale": r}
                         for i, c, d, t, cap, s, r in rows],
                        schema={"task": pl.String, "model": pl.String, "input_id": pl.String, "sample": pl.String,
                                "criterion_id": pl.String, "dimension": pl.Int64, "type": pl.String,
                                "hard_cap": pl.Int64, "fail_threshold": pl.Float64, "score": pl.Float64,
                                "rationale": pl.String})


def test_compare_pairs_on_shared_inputs_and_averages_samples():
    a = _scores("a", {"p0": 6.0, "p1": 7.0, "p2": 8.0, "only_a": 1.0})
    b = pl.concat([_scores("b", {"p0": 5.0, "p1": 7.0, "only_b": 9.0}),
                   _scores("b", {"p2": 9.0}).with_columns(pl.lit("0").alias("sample")),
                   _scores("b", {"p2": 10.0}).with_columns(pl.lit("1").alias("sample"))])
    c = compare(a, b, a="a", b="b")
    [row] = c.rows.filter(pl.col("dimension") == OVERALL).to_dicts()
    # p2's two samples are one input (9.5): diffs -1, 0, +1.5
    assert (row["n_inputs"], row["wins"], row["ties"], row["losses"]) == (3, 1, 1, 1)
    assert row["mean_a"] == pytest.approx(7.0) and row["mean_b"] == pytest.approx(21.5 / 3)
    assert row["diff"] == pytest.approx(0.5 / 3)
    assert row["p_value"] == sign_flip_p(np.array([-1.0, 0.0, 1.5]))
    assert [m["input_id"] for m in c.movers] == ["p2", "p0"]  # the largest move first; p1 did not move
    assert c.judges == {"a": ["evidence-only"], "b": ["evidence-only"]}


def test_flips_are_the_criteria_that_crossed_their_threshold_with_both_rationales():
    a = _scores("a", {"p0": 8.0, "p1": 8.0})
    b = _scores("b", {"p0": 2.0, "p1": 8.0})
    ca = _criteria("a", [("p0", "identity", 1, "hard", 2, 9.0, "the cat is there"),
                         ("p0", "motion", 9, "soft", None, 6.0, "moves"),
                         ("p1", "motion", 9, "soft", None, 4.0, "barely moves")])
    cb = _criteria("b", [("p0", "identity", 1, "hard", 2, 1.0, "no cat"),
                         ("p0", "motion", 9, "soft", None, 5.5, "moves less"),
                         ("p1", "motion", 9, "soft", None, 7.0, "moves well")])
    c = compare(a, b, ca, cb, a="a", b="b")
    flips = {(f["input_id"], f["criterion_id"]): f for f in c.flips}
    assert set(flips) == {("p0", "identity"), ("p1", "motion")}  # 6.0 -> 5.5 stays a pass
    cap = flips[("p0", "identity")]
    assert (cap["verdict_a"], cap["verdict_b"], cap["hard_cap"]) == ("pass", "fail", 2)
    assert (cap["rationale_a"], cap["rationale_b"]) == ("the cat is there", "no cat")
    assert c.flips[0] is cap  # a cap that fired first
    assert flips[("p1", "motion")]["hard_cap"] is None and flips[("p1", "motion")]["verdict_b"] == "pass"
    dims = {r["dimension"]: r for r in c.rows.iter_rows(named=True)}
    assert list(dims) == [OVERALL, "1", "9"]
    assert dims["9"]["n_inputs"] == 2 and dims["9"]["diff"] == pytest.approx(((5.5 - 6.0) + (7.0 - 4.0)) / 2)
    assert c.criteria == {"a": 3, "b": 3}


def test_a_criterion_stored_without_its_threshold_has_no_verdict_to_flip():
    """A table stored without thresholds (an older table read beside a newer one): its criteria still
    count in the dimensions, but no verdict is read from them."""
    a, b = _scores("a", {"p0": 8.0}), _scores("b", {"p0": 2.0})
    ca = _criteria("a", [("p0", "identity", 1, "hard", 2, 9.0, "the cat is there")])
    cb = _criteria("b", [("p0", "identity", 1, "hard", 2, 1.0, "no cat")]).with_columns(
        pl.lit(None, dtype=pl.Float64).alias("fail_threshold"))
    c = compare(a, b, ca, cb, a="a", b="b")
    assert c.flips == []
    assert {r["dimension"] for r in c.rows.iter_rows(named=True)} == {OVERALL, "1"}


def test_the_gate_fails_only_where_b_is_worse_beyond_the_margin_and_not_by_chance():
    inputs = [f"p{i}" for i in range(8)]
    base = {i: 5.0 + k % 4 for k, i in enumerate(inputs)}
    worse = compare(_scores("a", base), _scores("b", {i: s - 1.0 - 0.1 * (k % 3) for k, (i, s) in enumerate(base.items())}),
                    a="a", b="b")
    failed, untold = gate(worse)
    assert len(failed) == 1 and failed[0].startswith("T2V: b is worse than a by 1.09 (95% interval -1.14 to -1.04 on 8 inputs, p = 0.00781)") and not untold
    assert gate(worse, margin=1.5) == ([], [])  # within the margin
    better = compare(_scores("b", base), _scores("a", {i: s - 1.0 for i, s in base.items()}), a="b", b="a")
    assert gate(compare(_scores("a", {i: s - 1.0 for i, s in base.items()}), _scores("b", base), a="a", b="b")) == ([], [])
    assert better.rows["diff"][0] == pytest.approx(-1.0)
    noisy = compare(_scores("a", base), _scores("b", {i: s + (-1.0 if k % 2 else 0.9) for k, (i, s) in
                                                       enumerate(base.items())}), a="a", b="b")
    assert gate(noisy) == ([], [])  # as often better as worse: no failure
    few = compare(_scores("a", {"p0": 9.0, "p1": 9.0, "p2": 9.0}), _scores("b", {"p0": 1.0, "p1": 1.0, "p2": 1.0}))
    failed, untold = gate(few)
    assert failed == [] and untold and "3 shared inputs cannot show a difference" in untold[0]


@pytest.mark.parametrize("seed", range(4))
def test_the_paired_interval_and_p_equal_scipys_on_the_shared_inputs_with_ties_and_a_missing_input(seed):
    # Scores on the 0-10 scale rounded to whole points (ties between A and B, and among differences);
    # one input only A has, one only B has: both are left out of the pairs
    rng = np.random.default_rng(seed)
    n = 9 + seed
    base = rng.integers(2, 9, size=n).astype(float)
    a = {f"p{i}": float(base[i]) for i in range(n)}
    b = {f"p{i}": float(np.clip(base[i] + rng.integers(-1, 3), 0, 10)) for i in range(n)}
    a["only_a"], b["only_b"] = 9.0, 0.0
    c = compare(_scores("a", a), _scores("b", b), n_resamples=20_000)
    [row] = c.rows.filter(pl.col("dimension") == OVERALL).to_dicts()
    diffs = np.array([b[f"p{i}"] - a[f"p{i}"] for i in range(n)])
    assert row["n_inputs"] == n and row["diff"] == pytest.approx(diffs.mean())
    assert (row["wins"], row["ties"], row["losses"]) == (int((diffs > 0).sum()), int((diffs == 0).sum()),
                                                         int((diffs < 0).sum()))
    assert row["p_value"] == pytest.approx(_scipy_p(diffs), abs=1e-12 if n <= EXACT_UP_TO else 0.02)
    ref = stats.bootstrap((diffs,), np.mean, n_resamples=20_000, confidence_level=0.95, method="percentile",
                          random_state=np.random.default_rng(100 + seed)).confidence_interval
    # two samplings of 20,000 resamples agree to within one step of the mean's grid (whole points over n)
    step = 1.0 / n + 1e-9
    assert abs(row["ci_low"] - ref.low) <= step and abs(row["ci_high"] - ref.high) <= step, (row, ref)
