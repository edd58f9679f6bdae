"""The ``human_alignment`` asset on small tables: what it reports for bad rows, missing ratings and
videos that no evaluator scored (the full graph runs in ``test_alignment_aigve.py``)."""

import dagster as dg
import polars as pl
import pytest
from scipy import stats

from argus_dagster.assets.alignment import HumanAlignmentConfig, human_alignment, human_alignment_in_range
from argus_dagster.infra.tables import CRITERION_SCORES, VIDEO_SCORES, frame
from argus_dagster.resources.bench import BenchResource
from argus_dagster.resources.storage import StorageResource


def _scores(task: str, model: str, finals: dict[str, float]):
    vs = frame([{"task": task, "model": model, "input_id": i, "base_score": s, "final_score": s}
                for i, s in finals.items()], VIDEO_SCORES)
    cs = frame([{"task": task, "model": model, "input_id": i, "criterion_id": "c1", "dimension": 13,
                 "score": int(round(s))} for i, s in finals.items()], CRITERION_SCORES)
    return vs, cs


def _run(tmp_path, video_scores, criterion_scores, firm_scores=None, vefx_scores=None, **config):
    ctx = dg.build_asset_context()
    out = human_alignment(context=ctx, config=HumanAlignmentConfig(human_dir=str(tmp_path), n_boot=50, **config),
                          video_scores=video_scores, criterion_scores=criterion_scores,
                          firm_scores=firm_scores or {}, vefx_scores=vefx_scores or {},
                          bench=BenchResource(reports_dir=str(tmp_path / "reports"), human_dir=str(tmp_path)),
                          storage=StorageResource())
    return out.value, out.metadata


def test_scores_per_task_with_bad_rows_named(tmp_path):
    a = {"p1": 3.0, "p2": 9.5, "p3": 9.0}
    b = {"p1": 5.0, "p2": 6.0, "p3": 2.0}
    (tmp_path / "T2V.csv").write_text(
        "input_id,model,score\np1,a,2\np2,a,4\np3,a,5\np1,b,3\np2,b,five\np3,b,1\n")
    (va, ca), (vb, cb) = _scores("T2V", "a", a), _scores("T2V", "b", b)
    vt, ct = _scores("TV2V", "a", a)  # another task's scores: not compared with T2V's ratings
    table, meta = _run(tmp_path, {"a|T2V": va, "b|T2V": vb, "a|TV2V": vt}, {"a|T2V": ca, "b|T2V": cb, "a|TV2V": ct})
    final = table.filter(pl.col("evaluator") == "argus:final").row(0, named=True)
    assert (final["task"], final["dimension"], final["n_videos"], final["n_inputs"]) == ("T2V", "overall", 5, 3)
    pred, human = [3.0, 9.5, 9.0, 5.0, 2.0], [2, 4, 5, 3, 1]
    assert final["srcc"] == pytest.approx(stats.spearmanr(pred, human).statistic)
    assert set(table["evaluator"]) == {"argus:final", "argus:base", "argus:d13 visual/frame quality"}
    assert "'five' is not a number" in meta["skipped"].value
    assert meta["tasks"].value == "T2V"
    assert human_alignment_in_range(table).passed


def test_no_ratings_and_no_matching_videos_are_reported_not_raised(tmp_path):
    table, meta = _run(tmp_path, {}, {})
    assert table.height == 0 and meta["tasks"].value == "none"
    (tmp_path / "TI2V.csv").write_text("input_id,model,score\nq1,other,3\n")
    vs, cs = _scores("TI2V", "a", {"q9": 5.0})
    table, meta = _run(tmp_path, {"a|TI2V": vs}, {"a|TI2V": cs})
    assert table.height == 0
    assert "TI2V: no video has both a human rating" in meta["skipped"].value
    assert human_alignment_in_range(table).passed


