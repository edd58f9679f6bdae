"""Human-alignment metrics against independent computations: scipy where it has the metric,
hand-computed cases where it does not (logistic calibration, pairwise accuracy with ties,
within-input averaging over degenerate inputs, FIRM-Video's rating errors)."""

import itertools
import json
import math

import numpy as np
import polars as pl
import pytest
from scipy import stats

from argus_dagster.infra.tables import CRITERION_SCORES, VIDEO_SCORES, frame
from argus_dagster.protocols.alignment import metrics as al
from argus_dagster.protocols.alignment import ratings as rt


def _tied(rng, n, levels):
    return rng.integers(0, levels, size=n).astype(float)


# --- rank correlations ---------------------------------------------------------------------------


@pytest.mark.parametrize("seed,n,levels", [(0, 7, 3), (1, 40, 5), (2, 200, 1000), (3, 31, 2)])
def test_ranks_spearman_pearson_match_scipy(seed, n, levels):
    rng = np.random.default_rng(seed)
    x, y = _tied(rng, n, levels), _tied(rng, n, levels) + 0.3 * _tied(rng, n, levels)
    np.testing.assert_allclose(al.average_ranks(x), stats.rankdata(x, method="average"))
    assert al.spearman(x, y) == pytest.approx(stats.spearmanr(x, y).statistic, abs=1e-12)
    assert al.pearson(x, y) == pytest.approx(stats.pearsonr(x, y).statistic, abs=1e-12)


@pytest.mark.parametrize("seed,n,levels", [(0, 9, 3), (1, 60, 4), (2, 1300, 7), (3, 1100, 100000)])
def test_kendall_tau_b_matches_scipy_with_ties_and_blocks(seed, n, levels):
    rng = np.random.default_rng(seed)
    x = _tied(rng, n, levels)
    y = x + _tied(rng, n, levels)  # correlated, many ties; n > block exercises the blocked sum
    assert al.kendall_tau_b(x, y, block=256) == pytest.approx(stats.kendalltau(x, y, variant="b").statistic, abs=1e-12)


def test_correlations_of_constant_input_are_undefined():
    assert math.isnan(al.spearman([1, 1, 1], [1, 2, 3]))
    assert math.isnan(al.kendall_tau_b([1, 2, 3], [4, 4, 4]))
    assert math.isnan(al.pearson([2], [3]))


# --- four-parameter logistic calibration -----------------------------------------------------------


def test_logistic4_by_hand():
    # midpoint: half way between the asymptotes; b3 + |b4|·ln 3: three quarters of the way up
    assert al.logistic4(np.array([0.5]), 5, 1, 0.5, 0.1)[0] == pytest.approx(3.0)
    assert al.logistic4(np.array([0.5 + 0.1 * math.log(3)]), 5, 1, 0.5, 0.1)[0] == pytest.approx(4.0)
    assert al.logistic4(np.array([0.5 - 0.1 * math.log(3)]), 5, 1, 0.5, -0.1)[0] == pytest.approx(2.0)


@pytest.mark.parametrize("params", [(5.0, 1.0, 0.5, 0.12), (1.0, 4.0, 6.0, 1.5)])
def test_logistic_fit_recovers_an_exact_logistic(params):
    x = np.linspace(params[2] - 4 * params[3], params[2] + 4 * params[3], 25)
    y = al.logistic4(x, *params)
    cal = al.fit_logistic4(x, y)
    assert cal.method == "logistic4"
    np.testing.assert_allclose(cal.fitted, y, atol=1e-6)
    assert al.pearson(cal.fitted, y) == pytest.approx(1.0, abs=1e-9)
    assert al.rmse(cal.fitted, y) == pytest.approx(0.0, abs=1e-6)
    assert min(cal.params[0], cal.params[1]) == pytest.approx(min(params[:2]), abs=1e-4)


def test_calibration_never_worse_than_a_line_and_handles_degenerate_cases():
    cal = al.fit_logistic4([0.0, 1.0, 2.0], [1.0, 3.0, 5.0])  # too few points for four parameters
    assert cal.method == "linear"
    np.testing.assert_allclose(cal.fitted, [1.0, 3.0, 5.0])
    cal = al.fit_logistic4([7, 7, 7, 7], [1, 2, 3, 4])  # constant predictions: only the mean is defensible
    assert cal.method == "constant"
    assert al.rmse(cal.fitted, [1, 2, 3, 4]) == pytest.approx(math.sqrt(1.25))
    rng = np.random.default_rng(4)
    x = rng.normal(size=60)
    y = 3 + x + rng.normal(scale=0.8, size=60)
    cal = al.fit_logistic4(x, y)
    slope, icpt = np.polyfit(x, y, 1)
    assert al.rmse(cal.fitted, y) <= al.rmse(slope * x + icpt, y) + 1e-9


