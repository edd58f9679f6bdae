"""Best-of-N: discovery of both sample layouts, the pick, margins, ties, mixes, and the human comparison."""

import math

import numpy as np
import polars as pl
import pytest

from argus_dagster.protocols import best_of_n as bon


def test_discover_both_sample_layouts(tmp_path):
    t = tmp_path / "T2V"
    for rel in ("model_a/p1.mp4", "model_a/p2__0.mp4", "model_a/p2__1.mp4", "model_a/clip__3.mp4",
                "model_a/readme.txt", "model_b/p1/0.mp4", "model_b/p1/01.mp4", "model_b/p1/1.mp4",
                "model_b/p1/notes.txt", "model_b/p2.mp4", "model_b/~a%2Fb__2.mp4", "bad|model/p1.mp4"):
        (t / rel).parent.mkdir(parents=True, exist_ok=True)
        (t / rel).write_bytes(b"")
    df, problems = bon.discover_candidates(t, known_ids=["p1", "p2", "clip__3", "a/b"])
    got = sorted((r["model"], r["input_id"], r["sample"]) for r in df.iter_rows(named=True))
    assert got == [("model_a", "clip__3", ""), ("model_a", "p1", ""), ("model_a", "p2", "0"), ("model_a", "p2", "1"),
                   ("model_b", "a/b", "2"), ("model_b", "p1", "0"), ("model_b", "p1", "1"), ("model_b", "p2", "")]
    assert any("bad|model: left out" in p for p in problems)
    assert any("readme.txt: not a video" in p for p in problems)
    assert any("notes.txt: not a sample" in p for p in problems)
    assert any("model_b/p1 sample 1: 2 files" in p for p in problems)  # 01.mp4 and 1.mp4
    # without the bench's ids, clip__3 reads as sample 3 of clip
    df, _ = bon.discover_candidates(t)
    assert ("model_a", "clip", "3") in [(r["model"], r["input_id"], r["sample"]) for r in df.iter_rows(named=True)]
    empty, problems = bon.discover_candidates(tmp_path / "nope")
    assert empty.height == 0 and "no such folder" in problems[0]


def _table():
    return pl.DataFrame({
        "input_id": ["p1"] * 3 + ["p2"] * 3 + ["p3"] * 2 + ["p4"],
        "model": ["m"] * 3 + ["a", "b", "c"] + ["a", "b"] + ["a"],
        "sample": ["0", "1", "2", "", "", "", "", "", ""],
        "final": [7.0, 9.0, 9.0, 8.0, 6.5, 3.0, None, None, 5.0],
        "pq": [5, 1, 3, 2, 5, 4, 3, 4, 2],
    })


def test_pick_margin_ties_and_unscored():
    picks = {r["input_id"]: r for r in bon.select_best(_table(), "final").iter_rows(named=True)}
    p1 = picks["p1"]  # m#1 and m#2 tie at 9.0: final has no score behind it, so a seeded draw
    assert (p1["pick_model"], p1["pick_score"]) == ("m", 9.0) and p1["pick_sample"] in ("1", "2")
    assert p1["n_tied"] == 2 and p1["tied"] == ["m#1", "m#2"] and p1["margin"] == 0.0
    assert p1["drawn_from"] == ["m#1", "m#2"] and p1["tie_break"] == "a draw of 2 (seed 0)"
    assert {p1["pick_sample"], p1["runner_up_sample"]} == {"1", "2"} and p1["runner_up_score"] == 9.0
    p2 = picks["p2"]
    assert (p2["pick_model"], p2["runner_up_model"], p2["margin"], p2["n_tied"]) == ("a", "b", 1.5, 0)
    assert picks["p3"]["pick_model"] is None and "no candidate of 2 has a score by final" in picks["p3"]["reason"]
    assert picks["p4"]["pick_model"] == "a" and picks["p4"]["margin"] is None and "no runner-up" in picks["p4"]["reason"]


