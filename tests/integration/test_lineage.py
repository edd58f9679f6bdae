"""Lineage on a real instance: score deltas after a changed input, checks, reports, reconcile, automation."""

import json
from html.parser import HTMLParser
from pathlib import Path

import dagster as dg
import numpy as np
import pytest

from argus_dagster.assets import ALL_ASSETS, ALL_CHECKS, CANDIDATE_ASSETS, OBSERVE_JOBS, SOURCES, TASK_ASSETS
from argus_dagster.assets.schedules import nightly_reconcile
from argus_dagster.infra.media import write_video

from .helpers import graph_resources, load, pattern_clip

pytestmark = pytest.mark.integration
KEY = dg.MultiPartitionKey({"task": "T2V", "model": "m"})
EVIL = '<script>alert(1)</script>'



def _run(resources, instance, assets, key):
    checks = [c for c in ALL_CHECKS if c.partitions_def is not None]
    res = dg.materialize(assets + TASK_ASSETS + checks, selection=assets + checks, partition_key=key,
                         instance=instance, resources=resources)
    assert res.success
    mats = {m.asset_key.to_user_string(): m.materialization.metadata for m in res.get_asset_materialization_events()}
    return mats, {e.check_name: e for e in res.get_asset_check_evaluations()}


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    root = tmp_path_factory.mktemp("lineage")
    bench, cands, home = root / "bench", root / "cands", root / "home"
    (bench / "T2V").mkdir(parents=True)
    rows = [{"id": "p0", "prompt": f"A pattern slides to the left. {EVIL}"},
            {"id": "p1", "prompt": "A textured pattern slides to the left, smoothly."}]
    (bench / "T2V" / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for i in (0, 1):
        write_video(cands / "T2V" / "m" / f"p{i}.mp4", pattern_clip(i), 12)
    resources = graph_resources(bench, cands, home)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("candidate_models", ["m"])
        _, task_checks = _run(resources, instance, TASK_ASSETS, "T2V")
        first, checks = _run(resources, instance, CANDIDATE_ASSETS, KEY)
        yield resources, instance, cands, first, {**task_checks, **checks}


def test_first_materialization_has_no_delta_and_checks_pass(scored):
    _, _, _, first, checks = scored
    assert first["criterion_scores"]["score_delta_summary"].value == "first materialization of this partition"
    assert "final_delta" not in first["video_scores"]
    for name in ("rubrics_follow_the_rules", "scores_in_range", "every_candidate_scored_or_explained"):
        assert checks[name].passed, (name, checks[name].metadata)


def test_reports_are_written_and_escape_the_prompt(scored):
    resources, _, _, first, _ = scored
    meta = first["diagnostic_reports"]
    assert meta["n_reports"].value == 2 and meta["n_errors"].value == 0
    assert meta["index"].value == "reports/T2V/m/index.html"  # as the evaluation names it
    index = str(Path(resources["storage"].evaluation_dir) / meta["index"].value)
    page = open(index.replace("index.html", "p0.html"), encoding="utf-8").read()
    tags = []
    parser = HTMLParser()
    parser.handle_starttag = lambda tag, attrs: tags.append(tag)
    parser.feed(page)
    assert "script" not in tags and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("data:image/jpeg;base64,") >= 6
    assert "p0.html" in open(index, encoding="utf-8").read()


def test_changed_video_shows_which_criteria_moved(scored):
    resources, instance, cands, _, _ = scored
    before = load("criterion_scores", resources, instance, KEY)
    frozen = np.repeat(pattern_clip(1)[:1], 24, axis=0)  # the model now returns a still for p1
    write_video(cands / "T2V" / "m" / "p1.mp4", frozen, 12)
    second, checks = _run(resources, instance, CANDIDATE_ASSETS, KEY)
    after = load("criterion_scores", resources, instance, KEY)
    meta = second["criterion_scores"]
    table = meta["score_delta"].value
    moved = {(r.data["input_id"], r.data["criterion_id"]): r.data for r in table.records}
    assert moved and {iid for iid, _ in moved} == {"p1"}
    assert meta["n_videos_moved"].value == 1 and meta["n_criteria_moved"].value == len(moved)
    joined = before.join(after, on=["input_id", "criterion_id"], suffix="_after")
    expected = {(r["input_id"], r["criterion_id"]): r for r in joined.iter_rows(named=True)
                if r["score"] != r["score_after"]}
    assert set(expected) == set(moved)
    for k, r in expected.items():
        if r["score"] is not None and r["score_after"] is not None:
            assert moved[k]["delta"] == r["score_after"] - r["score"]
    assert "`p1`:" in meta["score_delta_summary"].value and "`p0`" not in meta["score_delta_summary"].value
    vd = second["video_scores"]["final_delta"].value.records
    assert [r.data["input_id"] for r in vd] == ["p1"] and second["video_scores"]["n_finals_moved"].value == 1
    assert checks["scores_in_range"].passed and checks["every_candidate_scored_or_explained"].passed


def test_changed_rubric_shows_in_rubrics_and_score_deltas(scored):
    resources, instance, _, _, _ = scored
    path = resources["bench"].bench_path() / "T2V" / "rubrics" / "p0.json"
    rubric = json.loads(path.read_text())
    dropped = next(c for c in reversed(rubric["criteria"]) if c["type"] == "soft")
    rubric["criteria"] = [c for c in rubric["criteria"] if c["id"] != dropped["id"]]
    path.write_text(json.dumps(rubric))
    task_meta, task_checks = _run(resources, instance, TASK_ASSETS, "T2V")
    assert task_meta["rubrics"]["n_rubrics_changed"].value == 1
    assert "`p0`" in task_meta["rubrics"]["rubrics_changed"].value and task_checks["rubrics_follow_the_rules"].passed
    meta, _ = _run(resources, instance, CANDIDATE_ASSETS, KEY)
    moved = [r.data for r in meta["criterion_scores"]["score_delta"].value.records]
    assert [(r["input_id"], r["criterion_id"], r["change"]) for r in moved] == [("p0", dropped["id"], "removed")]


def test_rule_violations_are_named():
    from argus_dagster.assets.checks import rubric_problems
    from argus_dagster.method.rubric.schema import parse_rubric

    crit = {"dimension": 9, "criterion": "moves", "importance": "high", "scoring_rule": "0-10"}
    rubric = parse_rubric({"criteria": [{**crit, "id": "a", "type": "hard"}, {**crit, "id": "b", "type": "soft", "hard_cap": 6},
                                        {**crit, "id": "c", "type": "hard", "hard_cap": 4},
                                        {**crit, "id": "d", "type": "hard", "hard_cap": 2}]})
    row = {"input_id": "x", "error": None, "rubric_json": json.dumps(rubric.model_dump(mode="json")),
           "rubric_hash": rubric.content_hash()}
    errors, warnings = rubric_problems(row, has_subject=False, has_source=False)
    assert any("`a`: hard without a hard_cap" in e for e in errors)
    assert any("`b`: soft with hard_cap 6" in e for e in errors)
    assert warnings == ["`x`: 3 hard criteria (the method allows one or two)"]
    tampered = {**row, "rubric_hash": "0" * 64}
    assert any("stored hash" in e for e in rubric_problems(tampered, False, False)[0])
    bad = {"input_id": "y", "error": "criterion 'c1' field 'importance': bad", "rubric_json": None, "rubric_hash": None}
    assert rubric_problems(bad, False, False)[0] == ["`y`: does not validate: criterion 'c1' field 'importance': bad"]


def test_leaderboard_follows_by_automation_and_covers_partitions(scored):
    resources, instance, cands, _, _ = scored
    defs = dg.Definitions(assets=ALL_ASSETS, asset_checks=ALL_CHECKS, resources=resources)
    lb_key = dg.AssetKey("leaderboard")
    first = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    res = dg.materialize(ALL_ASSETS + ALL_CHECKS, selection=[lb_key], instance=instance, resources=resources)
    assert res.success
    cover = {e.check_name: e for e in res.get_asset_check_evaluations()}["leaderboard_covers_partitions"]
    assert cover.passed and cover.metadata["n_partitions"].value == 1
    meta = [m for m in res.get_asset_materialization_events() if m.asset_key == lb_key][0].materialization.metadata
    assert meta["plot_T2V"].value.startswith("![T2V leaderboard](data:image/png;base64,")
    quiet = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=first.cursor)
    assert quiet.get_num_requested(lb_key) == 0
    # Re-scored with nothing changed: the same data version, so the leaderboard stays fresh.
    assert dg.materialize(CANDIDATE_ASSETS + TASK_ASSETS, selection=["video_scores"], partition_key=KEY,
                          instance=instance, resources=resources).success
    assert dg.evaluate_automation_conditions(defs=defs, instance=instance).get_num_requested(lb_key) == 0
    # A video changed and re-scored: another data version, and the leaderboard follows.
    write_video(cands / "T2V" / "m" / "p1.mp4", pattern_clip(9), 12)
    assert dg.materialize(CANDIDATE_ASSETS + TASK_ASSETS, selection=CANDIDATE_ASSETS, partition_key=KEY,
                          instance=instance, resources=resources).success
    again = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    assert again.get_num_requested(lb_key) == 1