# --- pairwise accuracy (VEFX card tie rules) --------------------------------------------------------


def test_pairwise_accuracy_by_hand():
    pred = [3, 2, 2, 1, 1, 2, 2, 1, 9]
    human = [5, 4, 4, 1, 2, 3, 1, 2, 1]
    groups = ["A", "A", "A", "B", "B", "B", "C", "C", "D"]
    # A: (3>2, 5>4) 1, (3>2, 5>4) 1, human tie 1 -> 3/3
    # B: prediction tie on a human difference 0.5, (1<2, 1<3) 1, (1<2, 2<3) 1 -> 2.5/3
    # C: (2>1 but 1<2) 0 -> 0/1 ;  D: one candidate, no pair
    acc, n = al.pairwise_accuracy(pred, human, groups)
    assert n == 7
    assert acc == pytest.approx(5.5 / 7)


def test_prediction_tie_scores_half_whatever_the_pair_order():
    # The card's sample code would give 1 here when the first video is rated lower; its rule says 0.5.
    assert al.pair_counts([1, 1], [1, 2]) == (0.5, 1)
    assert al.pair_counts([1, 1], [2, 1]) == (0.5, 1)
    assert al.pair_counts([1, 1], [2, 2]) == (1.0, 1)


def test_pairwise_accuracy_matches_a_brute_force_count():
    rng = np.random.default_rng(5)
    groups = np.repeat(np.arange(30), 5)
    pred, human = _tied(rng, 150, 4), _tied(rng, 150, 4)
    credit = total = 0
    for g in range(30):
        idx = np.flatnonzero(groups == g)
        for i, j in itertools.combinations(idx, 2):
            total += 1
            if human[i] == human[j]:
                credit += 1
            elif pred[i] == pred[j]:
                credit += 0.5
            elif (pred[i] > pred[j]) == (human[i] > human[j]):
                credit += 1
    acc, n = al.pairwise_accuracy(pred, human, groups)
    assert (n, acc) == (total, pytest.approx(credit / total))


# --- within-input correlation (VideoArgus) ----------------------------------------------------------


def test_within_input_averaging_with_degenerate_inputs():
    rows = [  # (input, pred, human)
        ("agree", 1, 1), ("agree", 2, 2), ("agree", 3, 3),          # counted: +1
        ("tied-humans", 1, 4), ("tied-humans", 5, 4),               # skipped: no human ranking
        ("alone", 3, 2),                                            # skipped: one candidate
        ("flat-evaluator", 6, 1), ("flat-evaluator", 6, 3), ("flat-evaluator", 6, 2),  # counted: 0
        ("reverse", 3, 1), ("reverse", 2, 2), ("reverse", 1, 3),    # counted: -1
        ("partial", 1, 1), ("partial", 3, 2), ("partial", 2, 3), ("partial", 4, 4),
    ]
    g, p, h = zip(*rows)
    partial_s = stats.spearmanr([1, 3, 2, 4], [1, 2, 3, 4]).statistic
    partial_k = stats.kendalltau([1, 3, 2, 4], [1, 2, 3, 4]).statistic
    mean_s, n_s = al.within_input_correlation(p, h, g, al.spearman)
    mean_k, n_k = al.within_input_correlation(p, h, g, al.kendall_tau_b)
    assert n_s == n_k == 4
    assert mean_s == pytest.approx((1 + 0 - 1 + partial_s) / 4)
    assert mean_k == pytest.approx((1 + 0 - 1 + partial_k) / 4)
    assert al.within_input_correlation([1], [1], ["x"]) == (pytest.approx(float("nan"), nan_ok=True), 0)