def test_weighted_mix_by_hand():
    # final/10 and (pq-1)/4, weights 1 and 3: p1 m#0: (0.7 + 3*1.0)/4 = 0.925; m#1: (0.9 + 0)/4 = 0.225;
    # m#2: (0.9 + 3*0.5)/4 = 0.6 -> m#0, margin 0.325
    picks = bon.select_best(_table(), {"final": 1, "pq": 3})
    p1 = picks.filter(pl.col("input_id") == "p1").row(0, named=True)
    assert p1["pick_sample"] == "0" and p1["pick_score"] == pytest.approx(0.925)
    assert p1["margin"] == pytest.approx(0.325) and p1["evaluator"] == "1*final+3*pq"
    with pytest.raises(ValueError, match="'nope' is not in the table"):
        bon.select_best(_table(), "nope")
    with pytest.raises(ValueError, match="no scale"):
        bon.select_best(_table().with_columns(pl.col("pq").alias("x")), {"x": 1})


def test_many_samples_per_input_match_argmax():
    rng = np.random.default_rng(3)
    rows = [{"input_id": f"p{i}", "model": "gen", "sample": str(k), "final": float(rng.integers(0, 40)) / 4}
            for i in range(40) for k in range(8)]
    df = pl.DataFrame(rows)
    picks = bon.select_best(df, "final")
    assert picks.height == 40
    for r in picks.iter_rows(named=True):
        s = np.array([x["final"] for x in rows if x["input_id"] == r["input_id"]])
        order = np.sort(s)[::-1]
        assert r["pick_score"] == s.max() and int(r["pick_sample"]) in np.flatnonzero(s == s.max())
        assert r["n_tied"] == (int((s == s.max()).sum()) if (s == s.max()).sum() > 1 else 0)
        assert r["margin"] == pytest.approx(order[0] - order[1])
    assert (picks["n_tied"] > 0).sum() > 0  # the generated table has ties, and they are reported


def test_against_humans_by_hand():
    scores = pl.DataFrame({"input_id": ["p1", "p1", "p1", "p2", "p2", "p3", "p3"],
                           "model": ["a", "b", "c", "a", "b", "a", "b"],
                           "final": [9.0, 5.0, 1.0, 2.0, 8.0, 7.0, 3.0]})
    human = pl.DataFrame({"input_id": ["p1", "p1", "p1", "p2", "p2", "p3"],
                          "model": ["a", "b", "c", "a", "b", "a"], "score": [4.0, 5.0, 3.0, 2.0, 4.0, 5.0]})
    picks = bon.select_best(scores, "final")
    res = bon.against_humans(picks, human, n_boot=500)
    # p1: pick a (human 4, best 5: miss), random mean 4, random hit 1/3; p2: pick b (4, hit), mean 3, 1/2
    # p3: b has no rating -> skipped
    assert res["n_inputs"] == 2 and res["hit_rate"] == 0.5
    assert res["random_hit_rate"] == pytest.approx((1 / 3 + 1 / 2) / 2)
    assert (res["mean_human_pick"], res["mean_human_random"], res["gain"]) == (4.0, 3.5, 0.5)
    lo, hi = res["gain_ci"]
    assert lo <= 0.5 <= hi and lo == 0.0 and hi == 1.0  # per-input gains 0 and 1
    assert res["skipped"] == ["p3: not every candidate has a human rating"]
    text = bon.format_best_of_n(picks, res)
    assert "gain   0.500" in text and "best of N by final" in text
    one = bon.against_humans(picks.filter(pl.col("input_id") == "p2"), human)
    assert one["hit_rate"] == 1.0 and all(math.isnan(x) for x in one["gain_ci"])


