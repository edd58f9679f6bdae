"""The sample browser's page (reports/samples.html) carries every stored video, as the tables hold it,
and the model pairs that disagree most; it is one file that links only pages that exist."""

import json
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from argus_dagster.infra.tables import CRITERION_SCORES, VIDEO_SCORES, frame
from argus_dagster.outputs.samples import COLUMNS, model_disagreements, render_samples, sample_rows, write_samples


def _videos() -> pl.DataFrame:
    rows = []
    for model, base in (("a", 7.0), ("b", 4.0), ("c</script>", 5.5)):
        for i in range(3):
            final = None if (model == "b" and i == 2) else base + i
            rows.append({"task": "T2V", "model": model, "input_id": f"p{i}", "sample": "", "base_score": final,
                         "final_score": final, "n_scored": 3, "n_criteria": 8, "weight_scored": 0.39,
                         "judge": "evidence-only", "error": "decode failed" if final is None else None})
    return frame(rows, VIDEO_SCORES)


def _criteria() -> pl.DataFrame:
    rows = [{"task": "T2V", "model": m, "input_id": f"p{i}", "sample": "", "criterion_id": f"c{k}", "score": s}
            for m in ("a", "b", "c</script>") for i in range(3) for k, s in enumerate((2.0, 9.0, 5.0))]
    return frame(rows, CRITERION_SCORES)


def _embedded(html: str, element_id: str):
    text = re.search(rf'<script type="application/json" id="{element_id}">(.*?)</script>', html, re.S).group(1)
    return json.loads(text.replace("<\\/", "</"))


def test_every_video_is_a_row_as_stored(tmp_path):
    (tmp_path / "T2V" / "a").mkdir(parents=True)
    (tmp_path / "T2V" / "a" / "p0.html").write_text("<p>report</p>")
    html = render_samples(tmp_path, _videos(), _criteria(), bench="demo")
    rows = _embedded(html, "rows")
    expected = sample_rows(_videos(), _criteria()).to_dicts()
    assert [{k: r[k] for k, _, _ in COLUMNS} for r in rows] == expected and len(rows) == 9
    assert {(r["model"], r["input_id"]): (r["criteria_low"], r["criteria_high"]) for r in rows}[("a", "p1")] == (2.0, 9.0)
    assert [r["href"] for r in rows if r["href"]] == ["T2V/a/p0.html"]  # only pages that exist are linked
    assert next(r for r in rows if r["final_score"] is None)["error"] == "decode failed"
    assert "</script>" not in html.split('id="rows">')[1].split("</script>")[0]  # a model's name cannot end the data
    assert [c["key"] for c in _embedded(html, "columns")] == [k for k, _, _ in COLUMNS]


def test_each_video_shows_its_own_models_firm_ratings(tmp_path):
    """FIRM-Video rates each model's video of an input: a row shows the ratings of its own model's video
    (task, model, input and sample), none where FIRM-Video did not run on that model."""
    videos = frame([{"task": "T2V", "model": m, "input_id": f"p{i}", "sample": "", "final_score": 5.0 + i,
                     "judge": "evidence-only"} for m in ("a", "b", "c") for i in range(2)], VIDEO_SCORES)
    ratings = {("a", "p0"): (5, 4, 3), ("a", "p1"): (4, 5, 2), ("b", "p0"): (1, 2, 4), ("b", "p1"): (2, 1, None)}
    firm = pl.DataFrame([{"task": "T2V", "model": m, "input_id": i, "sample": "", "if_rating": r[0], "wc_rating": r[1],
                          "pq_rating": r[2]} for (m, i), r in ratings.items()])  # none for c
    (tmp_path / "reports" / "T2V" / "b" / "firm").mkdir(parents=True)
    (tmp_path / "reports" / "T2V" / "b" / "firm" / "p0.html").write_text("<p>checklist</p>")
    page = write_samples(tmp_path / "reports", tmp_path / "storage", video_scores=videos, firm_scores=firm)
    html = Path(page).read_text(encoding="utf-8")
    rows = _embedded(html, "rows")
    shown = [(r["model"], r["input_id"], (r["firm_if"], r["firm_wc"], r["firm_pq"])) for r in rows]
    assert shown == [(m, i, ratings.get((m, i), (None, None, None))) for m in ("a", "b", "c") for i in ("p0", "p1")], shown
    assert [(r["model"], r["input_id"]) for r in rows if r["firm_href"]] == [("b", "p0")]  # its own checklist page
    assert [c["name"] for c in _embedded(html, "columns") if c["key"].startswith("firm_")] == ["FIRM IF", "FIRM WC", "FIRM PQ"]


def test_the_pairs_that_disagree_most_come_first():
    pairs = model_disagreements(_videos())
    # a: 7 8 9, b: 4 5 (none on p2), c: 5.5 6.5 7.5 -> a-b differ by 3 on p0 and p1, the largest
    assert pairs.head(2).select("input_id", "model_a", "model_b", "difference").rows() == [
        ("p0", "a", "b", 3.0), ("p1", "a", "b", 3.0)]
    assert pairs.height == 3 + 2 + 2  # a-c on 3 inputs, b-c on 2, a-b on 2
    assert pairs["difference"].to_list() == sorted(pairs["difference"].to_list(), reverse=True)