def test_within_input_matches_scipy_per_group():
    rng = np.random.default_rng(6)
    groups = np.repeat(np.arange(40), 5)
    human = _tied(rng, 200, 5)
    pred = human + rng.normal(scale=2, size=200)
    expect_s = [stats.spearmanr(pred[groups == k], human[groups == k]).statistic for k in range(40)
                if len(set(human[groups == k])) > 1]
    expect_k = [stats.kendalltau(pred[groups == k], human[groups == k]).statistic for k in range(40)
                if len(set(human[groups == k])) > 1]
    assert al.within_input_correlation(pred, human, groups, al.spearman)[0] == pytest.approx(np.mean(expect_s))
    assert al.within_input_correlation(pred, human, groups, al.kendall_tau_b)[0] == pytest.approx(np.mean(expect_k))


# --- FIRM-Video rating errors -----------------------------------------------------------------------


def test_map_to_scale_and_rounding_by_hand():
    np.testing.assert_allclose(al.map_to_scale([0, 5, 7.5, 10, 12], (0, 10), (1, 5)), [1, 3, 4, 5, 5])
    np.testing.assert_array_equal(al.to_rating([6.25, 6.2], (0, 10), (1, 5)), [4, 3])  # 3.5 rounds up


def test_rating_errors_by_hand():
    e = al.rating_errors([1, 2, 3, 5], [1, 3, 3, 2])
    # |errors| = 0, 1, 0, 3: mean 1, population std sqrt(1.5); exact 2/4; within one level 3/4
    assert (e.mae, e.std_abs_err, e.accuracy, e.relaxed_accuracy) == (1.0, pytest.approx(math.sqrt(1.5)), 0.5, 0.75)
    e = al.rating_errors([3, 2], [2.5, 3.6])  # averaged human scores round to the nearest level
    assert e.accuracy == 0.5 and e.relaxed_accuracy == 0.5


# --- bootstrap over inputs ---------------------------------------------------------------------------


def test_bootstrap_resamples_whole_inputs_like_a_direct_recomputation():
    rng = np.random.default_rng(7)
    groups = np.repeat(np.arange(25), 4)
    human = _tied(rng, 100, 5)
    pred = human + rng.normal(scale=1.5, size=100)
    got = al.bootstrap_intervals(pred, human, groups, n_boot=300, seed=11)
    picks = np.random.default_rng(11).integers(0, 25, size=(300, 25))
    srcc, wi = [], []
    for pick in picks:
        idx = np.concatenate([np.flatnonzero(groups == k) for k in pick])
        srcc.append(stats.spearmanr(pred[idx], human[idx]).statistic)
        per = [stats.spearmanr(pred[groups == k], human[groups == k]).statistic for k in pick
               if len(set(human[groups == k])) > 1]
        wi.append(np.mean(per))
    assert got["srcc"] == pytest.approx((np.percentile(srcc, 2.5), np.percentile(srcc, 97.5)))
    assert got["within_input_srcc"] == pytest.approx((np.percentile(wi, 2.5), np.percentile(wi, 97.5)))
    point = al.spearman(pred, human)
    assert got["srcc"][0] < point < got["srcc"][1]
    assert np.isnan(got["plcc"]).all() and np.isnan(got["rmse"]).all()  # no fit given: no PLCC or RMSE interval


def test_bootstrap_intervals_of_krcc_plcc_and_rmse_hold_the_fit_and_resample_inputs():
    """KRCC on the pooled videos of each resample; PLCC and RMSE of the fitted values (the whole sample's
    logistic fit, held) on the same resamples; the point figures of align() lie inside."""
    rng = np.random.default_rng(5)
    groups = np.repeat(np.arange(30), 3)
    human = _tied(rng, 90, 5)
    pred = 2 * human + rng.normal(scale=2.0, size=90)
    fit = al.fit_logistic4(pred, human)
    got = al.bootstrap_intervals(pred, human, groups, n_boot=200, seed=3, fitted=fit.fitted)
    picks = np.random.default_rng(3).integers(0, 30, size=(200, 30))
    krcc, plcc, rmse = [], [], []
    for pick in picks:
        idx = np.concatenate([np.flatnonzero(groups == k) for k in pick])
        krcc.append(stats.kendalltau(pred[idx], human[idx]).statistic)
        plcc.append(stats.pearsonr(fit.fitted[idx], human[idx]).statistic)
        rmse.append(float(np.sqrt(np.mean((fit.fitted[idx] - human[idx]) ** 2))))
    for name, vals in (("krcc", krcc), ("plcc", plcc), ("rmse", rmse)):
        assert got[name] == pytest.approx((np.percentile(vals, 2.5), np.percentile(vals, 97.5))), name
    row = al.align(pred, human, groups, n_boot=200, seed=3).row()
    for name in ("krcc", "plcc", "rmse"):
        assert row[f"{name}_lo"] < row[name] < row[f"{name}_hi"], (name, row)