def test_selection_table_joins_evaluators_and_splits_samples():
    vs = pl.DataFrame({"task": "T2V", "model": ["gen", "gen", "gen", "other"],
                       "input_id": ["p1__0", "p1__1", "x__2", "p1"], "final_score": [6.0, 8.0, 5.0, 7.0]})
    fs = pl.DataFrame({"model": ["gen", "gen"], "input_id": ["p1__0", "p1__1"], "if_rating": [5, 2],
                       "wc_rating": [4, 4], "pq_rating": [3, 5]})
    t = bon.selection_table(vs, fs, known_ids=["p1", "x__2"])
    rows = sorted(t.iter_rows(named=True), key=lambda r: (r["model"], r["input_id"], r["sample"]))
    assert [(r["model"], r["input_id"], r["sample"], r["final"], r["if"]) for r in rows] == [
        ("gen", "p1", "0", 6.0, 5.0), ("gen", "p1", "1", 8.0, 2.0), ("gen", "x__2", "", 5.0, None),
        ("other", "p1", "", 7.0, None)]
    by_final = bon.select_best(t.filter(pl.col("input_id") == "p1"), "final").row(0, named=True)
    by_if = bon.select_best(t.filter(pl.col("input_id") == "p1"), "if").row(0, named=True)
    assert (by_final["pick_model"], by_final["pick_sample"]) == ("gen", "1")
    assert (by_if["pick_model"], by_if["pick_sample"], by_if["n_scored"]) == ("gen", "0", 2)
    assert "1 candidate(s) without a score by if" in by_if["reason"]
    with pytest.raises(ValueError, match="give video_scores"):
        bon.selection_table()


def test_store_hashes_read_as_inputs_and_samples():
    from argus_dagster.method.candidate_store import partition_hashes, video_hashes

    known = {"T2V/m/p1.mp4": ["t", "a"], "T2V/m/p2__1.mp4": ["t", "b"], "T2V/m/p3/02.mp4": ["t", "c"],
             "T2V/m/clip__3.mp4": ["t", "d"], "T2V/other/p1.mp4": ["t", "e"], "pre/TI2V/m/p1.mp4": ["t", "f"]}
    hashes = partition_hashes(known, "T2V", "m")
    assert hashes == {"p1": "a", "p2__1": "b", "p3/02": "c", "clip__3": "d"}
    assert video_hashes(hashes, ["p1", "p2", "p3", "clip__3"]) == {
        ("p1", ""): "a", ("p2", "1"): "b", ("p3", "2"): "c", ("clip__3", ""): "d"}
    assert ("clip", "3") in video_hashes(hashes, ["clip"])
    assert partition_hashes(known, "TI2V", "m") == {"p1": "f"}


def test_sample_file_names_never_meet():
    from argus_dagster.infra.names import file_name, is_plain, sample_file_name

    pairs = [("x", ""), ("x", "3"), ("x__3", ""), ("x!3", ""), ("x", "03"), ("猫 cat", "1"), ("猫 cat!1", ""),
             ("~x", "1"), ("a/b", "2")]
    names = [sample_file_name(i, k) for i, k in pairs]
    assert len(set(names)) == len(names)
    assert sample_file_name("x", "") == file_name("x") and sample_file_name("x", "3") == "x!3"
    assert all("/" not in n and "\\" not in n and "!" not in file_name(i) for n, (i, _) in zip(names, pairs))
    assert all(is_plain(n.replace("!", "")) or n.startswith("~") for n in names)


def test_a_tie_on_a_rating_breaks_by_its_continuous_score():
    # IF ratings 4, 4, 3: a and b tie; their if_score 0.86 and 0.93 -> b, whatever the names
    t = pl.DataFrame({"input_id": ["p1"] * 3, "model": ["a", "b", "c"], "sample": [""] * 3,
                      "if": [4.0, 4.0, 3.0], "if_score": [0.86, 0.93, 0.80]})
    r = bon.select_best(t, "if").row(0, named=True)
    assert (r["pick_model"], r["n_tied"], r["tied"], r["tie_break"], r["drawn_from"]) == (
        "b", 2, ["a", "b"], "by if_score", [])
    assert (r["runner_up_model"], r["margin"]) == ("a", 0.0)
    # equal on both: the draw decides between a and b, never c
    same = t.with_columns(pl.Series("if_score", [0.9, 0.9, 0.8]))
    r = bon.select_best(same, "if").row(0, named=True)
    assert r["pick_model"] in ("a", "b") and r["tie_break"] == "by if_score, then a draw of 2 (seed 0)"
    # a mix of ratings breaks its ties by the same mix of scores: (if-1)/4 ties at 0.75, if_score decides
    r = bon.select_best(t, {"if": 1}).row(0, named=True)
    assert r["pick_model"] == "b" and r["tie_break"] == "by 1*if_score"


