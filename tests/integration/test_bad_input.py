"""Bad input gets a clear error on its row; the rest of the partition is scored."""

import json

import dagster as dg
import numpy as np
import polars as pl
import pytest

from argus_dagster.infra.media import write_video

from .helpers import graph_resources, load, materialize_task, pattern_clip

pytestmark = pytest.mark.integration



@pytest.fixture(scope="module")
def bad_bench(tmp_path_factory):
    root = tmp_path_factory.mktemp("bad")
    bench, cands, home = root / "bench", root / "cands", root / "home"
    (bench / "T2V").mkdir(parents=True)
    (bench / "TI2V" / "rubrics").mkdir(parents=True)
    (root / "outside.png").write_bytes(b"not in the bench")
    t2v = [{"id": f"v{i}", "prompt": f"A textured pattern slides to the left, take {i}."} for i in range(5)]
    (bench / "T2V" / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in t2v))
    # TI2V: one good input, one whose first frame points outside the bench, one with a broken rubric.
    import cv2
    cv2.imwrite(str(bench / "TI2V" / "first.png"), pattern_clip(9)[0])
    ti2v = [{"id": "good", "prompt": "The pattern slides.", "first_frame": "first.png"},
            {"id": "escape", "prompt": "The pattern slides.", "first_frame": "../../outside.png"},
            {"id": "badrubric", "prompt": "The pattern slides.", "first_frame": "first.png"}]
    (bench / "TI2V" / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ti2v))
    (bench / "TI2V" / "rubrics" / "badrubric.json").write_text(json.dumps(
        {"criteria": [{"id": "c1", "dimension": 9, "type": "soft", "importance": "urgent",
                       "scoring_rule": "0-10"}]}))  # no criterion text: nothing to verify
    m = cands / "T2V" / "m"
    write_video(m / "v0.mp4", pattern_clip(0), 12)
    write_video(m / "v1.mp4", pattern_clip(1), 12)
    (m / "v2.mp4").write_bytes(np.random.default_rng(2).bytes(5000))  # corrupt
    (m / "v3.mp4").write_bytes(b"")  # zero bytes
    # v4 missing
    for iid in ("good", "escape", "badrubric"):
        write_video(cands / "TI2V" / "m" / f"{iid}.mp4", pattern_clip(9), 12)
    resources = graph_resources(bench, cands, home)
    instance = dg.DagsterInstance.ephemeral()
    materialize_task("T2V", ["m"], resources, instance)
    materialize_task("TI2V", ["m"], resources, instance)
    return resources, instance


def test_bad_videos_get_errors_and_good_ones_scores(bad_bench):
    resources, instance = bad_bench
    key = dg.MultiPartitionKey({"task": "T2V", "model": "m"})
    vs = load("video_scores", resources, instance, key).sort("input_id")
    by_id = {r["input_id"]: r for r in vs.iter_rows(named=True)}
    assert by_id["v0"]["final_score"] is not None and by_id["v1"]["final_score"] is not None
    assert "cannot be decoded" in by_id["v2"]["error"]
    assert "empty file" in by_id["v3"]["error"]
    assert by_id["v4"]["error"].startswith("missing: no video for input 'v4'")
    for iid in ("v2", "v3", "v4"):
        assert by_id[iid]["final_score"] is None


def test_bad_inputs_and_rubrics_get_errors_on_their_rows(bad_bench):
    resources, instance = bad_bench
    inputs = load("input_instances", resources, instance, "TI2V")
    escape = inputs.filter(pl.col("input_id") == "escape")["error"][0]
    assert "outside the bench" in escape and "first_frame" in escape
    rubrics = load("rubrics", resources, instance, "TI2V")
    bad = rubrics.filter(pl.col("input_id") == "badrubric")["error"][0]
    assert "criterion 'c1' field 'criterion'" in bad
    assert rubrics.filter(pl.col("input_id") == "good")["error"][0] is None
    vs = load("video_scores", resources, instance, dg.MultiPartitionKey({"task": "TI2V", "model": "m"}))
    by_id = {r["input_id"]: r for r in vs.iter_rows(named=True)}
    assert by_id["good"]["final_score"] is not None
    assert by_id["escape"]["final_score"] is None and by_id["badrubric"]["final_score"] is None
    assert "rubric" in by_id["badrubric"]["error"]


def test_rerun_resumes_from_stored_evidence(bad_bench):
    """A second materialization of the same partition reruns no tool: every step is a cache hit."""
    from argus_dagster.assets import CANDIDATE_ASSETS, TASK_ASSETS

    resources, instance = bad_bench
    key = dg.MultiPartitionKey({"task": "T2V", "model": "m"})
    before = load("criterion_evidence", resources, instance, key)
    res = dg.materialize(CANDIDATE_ASSETS + TASK_ASSETS, selection=CANDIDATE_ASSETS, partition_key=key,
                         instance=instance, resources=resources)
    assert res.success
    mat = [m for m in res.get_asset_materialization_events() if m.asset_key == dg.AssetKey("criterion_evidence")][0]
    meta = mat.materialization.metadata
    n_steps = int(before["tools"].list.len().sum())
    assert meta["cache_misses"].value == 0 and meta["cache_hits"].value == n_steps > before.height > 0
    assert meta["tool_steps_run"].value == 0 and meta["tool_steps_cached"].value == n_steps
    after = load("criterion_evidence", resources, instance, key)
    assert after["cache_hit"].all() and not before["cache_hit"].any()
    assert after.sort(["input_id", "criterion_id"])["evidence"].to_list() == \
        before.sort(["input_id", "criterion_id"])["evidence"].to_list()