def test_pairwise_accuracy_interval_pools_credit_over_the_pairs_of_the_drawn_inputs():
    # A: 4 candidates, 6 pairs: human tie 1, (1<3, 2<3) 1, (1<3 but 2>1) 0, (2<3, 2<3) 1, (2<3 but 2>1) 0,
    #    prediction tie on a human difference 0.5 -> 3.5/6 ;  B: 2 candidates, 1 pair, reversed -> 0/1
    pred, human, groups = [1, 2, 3, 3, 1, 2], [2, 2, 3, 1, 2, 1], ["A"] * 4 + ["B"] * 2
    # The resamples of two inputs: AA 7/12, AB and BA 3.5/7, BB 0/2, each drawn about 250 times in 1000:
    # the interval runs from BB's 0 to AA's 7/12 and holds the whole sample's 3.5/7.
    row = al.align(pred, human, groups, n_boot=1000, seed=0).row()
    assert (row["pairwise_acc"], row["n_pairs"]) == (0.5, 7)
    assert (row["pairwise_acc_lo"], row["pairwise_acc_hi"]) == (0.0, pytest.approx(7 / 12))

    # Inputs of 1 to 6 candidates (1 to 15 pairs; a lone candidate has none), ties on both sides
    rng = np.random.default_rng(8)
    groups = np.repeat(np.arange(20), rng.integers(1, 7, size=20))
    pred, human = _tied(rng, len(groups), 4), _tied(rng, len(groups), 3)
    got = al.bootstrap_intervals(pred, human, groups, n_boot=300, seed=4)["pairwise_acc"]
    accs = []
    for pick in np.random.default_rng(4).integers(0, 20, size=(300, 20)):
        credit = total = 0
        for k in pick:
            for i, j in itertools.combinations(np.flatnonzero(groups == k), 2):
                total += 1
                credit += (1 if human[i] == human[j] else 0.5 if pred[i] == pred[j]
                           else float((pred[i] > pred[j]) == (human[i] > human[j])))
        accs.append(credit / total)
    assert got == pytest.approx((np.percentile(accs, 2.5), np.percentile(accs, 97.5)))


# --- the whole table ------------------------------------------------------------------------------


def _human(rows):
    return pl.DataFrame(rows, schema=["input_id", "model", "dimension", "score"], orient="row")


def test_align_reports_every_metric_against_scipy():
    rng = np.random.default_rng(8)
    groups = [f"p{k}" for k in np.repeat(np.arange(20), 5)]
    human = np.round(rng.uniform(1, 5, size=100), 1)
    pred = 10 * (human - 1) / 4 + rng.normal(scale=2, size=100)
    r = al.align(pred, human, groups, n_boot=50)
    assert r.srcc == pytest.approx(stats.spearmanr(pred, human).statistic)
    assert r.krcc == pytest.approx(stats.kendalltau(pred, human).statistic)
    cal = al.fit_logistic4(pred, human)
    assert r.plcc == pytest.approx(stats.pearsonr(cal.fitted, human).statistic)
    assert r.rmse == pytest.approx(math.sqrt(np.mean((cal.fitted - human) ** 2)))
    assert (r.n_videos, r.n_inputs, r.n_within_inputs, r.n_pairs) == (100, 20, 20, 200)
    assert set(r.row()) == set(al.ALIGNMENT_COLUMNS) - {"n_raters", "inter_rater_srcc"}


def test_alignment_table_pairs_videos_and_dimensions():
    human = _human([("a", "m1", "overall", 1.0), ("a", "m2", "overall", 3.0), ("b", "m1", "overall", 2.0),
                    ("b", "m2", "overall", 4.0), ("a", "m1", "motion", 2.0), ("a", "m2", "motion", 1.0),
                    ("c", "m1", "overall", 5.0)])
    scores = pl.DataFrame({"input_id": ["a", "a", "b", "b", "a", "a", "x"], "model": ["m1", "m2"] * 3 + ["m1"],
                           "evaluator": ["e"] * 4 + ["per-dim"] * 2 + ["e"],
                           "dimension": [None] * 4 + ["motion"] * 2 + [None],
                           "score": [1.0, 2.0, 3.0, float("nan"), 5.0, 3.0, 1.0]})
    t = al.alignment_table(human, scores, n_boot=0)
    got = {(r["evaluator"], r["dimension"]): r for r in t.iter_rows(named=True)}
    # "per-dim" scores only the motion dimension; "e" is compared with both; NaN and unmatched rows drop out
    assert set(got) == {("e", "motion"), ("e", "overall"), ("per-dim", "motion")}
    assert got[("e", "overall")]["n_videos"] == 3
    assert got[("per-dim", "motion")]["within_input_srcc"] == pytest.approx(1.0)
    assert got[("e", "motion")]["within_input_srcc"] == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="dimension.*'quality'.*not in the human ratings"):
        al.alignment_table(human, scores, dimensions=["quality"])