def test_the_draw_is_seeded_and_not_by_name():
    # 400 inputs, each with candidates "a" and "b" tied on every score: the draw is uniform, so "a"
    # (alphabetically first) wins about half, and the same seed gives the same picks
    t = pl.DataFrame({"input_id": [f"p{i}" for i in range(400) for _ in range(2)], "model": ["a", "b"] * 400,
                      "final": [7.0] * 800})
    picks = bon.select_best(t, "final", seed=0)
    share_a = float((picks["pick_model"] == "a").mean())
    assert 0.40 < share_a < 0.60
    assert picks["pick_model"].to_list() == bon.select_best(t, "final", seed=0)["pick_model"].to_list()
    assert picks["pick_model"].to_list() != bon.select_best(t, "final", seed=1)["pick_model"].to_list()


def test_continuous_scores_can_be_chosen_and_mixed():
    fs = pl.DataFrame({"model": ["a", "b"], "input_id": ["p1", "p1"], "if_rating": [4, 4], "wc_rating": [5, 3],
                       "pq_rating": [3, 3], "if_score": [0.86, 0.93], "wc_score": [0.95, 0.60]})
    t = bon.selection_table(None, fs)
    assert t.columns == ["input_id", "model", "sample", "final", "if", "wc", "pq", "if_score", "wc_score"]
    r = bon.select_best(t, {"if_score": 1}).row(0, named=True)
    assert (r["pick_model"], r["pick_score"], r["evaluator"]) == ("b", pytest.approx(0.93), "1*if_score")
    # if_score and wc_score weighted 1 and 1 (both on 0-1): a (0.86 + 0.95) / 2 = 0.905, b (0.93 + 0.60) / 2 = 0.765
    r = bon.select_best(t, {"if_score": 1, "wc_score": 1}).row(0, named=True)
    assert (r["pick_model"], r["margin"]) == ("a", pytest.approx(0.14))
    assert bon.select_best(t, "wc_score").row(0, named=True)["pick_model"] == "a"


def test_against_humans_counts_a_drawn_pick_as_the_expectation():
    # p1: a and b tie on every score (a draw); humans rate a 5, b 3, c 1 -> hit 1/2, human score 4
    # p2: c alone is best by the evaluator; humans rate it 2 of best 4 -> hit 0, human score 2
    scores = pl.DataFrame({"input_id": ["p1"] * 3 + ["p2"] * 2, "model": ["a", "b", "c", "a", "c"],
                           "final": [8.0, 8.0, 2.0, 1.0, 9.0]})
    human = pl.DataFrame({"input_id": ["p1"] * 3 + ["p2"] * 2, "model": ["a", "b", "c", "a", "c"],
                          "score": [5.0, 3.0, 1.0, 4.0, 2.0]})
    picks = bon.select_best(scores, "final")
    assert picks["drawn_from"].to_list() == [["a", "b"], []]
    res = bon.against_humans(picks, human, n_boot=0)
    assert res["hit_rate"] == 0.25 and res["mean_human_pick"] == 3.0  # (0.5 + 0) / 2, (4 + 2) / 2
    assert res["mean_human_random"] == 3.0 and res["random_hit_rate"] == pytest.approx((1 / 3 + 1 / 2) / 2)
