"""Automation as shipped, against a real ``dagster-daemon`` on this machine: a model folder dropped
into the candidate store is added as a partition, scored, reported and put on the leaderboard with
no click (the candidate-store sensor observes it, the automation sensor scores it and the leaderboard)."""

import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from argus_dagster.infra.media import write_video

from .helpers import FAST_SENSORS, pattern_clip, stop, t2v_bench

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def _leaderboard(instance: dg.DagsterInstance) -> pl.DataFrame | None:
    record = instance.get_latest_materialization_event(dg.AssetKey("leaderboard"))
    if record is None:
        return None
    return pl.read_parquet(str(record.asset_materialization.metadata["path"].value))


def test_a_new_model_folder_reaches_the_leaderboard_with_no_click(tmp_path, monkeypatch):
    from argus_dagster.client.evaluate import run_all
    from argus_dagster.client.instance import local_instance
    from argus_dagster.infra.settings import load_settings

    home = tmp_path / "home"
    bench, cands = t2v_bench(tmp_path, n_inputs=2)
    env = {"ARGUS_HOME": str(home), "ARGUS_BENCH_DIR": str(bench), "ARGUS_CANDIDATES_DIR": str(cands)}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    settings = load_settings()
    env["DAGSTER_HOME"] = str(settings.dagster_home)  # as `argus evaluations --env` pins it for make ui
    run_all(progress=lambda _m: None)  # the bench as evaluated before: model m on the leaderboard
    assert (settings.dagster_home / "dagster.yaml").read_text().count("enabled: false") == 1

    for i in range(2):  # a new model appears while the daemon is up
        write_video(cands / "T2V" / "n" / f"p{i}.mp4", pattern_clip(10 + i)[:, :, ::-1], 12)
    log = open(tmp_path / "daemon.log", "w")
    proc = subprocess.Popen([str(Path(sys.executable).parent / "dagster-daemon"), "run", "-w", "workspace.yaml"],
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), **env,
                                 **FAST_SENSORS})
    try:
        instance = dg.DagsterInstance.from_config(str(settings.dagster_home))
        deadline, board = time.time() + 240, None
        while time.time() < deadline:
            board = _leaderboard(instance)
            if board is not None and "n" in board["model"].to_list():
                break
            assert proc.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
            time.sleep(2)
        assert board is not None and "n" in board["model"].to_list(), (tmp_path / "daemon.log").read_text()[-3000:]
    finally:
        stop(proc)
        log.close()

    assert instance.get_dynamic_partitions("candidate_models") == ["m", "n"]
    row = board.filter(pl.col("model") == "n").row(0, named=True)
    assert row["n_videos"] == 2 and row["mean_final"] is not None
    assert set(board["model"]) == {"m", "n"}  # m was not scored again
    key = str(dg.MultiPartitionKey({"task": "T2V", "model": "n"}))
    assert instance.get_latest_materialization_event(dg.AssetKey("diagnostic_reports")) is not None
    runs = instance.get_runs()
    # The candidate-store sensor added the partition and observed its videos; declarative automation
    # scored it (no run of the sensor's own), then re-materialized the leaderboard.
    automated = [r for r in runs if r.tags.get("dagster/from_automation_condition") == "true"]
    assert any(r.tags.get("dagster/partition") == key for r in automated), [r.tags for r in runs]
    assert not any(r.tags.get("argus/launcher") == "sensor" for r in runs)
    assert (settings.reports_dir / "T2V" / "n" / "index.html").is_file()
    local_instance().dispose()