def test_inter_rater_agreement_against_scipy():
    r1, r2, r3 = [1, 2, 3, 4, 5], [2, 1, 3, 5, 4], [1, 3, 2, 4, 4]
    rows = [(f"i{k}", "m", "overall", name, float(v)) for name, vals in (("a", r1), ("b", r2), ("c", r3))
            for k, v in enumerate(vals)]
    ratings = pl.DataFrame(rows, schema=list(rt.RATINGS_SCHEMA), orient="row")
    got = al.inter_rater_agreement(ratings).row(0, named=True)
    expect = np.mean([stats.spearmanr(a, b).statistic for a, b in ((r1, r2), (r1, r3), (r2, r3))])
    assert got["n_raters"] == 3 and got["inter_rater_srcc"] == pytest.approx(expect)
    assert rt.HumanRatings(ratings).averaged().filter(pl.col("input_id") == "i1")["score"][0] == pytest.approx(2.0)


# --- reading ratings and scores -------------------------------------------------------------------


def test_human_csv_bad_rows_are_named_and_the_rest_is_read(tmp_path):
    p = tmp_path / "T2V.csv"
    p.write_text("input_id,model,score,rater\na,m1,4,r1\na,m1,2,r2\nb,m1,n/a,r1\n,m2,3,r1\nb,m2,5,r1\n")
    h = rt.read_human(p)
    assert h.ratings.height == 3
    assert any("row 3" in x and "'n/a' is not a number" in x for x in h.problems)
    assert any("row 4" in x and "empty input_id" in x for x in h.problems)
    avg = h.averaged()
    assert avg.filter(pl.col("input_id") == "a").row(0, named=True) == {
        "input_id": "a", "model": "m1", "dimension": "overall", "score": 3.0, "n_ratings": 2}
    q = tmp_path / "bad.csv"
    q.write_text("video,model,score\na,m,1\n")
    with pytest.raises(ValueError, match="missing column 'input_id'"):
        rt.read_human(q)


def test_human_jsonl_parquet_and_public_layouts(tmp_path):
    (tmp_path / "h.jsonl").write_text('{"input_id": 1, "model": "m", "score": 3, "dimension": "motion"}\n{oops\n')
    h = rt.read_human(tmp_path / "h.jsonl")
    assert h.ratings.row(0, named=True)["input_id"] == "1" and "not valid JSON" in h.problems[0]
    h.ratings.write_parquet(tmp_path / "h.parquet")
    assert rt.read_human(tmp_path / "h.parquet").ratings.equals(h.ratings)
    t2v = {"0": {"prompt": "a cat", "models": {"m1": [2.5], "m2": [4.0, 3.0]}}}
    (tmp_path / "t2vscore_alignment_score.json").write_text(json.dumps(t2v))
    h = rt.read_human(tmp_path / "t2vscore_alignment_score.json")
    assert set(h.ratings["dimension"]) == {"alignment"} and h.ratings.height == 3
    assert h.averaged().filter(pl.col("model") == "m2")["score"][0] == 3.5
    aigve = {"data_list": [{"id": 3, "model": "gen", "overall": 4, "physics": 2, "prompt_gt": "x",
                            "video_path_pd": "gen_3.mp4"}]}
    (tmp_path / "annotations.json").write_text(json.dumps(aigve))
    h = rt.read_human(tmp_path / "annotations.json")
    assert set(h.ratings["dimension"]) == {"overall", "physics"}
    assert len(h.problems) == len(rt.AIGVE_ASPECTS) - 2  # the seven aspects this record lacks are named


