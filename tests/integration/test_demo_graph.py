"""The whole graph on the demo bench, through the same runner `argus demo` uses."""

import json
import os
import re
import shutil

import polars as pl
import pytest

from argus_dagster.client.demo import BEST_MODEL, KNOWN_BAD
from argus_dagster.client.instance import local_instance
from argus_dagster.client.results import current_leaderboard
from argus_dagster.infra import tables
from argus_dagster.infra.settings import load_settings
from argus_dagster.method.inputs import ALL_TASKS

from .helpers import DEMO_HUMAN_T2V, DEMO_ODD_MODEL

pytestmark = pytest.mark.integration


# Ratings a person might give the T2V demo: the faithful output best, the frozen one worst.
HUMAN_T2V = DEMO_HUMAN_T2V


@pytest.fixture(scope="module")
def demo_run(evaluated_demo):
    """The demo evaluated with those ratings in its bench's ``human/`` (``evaluated_demo``, the one
    evaluation the test run shares), as this module's ARGUS_HOME: ``(the leaderboard run_all returned,
    the evaluation's instance, the run's progress lines)``. Read only; a test that runs copies it."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ARGUS_HOME", str(evaluated_demo["home"]))
        mp.setenv("DAGSTER_HOME", os.environ["DAGSTER_HOME"])  # local_instance points it at the evaluation's
        yield pl.read_parquet(evaluated_demo["returned"]), local_instance(), evaluated_demo["progress"]


def test_every_task_and_model_is_on_the_leaderboard(demo_run):
    lb, _, _ = demo_run
    assert set(lb["task"].unique()) == set(ALL_TASKS)
    for task, bad in KNOWN_BAD.items():
        models = set(lb.filter(pl.col("task") == task)["model"])
        assert models == {BEST_MODEL, *bad, *([DEMO_ODD_MODEL] if task == "T2V" else [])}
    assert lb["n_videos"].min() == 3 and lb["n_errors"].max() == 0
    assert list(lb.columns) == list(tables.LEADERBOARD)


def test_known_bad_models_rank_below_the_best(demo_run):
    lb, _, _ = demo_run
    for task, bad in KNOWN_BAD.items():
        g = {r["model"]: r["mean_final"] for r in lb.filter(pl.col("task") == task).iter_rows(named=True)}
        best = max(g.values())
        assert g[BEST_MODEL] == best, (task, g)
        for model in bad:
            assert g[model] < best, f"{task}: known-bad {model} ({g[model]:.2f}) not below best ({best:.2f})"


def test_tables_follow_their_contracts(demo_run):
    import dagster as dg

    from argus_dagster.assets import ALL_ASSETS
    from argus_dagster.resources import resources_for

    _, instance, _ = demo_run
    defs = dg.Definitions(assets=ALL_ASSETS, resources=resources_for())
    key = dg.MultiPartitionKey({"task": "TV2V", "model": "did-nothing"})
    scores = defs.load_asset_value("criterion_scores", instance=instance, partition_key=key)
    videos = defs.load_asset_value("video_scores", instance=instance, partition_key=key)
    evidence = defs.load_asset_value("criterion_evidence", instance=instance, partition_key=key)
    assert list(scores.columns) == list(tables.CRITERION_SCORES)
    assert list(videos.columns) == list(tables.VIDEO_SCORES)
    # The "did nothing" edit fires the hard degenerate-edit criterion on every input.
    assert all("degenerate_edit" in caps for caps in videos["caps_fired"].to_list())
    # Without a VLM, vlm_qa-only criteria stay unscored with the reason; measurable ones are scored.
    unscored = scores.filter(pl.col("score").is_null())
    assert unscored.height > 0 and unscored["rationale"].str.contains("vlm_qa unavailable").all()
    assert scores.filter(pl.col("score").is_not_null()).height > 0
    assert scores["score"].drop_nulls().is_between(0, 10).all()
    # Evidence rows carry the executed plan and every tool's record.
    rec = json.loads(evidence.filter(pl.col("criterion_id") == "degenerate_edit")["evidence"][0])
    # The semantic read first, then the measures (method §4); without a VLM it says it is unavailable.
    assert [r["tool"] for r in rec] == ["vlm_qa", "change_probe", "motion_probe", "flicker_probe"]
    assert rec[0]["unavailable"] and rec[1]["ok"] and rec[1]["unchanged_fraction"] == 1.0


def test_rubrics_are_frozen_and_reused(demo_run, tmp_path, monkeypatch):
    settings = load_settings()
    frozen = sorted((settings.bench_dir / "T2V" / "rubrics").glob("*.json"))
    assert [p.stem for p in frozen] == ["bunny", "caption", "cyclist"]
    # A second materialization loads the frozen rubrics instead of writing new ones (its instance and
    # storage a copy of the evaluated home's: the evaluation is shared).
    home = shutil.copytree(settings.home, tmp_path / "argus", symlinks=True)
    monkeypatch.setenv("ARGUS_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", os.environ["DAGSTER_HOME"])  # local_instance points it at the copy's
    instance = local_instance()
    assert instance.root_directory == str(home / "benches" / "demo" / "default" / "dagster_home")
    import dagster as dg

    from argus_dagster.assets import TASK_ASSETS
    from argus_dagster.resources import resources_for

    res = dg.materialize(TASK_ASSETS, partition_key="T2V", instance=instance, resources=resources_for())
    df = res.output_for_node("rubrics")
    assert set(df["source"]) == {"loaded"}
    first = dg.AssetKey("rubrics")
    events = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=first, asset_partitions=["T2V"]), limit=2).records
    hashes = [e.asset_materialization.metadata["rubric_hashes"].value for e in events]
    assert hashes[0] == hashes[1]


def test_leaderboard_command_reads_the_stored_table(demo_run, capsys):
    from argus_dagster.client.cli import main

    assert main(["leaderboard", "--task", "TI2V"]) == 0
    out = capsys.readouterr().out
    assert "TI2V" in out and "wrong-start" in out and "T2V\n" not in out
    stored = current_leaderboard()
    assert stored.equals(demo_run[0])


def test_human_ratings_in_argus_home_are_compared_after_scoring(demo_run):
    """With ``$ARGUS_HOME/human/T2V.csv`` present, the run ends with the human_alignment table."""
    _, instance, lines = demo_run
    assert any(line.startswith("[") and "human alignment (ratings: T2V.csv)" in line for line in lines)
    table = next(line for line in lines if line.startswith("\nT2V\n"))
    final = next(row for row in table.splitlines() if row.startswith("argus:final "))
    assert final.split()[2:4] == ["12", "3"]  # 4 models x 3 inputs compared, within 3 inputs
    import dagster as dg

    assert instance.get_latest_materialization_event(dg.AssetKey("human_alignment")) is not None


def test_cli_runs_execute_the_partition_checks_and_they_pass(demo_run):
    import dagster as dg

    _, instance, lines = demo_run
    assert not [line for line in lines if "did not pass" in line]
    for asset, check, n in (("rubrics", "rubrics_follow_the_rules", 5),  # 5 tasks, 22 task x model
                            ("criterion_scores", "scores_in_range", 22),
                            ("video_scores", "every_candidate_scored_or_explained", 22)):
        history = instance.event_log_storage.get_asset_check_execution_history(
            dg.AssetCheckKey(dg.AssetKey(asset), check), limit=100)
        assert len(history) >= n, (check, len(history))
    # After the demo, every check of what it materialized has run and passed (the UI shows no grey
    # "0 / 1"): the unpartitioned ones ride along with the leaderboard's and the alignment's runs.
    from argus_dagster.definitions import build_definitions

    graph = build_definitions().resolve_asset_graph()
    for key in sorted(graph.asset_check_keys, key=lambda k: k.name):
        if key.asset_key.to_user_string() not in ("rubrics", "criterion_scores", "video_scores", "leaderboard",
                                                  "human_alignment"):
            continue  # FIRM-Video's and VEFX-Bench's: the demo runs neither protocol
        statuses = {h.status.value for h in instance.event_log_storage.get_asset_check_execution_history(key, limit=100)}
        # (a range run's check evaluates the range at once: Dagster keeps its per-partition plans as planned)
        assert "SUCCEEDED" in statuses and not statuses & {"FAILED", "EXECUTION_FAILED"}, (key.name, statuses)


def test_leaderboard_finds_the_home_like_git_and_creates_nothing_elsewhere(demo_run, capsys, tmp_path, monkeypatch):
    from argus_dagster.client.cli import main
    from argus_dagster.infra.settings import load_settings

    home = load_settings().home
    # A project folder whose .argus is the demo's home, run from a subfolder: found.
    project = tmp_path / "project"
    (project / "sub" / "deeper").mkdir(parents=True)
    (project / ".argus").symlink_to(home, target_is_directory=True)
    monkeypatch.delenv("ARGUS_HOME")
    monkeypatch.chdir(project / "sub" / "deeper")
    assert main(["leaderboard", "--task", "t2v"]) == 0  # any case
    out = capsys.readouterr().out
    assert "T2V\n" in out and "TI2V" not in out and "faithful" in out
    # Nowhere near a home: said plainly, with a newline, and nothing is created.
    lost = tmp_path / "elsewhere"
    lost.mkdir()
    monkeypatch.chdir(lost)
    assert main(["leaderboard"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("no ARGUS_HOME: no .argus folder in") and out.endswith("\n")
    assert not any(lost.iterdir())


def test_the_instance_has_its_own_dagster_yaml_with_telemetry_off(tmp_path, monkeypatch):
    import yaml

    from argus_dagster.client.instance import local_instance

    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "elsewhere"))  # local_instance points it at the evaluation's
    instance = local_instance()
    config = tmp_path / "home" / "benches" / "demo" / "default" / "dagster_home" / "dagster.yaml"
    assert yaml.safe_load(config.read_text()) == {"telemetry": {"enabled": False},
                                                  "python_logs": {"python_log_level": "INFO"},
                                                  "run_queue": {"max_concurrent_runs": 4, "dequeue_interval_seconds": 1,
                                                                "tag_concurrency_limits": [
                                                                    {"key": "dagster/partition", "limit": 1,
                                                                     "value": {"applyLimitPerUniqueValue": True}},
                                                                    {"key": "argus/pass", "limit": 1}]}}
    assert instance.root_directory == str(config.parent)
    instance.dispose()


def test_align_explains_every_column(demo_run, capsys, tmp_path):
    from argus_dagster.client.cli import main
    from argus_dagster.infra.settings import load_settings

    ids = [json.loads(line)["id"] for line in (load_settings().bench_dir / "T2V" / "manifest.jsonl").read_text().splitlines()]
    human = tmp_path / "human.csv"
    human.write_text("input_id,model,score\n" + "".join(f"{i},{m},{s}\n" for i in ids for m, s in HUMAN_T2V.items()))
    assert main(["align", "--human", str(human), "--scores", str(load_settings().storage_dir / "video_scores"),
                 "--task", "t2v", "--n-boot", "50"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("evaluator"))
    legend = out[out.index("columns:"):]
    explained = {w for line in legend.splitlines()[1:] for w in re.split(r"[ ,/]+", line[:18].strip())}
    for column in header.split()[2:]:
        if column not in ("95%", "CI"):
            assert column in explained or column.replace("wi_", "wi_srcc/") in legend, column
    with pytest.raises(SystemExit):
        main(["align", "--help"])
    assert "wi_n            inputs with at least two distinct human scores" in capsys.readouterr().out


def test_stages_say_their_progress_in_the_runs_logs(demo_run):

    from argus_dagster.records.lineage import latest_record

    _, instance, _ = demo_run
    run_id = latest_record(instance, "criterion_scores", "faithful|T2V").run_id  # a run of one partition or a range
    messages = [e.user_message for e in instance.all_logs(run_id)]
    assert any("T2V/faithful: evidence 3/3 videos (" in m for m in messages)
    assert any("T2V/faithful: judged 3/3 videos (" in m and "VLM requests" in m for m in messages)


def test_event_logs_keep_every_dagster_event_and_info_lines(demo_run):
    """The instance file's ``python_log_level: INFO``: no IO-manager DEBUG lines, every Dagster event."""
    import logging

    import dagster as dg

    from argus_dagster.records.lineage import latest_record

    _, instance, _ = demo_run
    logs = instance.all_logs(latest_record(instance, "criterion_scores", "blurry|T2V").run_id)
    assert not [e for e in logs if "Loading partition" in (e.user_message or "")]
    kinds = {e.dagster_event.event_type_value for e in logs if e.dagster_event}
    assert {t.value for t in (dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS,
                              dg.DagsterEventType.ASSET_MATERIALIZATION, dg.DagsterEventType.HANDLED_OUTPUT,
                              dg.DagsterEventType.LOADED_INPUT, dg.DagsterEventType.RUN_SUCCESS)} <= kinds
    assert any(e.level == logging.INFO and not e.dagster_event for e in logs)  # the stages' progress lines
