"""A backfill launched as the UI launches one (the webserver's GraphQL ``launchPartitionBackfill``,
executed by a real ``dagster-daemon``) and ``argus evaluate`` leave the same tables and count each
other's work as done."""

import os
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from argus_dagster.client.evaluate import run_all
from argus_dagster.client.instance import local_instance
from argus_dagster.infra.media import write_video

from .helpers import backfill_as_the_ui_does, evaluation_in, partitions_by_asset, pattern_clip, sensor_then_automation, t2v_bench

# A backfill the daemon plans every 30 s may take up to 400 s (backfill_as_the_ui_does): past the 5-minute bound.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]
TASK_ASSETS = ["input_instances", "rubrics"]
CANDIDATE_ASSETS = ["candidate_videos", "criterion_evidence", "criterion_scores", "video_scores", "diagnostic_reports"]


def _stored(settings, instance: dg.DagsterInstance, asset: str, partition: str | None = None) -> pl.DataFrame:
    from argus_dagster.client.results import evaluation_storage, load_stored

    return load_stored(instance, asset, partition, storage=evaluation_storage(settings))


def test_a_ui_backfill_and_argus_evaluate_share_tables_and_staleness(tmp_path, monkeypatch):
    bench, cands = t2v_bench(tmp_path, n_inputs=2)
    for i in range(2):
        write_video(cands / "T2V" / "n" / f"p{i}.mp4", pattern_clip(10 + i)[:, :, ::-1], 12)
    keys = [str(dg.MultiPartitionKey({"task": "T2V", "model": m})) for m in ("m", "n")]

    def home(name: str):
        return evaluation_in(monkeypatch, tmp_path / name, bench, cands)

    settings = home("ui")
    instance = local_instance(settings)  # the evaluation's instance and its dagster.yaml (a run queue of 4)
    instance.add_dynamic_partitions("candidate_models", ["m", "n"])  # as the sensor or the UI adds them
    from argus_dagster.resources import resources_for

    sensor_then_automation(instance, resources_for(settings=settings))  # the sources observed, as under make ui
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "PYTHONPATH": str(ROOT),
           **{k: v for k, v in os.environ.items() if k.startswith("ARGUS_")}, "DAGSTER_HOME": str(settings.dagster_home)}
    backfill = backfill_as_the_ui_does(tmp_path, env, partitions_by_asset(
        "T2V", keys, {"task": TASK_ASSETS, "candidate": CANDIDATE_ASSETS}))
    ui_runs = {r.run_id for r in instance.get_runs()}
    assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in instance.get_runs())
    assert all(r.tags.get("dagster/backfill") == backfill for r in instance.get_runs())
    # Under the assets' backfill policy both models' partitions are one run (one process), not two:
    # three runs in all (the task's inputs and rubrics, the candidates' range, the leaderboard).
    ranges = {(r.tags.get("dagster/asset_partition_range_start") or r.tags.get("dagster/partition"),
               r.tags.get("dagster/asset_partition_range_end") or r.tags.get("dagster/partition"))
              for r in instance.get_runs()}
    assert ranges == {("T2V", "T2V"), (keys[0], keys[1]), (None, None)} and len(ui_runs) == 3, ranges

    # argus evaluate on the same evaluation: every partition and the leaderboard are up to date.
    lines: list[str] = []
    board = run_all(progress=lines.append, settings=settings)
    assert any("T2V: inputs and rubrics up to date" in x for x in lines), lines
    assert sum(": up to date" in x for x in lines) == 2 and any("every partition up to date" in x for x in lines), lines
    assert {r.run_id for r in instance.get_runs()} == ui_runs  # no run launched
    assert set(board["model"]) == {"m", "n"}

    # And the same bench through argus evaluate alone, in another home: the same tables.
    cli = home("cli")
    cli_board = run_all(progress=lambda m: None, settings=cli)
    cli_instance = local_instance(cli)
    for key in keys:
        a, b = _stored(settings, instance, "video_scores", key), _stored(cli, cli_instance, "video_scores", key)
        assert a.sort("input_id").select("input_id", "final_score").equals(b.sort("input_id").select("input_id", "final_score"))
    cols = ["task", "model", "mean_final", "n_videos"]
    assert board.sort("model").select(cols).equals(cli_board.sort("model").select(cols))
    # The other way round: what argus evaluate stored in "cli", Dagster's automation there counts as done.
    assert sensor_then_automation(cli_instance, resources_for(settings=cli)) == {}