def test_project_tables_become_evaluators(tmp_path):
    vs = frame([{"task": "T2V", "model": "m", "input_id": "a", "base_score": 7.0, "final_score": 6.0},
                {"task": "T2V", "model": "m", "input_id": "b", "base_score": None, "final_score": None,
                 "error": "missing"}], VIDEO_SCORES)
    cs = frame([{"task": "T2V", "model": "m", "input_id": "a", "criterion_id": "c1", "dimension": 13, "score": 8},
                {"task": "T2V", "model": "m", "input_id": "a", "criterion_id": "c2", "dimension": 13, "score": 5},
                {"task": "T2V", "model": "m", "input_id": "a", "criterion_id": "c3", "dimension": 13, "score": None},
                {"task": "T2V", "model": "m", "input_id": "a", "criterion_id": "c4", "dimension": 9, "score": 2}],
               CRITERION_SCORES)
    vs.write_parquet(tmp_path / "vs.parquet")
    cs.write_parquet(tmp_path / "cs.parquet")
    s = rt.read_scores(tmp_path / "vs.parquet")
    assert s.ranges["argus:final"] == (0.0, 10.0)
    assert s.scores.filter((pl.col("evaluator") == "argus:final") & (pl.col("input_id") == "a"))["score"][0] == 6.0
    c = rt.read_scores(tmp_path / "cs.parquet").scores
    assert c.filter(pl.col("evaluator") == "argus:d13 visual/frame quality")["score"].to_list() == [6.5]
    assert c.filter(pl.col("evaluator") == "argus:d09 motion")["score"].to_list() == [2.0]
    pl.concat([vs, vs.with_columns(pl.lit("TV2V").alias("task"))]).write_parquet(tmp_path / "two.parquet")
    with pytest.raises(ValueError, match=r"holds tasks \['T2V', 'TV2V'\]; choose one"):
        rt.read_scores(tmp_path / "two.parquet")
    assert rt.read_scores(tmp_path / "two.parquet", task="TV2V").scores.height == 4


def test_external_long_and_wide_score_tables(tmp_path):
    (tmp_path / "long.csv").write_text("input_id,model,evaluator,score\n1,m,clip,0.3\n1,m,vqa,x\n")
    s = rt.read_scores(tmp_path / "long.csv")
    assert s.scores.filter(pl.col("evaluator") == "clip")["score"].to_list() == [0.3]
    assert any("vqa" in p and "no numeric score" in p for p in s.problems)
    (tmp_path / "wide.csv").write_text("model_name,video_id,prompt,CLIP Score,BLEU\nm,7,a cat,24.5,0.25\n")
    s = rt.read_scores(tmp_path / "wide.csv").scores
    assert sorted(s["evaluator"]) == ["BLEU", "CLIP Score"] and set(s["input_id"]) == {"7"}
    (tmp_path / "none.csv").write_text("input_id,model,prompt\n1,m,a cat\n")
    with pytest.raises(ValueError, match="no numeric metric columns"):
        rt.read_scores(tmp_path / "none.csv")


def test_cli_align_writes_the_documented_columns(tmp_path, capsys):
    from argus_dagster.client.cli import main

    rng = np.random.default_rng(9)
    rows = [(f"p{i}", f"m{j}", float(rng.integers(1, 6))) for i in range(12) for j in range(4)]
    pl.DataFrame(rows, schema=["input_id", "model", "score"], orient="row").write_csv(tmp_path / "h.csv")
    ext = [(i, m, "noisy", s + rng.normal()) for i, m, s in rows]
    pl.DataFrame(ext, schema=["input_id", "model", "evaluator", "score"], orient="row").write_csv(tmp_path / "s.csv")
    out = tmp_path / "out" / "align.csv"
    assert main(["align", "--human", str(tmp_path / "h.csv"), "--scores", str(tmp_path / "s.csv"),
                 "--out", str(out), "--n-boot", "100"]) == 0
    t = pl.read_csv(out)
    assert t.columns[:12] == ["evaluator", "dimension", "n_videos", "n_inputs", "srcc", "krcc", "plcc", "rmse",
                              "pairwise_acc", "within_input_srcc", "within_input_krcc", "mae"]
    h = np.array([s for *_, s in rows])
    p = np.array([s for *_, s in ext])
    assert t["srcc"][0] == pytest.approx(stats.spearmanr(p, h).statistic)
    assert "noisy" in capsys.readouterr().out
    assert main(["align", "--human", str(tmp_path / "missing.csv"), "--scores", str(tmp_path / "s.csv")]) == 2