def test_range_check_catches_an_impossible_row(tmp_path):
    (tmp_path / "T2V.csv").write_text("input_id,model,score\np1,a,2\np2,a,4\np3,a,5\n")
    vs, cs = _scores("T2V", "a", {"p1": 1.0, "p2": 2.0, "p3": 3.0})
    table, _ = _run(tmp_path, {"a|T2V": vs}, {"a|T2V": cs})
    assert human_alignment_in_range(table).passed
    broken = table.with_columns(pl.when(pl.col("evaluator") == "argus:final").then(1.5).otherwise(pl.col("srcc"))
                                .alias("srcc"))
    assert not human_alignment_in_range(broken).passed
    assert table["within_input_srcc"].is_nan().all()  # NaN (one candidate per input) is not a violation


def test_firm_ratings_are_evaluators_on_their_own_dimension(tmp_path):
    """FIRM's IF rating is compared with the humans' instruction_following, not with their other dimension."""
    (tmp_path / "T2V.csv").write_text(
        "input_id,model,dimension,score\n" + "".join(
            f"p{i},a,instruction_following,{h}\np{i},a,visual,{6 - h}\n" for i, h in enumerate([1, 2, 4, 5])))
    vs, cs = _scores("T2V", "a", {f"p{i}": s for i, s in enumerate([2.0, 4.0, 6.0, 8.0])})
    fs = pl.DataFrame({"task": ["T2V"] * 4, "model": ["a"] * 4, "input_id": [f"p{i}" for i in range(4)],
                       "if_rating": [1, 3, 4, 5], "wc_rating": [None, None, None, None], "pq_rating": [5, 4, 2, 1]},
                      schema_overrides={"wc_rating": pl.Int64})
    table, _ = _run(tmp_path, {"a|T2V": vs}, {"a|T2V": cs}, {"a|T2V": fs})
    firm_if = table.filter(pl.col("evaluator") == "firm_if")
    assert firm_if["dimension"].to_list() == ["instruction_following"]  # its own dimension only
    assert firm_if["srcc"][0] == pytest.approx(1.0) and firm_if["n_videos"][0] == 4
    # no human rated perceptual_quality: firm_pq is compared with every dimension
    assert sorted(table.filter(pl.col("evaluator") == "firm_pq")["dimension"]) == ["instruction_following", "visual"]
    assert "firm_wc" not in set(table["evaluator"])  # never scored: nothing to compare
    assert human_alignment_in_range(table).passed


def test_vefx_scores_are_evaluators_read_on_vefxs_1_4_scale(tmp_path):
    """People rated rendering quality 2, 3, 4, 4 on VEFX's 1-4 scale; the judge said 1, 2, 3, 4. On 1-4 the
    absolute errors are 1, 1, 1, 0 (MAE 0.75); the observed 2-4 range would have given 0.25."""
    from argus_dagster.protocols import vefx
    (tmp_path / "TV2V.csv").write_text("input_id,model,dimension,score\n" + "".join(
        f"e{i},a,{vefx.RQ},{h}\n" for i, h in enumerate([2, 3, 4, 4])))
    fs = pl.DataFrame({"task": ["TV2V"] * 4, "model": ["a"] * 4, "input_id": [f"e{i}" for i in range(4)],
                       "if_score": [4, 4, 4, 4], "rq_score": [1, 2, 3, 4], "ee_score": [2, 2, 2, 2],
                       "overall": [7 / 3, 8 / 3, 3.0, 10 / 3]})
    table, _ = _run(tmp_path, {}, {}, vefx_scores={"a|TV2V": fs})
    rows = {r["evaluator"]: r for r in table.iter_rows(named=True)}
    assert set(rows) == {"vefx_rq"}  # compared only with the human dimension of its meaning
    assert rows["vefx_rq"]["dimension"] == vefx.RQ and rows["vefx_rq"]["mae"] == pytest.approx(0.75)
    assert human_alignment_in_range(table).passed
