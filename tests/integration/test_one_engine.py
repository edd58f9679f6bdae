"""A run launched the way the UI and the sensor launch them (`dagster asset materialize` on the code
location, in its own process) and `argus evaluate` leave the same tables and count each other's work
as done."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from argus_dagster.client.evaluate import run_all
from argus_dagster.client.instance import local_instance
from argus_dagster.infra.media import write_video

from .helpers import evaluation_in, pattern_clip, sensor_then_automation, t2v_bench

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
CANDIDATE_ASSETS = "candidate_videos,criterion_evidence,criterion_scores,video_scores,diagnostic_reports"


def _scores(settings, instance: dg.DagsterInstance, partition: str) -> pl.DataFrame:
    from argus_dagster.client.results import evaluation_storage
    from argus_dagster.infra.tables import recorded_table
    from argus_dagster.records.lineage import latest_record  # a run of one partition or of a range alike

    return recorded_table(latest_record(instance, "video_scores", partition), evaluation_storage(settings)).sort("input_id")


def test_dagster_launched_runs_and_argus_evaluate_share_tables_and_staleness(tmp_path, monkeypatch):
    bench, cands = t2v_bench(tmp_path, n_inputs=2)
    for i in range(2):
        write_video(cands / "T2V" / "n" / f"p{i}.mp4", pattern_clip(10 + i)[:, :, ::-1], 12)
    key = str(dg.MultiPartitionKey({"task": "T2V", "model": "m"}))

    def home(name: str):
        return evaluation_in(monkeypatch, tmp_path / name, bench, cands)

    # Home "ui": the task and model m scored by Dagster's own launcher, as a UI backfill would.
    settings = home("ui")
    instance = local_instance(settings)
    instance.add_dynamic_partitions("candidate_models", ["m", "n"])
    from argus_dagster.resources import resources_for

    sensor_then_automation(instance, resources_for(settings=settings))  # the sources observed, as under make ui
    env = {**os.environ, "DAGSTER_HOME": str(settings.dagster_home), "PYTHONPATH": str(ROOT)}
    dagster = str(Path(sys.executable).parent / "dagster")
    for select, partition in (("input_instances,rubrics", "T2V"), (CANDIDATE_ASSETS, key)):
        done = subprocess.run([dagster, "asset", "materialize", "-m", "argus_dagster.location", "--select", select,
                               "--partition", partition], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    ui_runs = {r.run_id for r in instance.get_runs()}
    lines: list[str] = []
    run_all(progress=lines.append, settings=settings)
    assert any("T2V: inputs and rubrics up to date" in x for x in lines), lines
    assert any("T2V x m: up to date" in x for x in lines), lines
    assert any("T2V x n: scored" in x for x in lines), lines
    new_runs = [r for r in instance.get_runs() if r.run_id not in ui_runs]
    assert {r.tags.get("dagster/partition") for r in new_runs} == {str(dg.MultiPartitionKey({"task": "T2V", "model": "n"})),
                                                                   None}  # n's partition and the leaderboard
    # And the other way round: what argus evaluate stored is up to date for Dagster's own automation.
    assert sensor_then_automation(instance, resources_for(settings=settings)) == {}

    # Home "cli": the same bench through argus evaluate only: the same scores.
    cli = home("cli")
    run_all(progress=lambda m: None, settings=cli)
    cli_instance = local_instance(cli)
    for partition in (key, str(dg.MultiPartitionKey({"task": "T2V", "model": "n"}))):
        assert _scores(cli, cli_instance, partition).equals(_scores(settings, instance, partition))


def test_a_range_of_partitions_in_one_run_stores_each_partition_as_its_own_run_would(tmp_path, monkeypatch):
    """What a UI backfill launches under the assets' backfill policy: one run for a range of partitions
    (here both models of T2V), one process; each partition gets its own table, metadata and check,
    and argus evaluate and the sensor count it as done, with the scores of runs of one partition."""
    bench, cands = t2v_bench(tmp_path, n_inputs=2)
    for i in range(2):
        write_video(cands / "T2V" / "n" / f"p{i}.mp4", pattern_clip(10 + i)[:, :, ::-1], 12)
    keys = [str(dg.MultiPartitionKey({"task": "T2V", "model": m})) for m in ("m", "n")]
    settings = evaluation_in(monkeypatch, tmp_path / "ui", bench, cands)
    instance = local_instance(settings)
    instance.add_dynamic_partitions("candidate_models", ["m", "n"])
    from argus_dagster.resources import resources_for

    sensor_then_automation(instance, resources_for(settings=settings))  # the sources observed, as under make ui
    env = {**os.environ, "DAGSTER_HOME": str(settings.dagster_home), "PYTHONPATH": str(ROOT)}
    dagster = str(Path(sys.executable).parent / "dagster")
    for select, flag, partition in (("input_instances,rubrics", "--partition", "T2V"),
                                    (CANDIDATE_ASSETS, "--partition-range", f"{keys[0]}...{keys[1]}")):
        done = subprocess.run([dagster, "asset", "materialize", "-m", "argus_dagster.location", "--select", select,
                               flag, partition], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    ranged = [r for r in instance.get_runs() if r.tags.get("dagster/asset_partition_range_start")]
    assert len(ranged) == 1 and ranged[0].status == dg.DagsterRunStatus.SUCCESS
    for key, model in zip(keys, ("m", "n")):
        record = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("video_scores"), asset_partitions=[key]), limit=1).records[0]
        md = record.asset_materialization.metadata
        assert md["n_videos"].value == 2 and md["dagster/row_count"].value == 2  # its own, not the run's 4
        assert md["paths"].value[key] == f"storage/video_scores/{model}/T2V.parquet"  # relative to the evaluation
        df = pl.read_parquet(settings.evaluation_dir / md["paths"].value[key])
        assert set(df["model"]) == {model} and df["final_score"].null_count() == 0
    evaluations = [e for e in instance.get_records_for_run(ranged[0].run_id).records
                   if e.event_log_entry.dagster_event and e.event_log_entry.dagster_event.event_type_value
                   == "ASSET_CHECK_EVALUATION"]
    assert evaluations and all(e.event_log_entry.dagster_event.event_specific_data.passed for e in evaluations)

    lines: list[str] = []
    run_all(progress=lines.append, settings=settings)
    assert any("T2V x m: up to date" in x for x in lines) and any("T2V x n: up to date" in x for x in lines), lines
    assert sensor_then_automation(instance, resources_for(settings=settings)) == {}

    cli = evaluation_in(monkeypatch, tmp_path / "cli", bench, cands)
    run_all(progress=lambda m: None, settings=cli)
    cli_instance = local_instance(cli)
    for key in keys:
        record = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("video_scores"), asset_partitions=[key]), limit=1).records[0]
        ranged_scores = pl.read_parquet(settings.evaluation_dir / record.asset_materialization.metadata["paths"].value[key])
        assert _scores(cli, cli_instance, key).equals(ranged_scores.sort("input_id"))