def test_nightly_reconcile_observes_every_video_and_automation_requests_what_changed(scored):
    """The schedule runs the ``observe_candidate_files`` job (every video hashed again); the automation
    conditions then request the partition whose videos changed and the new model's, nothing else."""
    resources, instance, cands, _, _ = scored
    defs = dg.Definitions(assets=ALL_ASSETS + SOURCES, asset_checks=ALL_CHECKS, resources=resources,
                          jobs=OBSERVE_JOBS, schedules=[nightly_reconcile])
    with dg.build_schedule_context(instance=instance, repository_def=defs.get_repository_def()) as ctx:
        [request] = list(nightly_reconcile.evaluate_tick(ctx).run_requests)
    job = defs.resolve_job_def(nightly_reconcile.job_name)
    assert job.name == "observe_candidate_files" and request.run_config in ({}, None)

    def observe_then_ask():
        assert job.execute_in_process(instance=instance).success
        asked = dg.evaluate_automation_conditions(defs=defs, instance=instance,
                                                  asset_selection=dg.AssetSelection.assets("candidate_videos"))
        return sorted(str(p) for p in asked.get_requested_partitions(dg.AssetKey("candidate_videos")))

    # The partition was scored before its videos were ever observed: Dagster calls it stale (a new
    # dependency) until it is scored with them.
    assert observe_then_ask() == [str(KEY)]
    _run(resources, instance, CANDIDATE_ASSETS, KEY)
    assert observe_then_ask() == []  # observed again, nothing changed: nothing requested
    write_video(cands / "T2V" / "m" / "p0.mp4", pattern_clip(5), 12)  # changed
    write_video(cands / "T2V" / "n" / "p0.mp4", pattern_clip(6), 12)  # a new model
    instance.add_dynamic_partitions("candidate_models", ["n"])
    assert observe_then_ask() == [str(KEY), str(dg.MultiPartitionKey({"task": "T2V", "model": "n"}))]