def test_failed_evidence_is_not_cached(tmp_path):
    """A tool failure (here: a source the output cannot be compared with) is retried on the next run."""
    from argus_dagster.infra.cache import ContentCache
    from argus_dagster.method.evidence.tools.registry import embedded_suite
    from argus_dagster.method.gather import collect_evidence
    from argus_dagster.method.inputs import InputInstance
    from argus_dagster.method.rubric.schema import parse_rubric

    write_video(tmp_path / "out.mp4", pattern_clip(1), 12)
    (tmp_path / "src.mp4").write_bytes(b"corrupt")
    inst = InputInstance("x", "edit it", source_video=str(tmp_path / "src.mp4"))
    rubric = parse_rubric({"criteria": [
        {"id": "change", "dimension": 18, "criterion": "edited", "type": "soft", "importance": "high",
         "scoring_rule": "0-10", "evidence_plan": {"tool_sequence": [
             {"tool": "change_probe", "args": {"a": "source_video", "b": "output_video"}}]}},
        {"id": "stable", "dimension": 12, "criterion": "stable", "type": "soft", "importance": "low",
         "scoring_rule": "0-10", "evidence_plan": {"tool_sequence": [{"tool": "flicker_probe", "args": {}}]}}]})
    cache = ContentCache(tmp_path / "cache", "evidence")
    rows = collect_evidence(inst, rubric, str(tmp_path / "out.mp4"), embedded_suite(), cache=cache, video_sha256="v")
    assert [r["n_ok"] for r in rows] == [0, 1]
    again = collect_evidence(inst, rubric, str(tmp_path / "out.mp4"), embedded_suite(), cache=cache, video_sha256="v")
    assert {r["criterion_id"]: r["cache_hit"] for r in again} == {"change": False, "stable": True}


def test_the_cli_ends_with_a_summary_of_row_errors_and_fails_only_when_nothing_is_scored(tmp_path, monkeypatch, capsys):
    from argus_dagster.client.cli import main

    bench, cands = tmp_path / "bench", tmp_path / "cands"
    (bench / "T2V").mkdir(parents=True)
    rows = [{"id": f"v{i}", "prompt": f"A textured pattern slides to the left, take {i}."} for i in range(3)]
    (bench / "T2V" / "manifest.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows) + '{"id": "broken", "prompt": \n')
    write_video(cands / "T2V" / "m" / "v0.mp4", pattern_clip(0), 12)
    (cands / "T2V" / "m" / "v1.mp4").write_bytes(b"")  # zero bytes; v2 missing
    (cands / "t2v_extra").mkdir()  # no task: left out, and said so
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home"))
    assert main(["evaluate", "--bench", str(bench), "--candidates", str(cands)]) == 0
    out = capsys.readouterr().out
    assert "left out: " in out and "t2v_extra: not a task folder" in out
    summary = out[out.index("rows with an error"):]
    assert summary.startswith("rows with an error (they are not scored; the rest are):")
    assert "'v1'" in summary and "'v2'" in summary and "missing" in summary
    assert "line 4" in summary  # the broken manifest line, with where it is

    # Nothing scorable at all: the run says so and fails.
    empty = tmp_path / "cands2"
    (empty / "T2V" / "m").mkdir(parents=True)
    (empty / "T2V" / "m" / "v0.mp4").write_bytes(b"")
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home2"))
    assert main(["evaluate", "--bench", str(bench), "--candidates", str(empty)]) == 1
    assert "no video could be scored" in capsys.readouterr().out


def test_an_evaluate_that_scores_nothing_leaves_the_default_evaluation_as_it_was(tmp_path, monkeypatch, capsys):
    import json as _json

    from argus_dagster.client.cli import main
    from argus_dagster.infra.settings import load_settings, record_bench, recorded_evaluations

    bench, cands = tmp_path / "bench", tmp_path / "cands"
    (bench / "T2V").mkdir(parents=True)
    (bench / "T2V" / "manifest.jsonl").write_text(_json.dumps({"id": "v0", "prompt": "A pattern slides."}) + "\n")
    (cands / "T2V" / "m").mkdir(parents=True)
    (cands / "T2V" / "m" / "v0.mp4").write_bytes(b"")  # nothing scorable
    other = tmp_path / "other"
    (other / "T2V").mkdir(parents=True)
    home = tmp_path / "home"
    monkeypatch.setenv("ARGUS_HOME", str(home))
    record_bench(other, tmp_path / "other_cands")
    assert main(["evaluate", "--bench", str(bench), "--candidates", str(cands)]) == 1
    assert load_settings().bench == "other"  # still the default
    assert {r["bench"] for r in recorded_evaluations()} == {"other", "bench"}  # the failed one is listed