def _every_pair(video_scores: pl.DataFrame, limit: int) -> pl.DataFrame:
    """The exhaustive definition of the disagreements: every pair of models joined on every input."""
    per = (video_scores.filter(pl.col("final_score").is_not_null())
           .group_by("task", "input_id", "model").agg(pl.col("final_score").mean().alias("score")))
    pairs = (per.join(per, on=["task", "input_id"], suffix="_b").filter(pl.col("model") < pl.col("model_b"))
             .select("task", "input_id", pl.col("model").alias("model_a"), pl.col("score").alias("score_a"),
                     "model_b", "score_b", (pl.col("score") - pl.col("score_b")).abs().alias("difference")))
    return pairs.sort(["difference", "task", "input_id", "model_a", "model_b"],
                      descending=[True, False, False, False, False]).head(limit)


def test_the_bounded_disagreements_are_the_exhaustive_join_s_top_rows():
    """On random small tables with many ties (scores 0-4, two samples of some videos, models missing on
    some inputs, videos without a score), the bounded method gives the exhaustive join's first rows,
    in its order, for every limit from 1 to past the number of pairs."""
    # Every score equal: the one pair shown has difference 0, its two models each both lowest and highest.
    tied = frame([{"task": "T2V", "model": m, "input_id": "p", "sample": "", "final_score": 5.0} for m in "cab"],
                 VIDEO_SCORES)
    assert model_disagreements(tied, 1).rows() == [("T2V", "p", "a", 5.0, "b", 5.0, 0.0)]
    rng = np.random.default_rng(52)
    names = ["a", "B", "b", "a2", "é", "m", "z", "0", "a b", "Z"]
    for _ in range(150):
        rows = []
        for task in ("T2V", "I2V")[: rng.integers(1, 3)]:
            models = list(rng.choice(names, size=rng.integers(2, len(names) + 1), replace=False))
            for i in range(rng.integers(1, 7)):
                for m in models:
                    if rng.random() < 0.2:
                        continue  # this model has no video of this input
                    for k in range(rng.integers(1, 3)):
                        score = None if rng.random() < 0.1 else float(rng.integers(0, 5))
                        rows.append({"task": task, "model": m, "input_id": f"p{i}", "sample": str(k), "final_score": score})
        videos = frame(rows, VIDEO_SCORES)
        for limit in (1, 2, 3, 8, 400):
            want = _every_pair(videos, limit)
            got = model_disagreements(videos, limit)
            assert got.rows() == want.rows(), (limit, rows)


def test_a_score_that_is_not_a_number_is_a_missing_value(tmp_path):
    videos = _videos().with_columns(pl.when(pl.col("model") == "a").then(float("nan")).otherwise(pl.col("base_score"))
                                    .alias("base_score"))
    rows = _embedded(render_samples(tmp_path, videos, None), "rows")
    assert [r["base_score"] for r in rows if r["model"] == "a"] == [None, None, None]
    assert [r["criteria_low"] for r in rows] == [None] * 9  # no criterion scores stored: no range


def test_nothing_stored_says_what_to_run(tmp_path):
    assert "argus evaluate" in render_samples(tmp_path, None)


def test_evaluator_and_people_are_compared_by_place_not_by_scale():
    """People rate 1-5, the evaluator 0-10: each video's place among the task's rated videos (ties share
    their mean place), the largest difference first; a task with one rated video has no places."""
    from argus_dagster.outputs.samples import people_disagreements

    videos = frame([{"task": "T2V", "model": m, "input_id": "p", "sample": "", "final_score": s}
                    for m, s in (("a", 1.0), ("b", 2.0), ("c", 3.0), ("d", 9.0))]
                   + [{"task": "TI2V", "model": "a", "input_id": "q", "sample": "", "final_score": 5.0}], VIDEO_SCORES)
    people = pl.DataFrame({"task": ["T2V"] * 4 + ["TI2V"], "model": ["a", "b", "c", "d", "a"],
                           "input_id": ["p"] * 4 + ["q"], "sample": [""] * 5, "score": [5.0, 4.0, 4.0, 1.0, 3.0]})
    table = people_disagreements(videos, people)
    got = {r["model"]: (r["evaluator_place"], r["people_place"], r["difference"]) for r in table.iter_rows(named=True)}
    third = 100 / 3
    want = {"a": (0.0, 100.0, 100.0), "b": (third, 1.5 * third, 0.5 * third), "c": (2 * third, 1.5 * third, 0.5 * third),
            "d": (100.0, 0.0, 100.0)}
    assert set(got) == set(want) and all(got[m] == pytest.approx(want[m]) for m in want), got
    assert table["difference"].to_list() == sorted(table["difference"].to_list(), reverse=True)
    assert table["task"].unique().to_list() == ["T2V"]  # TI2V: one rated video, no place
    assert people_disagreements(videos, None).height == 0
    page = render_samples("/nowhere", videos, None, people=people)
    cells = re.findall(r'<tr data-task="T2V" data-model="(\w)"[^>]*>.*?data-key="difference">(\d+)</td>', page)
    assert cells[:2] == [("a", "100"), ("d", "100")] and sorted(cells[2:]) == [("b", "17"), ("c", "17")]
    without = re.search(r'<h2 id="people">[^<]*</h2><p class="muted">(.*?)</p>', render_samples("/nowhere", videos, None))
    assert without.group(1).startswith("no human ratings: add")  # said in the section, and no table
    assert '<table class="people">' not in render_samples("/nowhere", videos, None)
