"""Automation as shipped, against a real ``dagster-daemon`` on this machine: a model folder dropped
into the candidate store is added as a partition, scored, reported and put on the leaderboard with
no click (the candidate-store sensor observes it and requests one run of the ``evaluate`` job, which
carries the whole pass); and that pass and an ``argus evaluate`` started beside it score every
partition once, the home page and the overview then showing the stored leaderboard."""

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
ARGUS = str(Path(sys.executable).parent / "argus")


def _leaderboard(settings, instance: dg.DagsterInstance) -> pl.DataFrame | None:
    from argus_dagster.client.results import evaluation_storage, load_stored

    return load_stored(instance, "leaderboard", storage=evaluation_storage(settings))


def _evaluated(tmp_path: Path, monkeypatch) -> tuple[dict, object, Path]:
    """A T2V bench with model m evaluated, its environment (as `argus evaluations --env` pins it)."""
    from argus_dagster.client.evaluate import run_all
    from argus_dagster.infra.settings import load_settings

    bench, cands = t2v_bench(tmp_path, n_inputs=2)
    env = {"ARGUS_HOME": str(tmp_path / "home"), "ARGUS_BENCH_DIR": str(bench), "ARGUS_CANDIDATES_DIR": str(cands)}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    settings = load_settings()
    env["DAGSTER_HOME"] = str(settings.dagster_home)
    run_all(progress=lambda _m: None)  # the bench as evaluated before: model m on the leaderboard
    return env, settings, cands


def _daemon(tmp_path: Path, env: dict, log):
    return subprocess.Popen([str(Path(sys.executable).parent / "dagster-daemon"), "run", "-w", "workspace.yaml"],
                            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), **env,
                                 **FAST_SENSORS})


def _wait(condition, proc, log_path: Path, timeout: float = 240, what: str = ""):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = condition()
        if got:
            return got
        assert proc.poll() is None, log_path.read_text()[-3000:]
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout} s\n" + log_path.read_text()[-3000:])


def _passes(instance: dg.DagsterInstance) -> list[dg.DagsterRun]:
    return instance.get_runs(dg.RunsFilter(job_name="evaluate"))


def test_a_new_model_folder_reaches_the_leaderboard_with_no_click(tmp_path, monkeypatch):
    from argus_dagster.client.instance import local_instance
    from argus_dagster.client.pass_job import PASS_RUN_TAG

    env, settings, cands = _evaluated(tmp_path, monkeypatch)
    assert (settings.dagster_home / "dagster.yaml").read_text().count("enabled: false") == 1
    for i in range(2):  # a new model appears while the daemon is up
        write_video(cands / "T2V" / "n" / f"p{i}.mp4", pattern_clip(10 + i)[:, :, ::-1], 12)
    log_path = tmp_path / "daemon.log"
    with open(log_path, "w") as log:
        proc = _daemon(tmp_path, env, log)
        try:
            instance = dg.DagsterInstance.from_config(str(settings.dagster_home))
            done = _wait(lambda: [r for r in _passes(instance) if r.is_finished], proc, log_path, what="the pass")
            board = _leaderboard(settings, instance)
        finally:
            stop(proc)

    [the_pass] = done
    assert the_pass.status == dg.DagsterRunStatus.SUCCESS
    assert the_pass.tags["argus/why"].startswith("new models: n;") and the_pass.tags["dagster/sensor_name"] == \
        "candidate_store_sensor"
    assert instance.get_dynamic_partitions("candidate_models") == ["m", "n"]
    row = board.filter(pl.col("model") == "n").row(0, named=True)
    assert row["n_videos"] == 2 and row["mean_final"] is not None
    assert set(board["model"]) == {"m", "n"}  # m was not scored again
    key = str(dg.MultiPartitionKey({"task": "T2V", "model": "n"}))
    # The pass executed the partition's chain, the leaderboard and the pages in its one run worker; the
    # automation sensor held back while it was in flight, and requested nothing after it.
    inner = instance.get_runs(dg.RunsFilter(tags={PASS_RUN_TAG: the_pass.run_id}))
    assert sorted(r.tags.get("dagster/partition") or "-" for r in inner) == ["-", key]
    assert not [r for r in instance.get_runs() if r.tags.get("dagster/from_automation_condition") == "true"]
    assert (settings.reports_dir / "T2V" / "n" / "index.html").is_file()
    local_instance().dispose()


def test_the_sensors_pass_and_argus_evaluate_at_once_score_each_partition_once(tmp_path, monkeypatch):
    from argus_dagster.client.results import evaluation_storage, load_stored

    env, settings, cands = _evaluated(tmp_path, monkeypatch)
    for model, seed in (("n", 10), ("o", 20)):
        for i in range(2):
            write_video(cands / "T2V" / model / f"p{i}.mp4", pattern_clip(seed + i)[:, :, ::-1], 12)
    log_path = tmp_path / "daemon.log"
    with open(log_path, "w") as log:
        proc = _daemon(tmp_path, env, log)
        try:
            instance = dg.DagsterInstance.from_config(str(settings.dagster_home))
            # The sensor's pass starts; argus evaluate starts beside it, on the same evaluation.
            _wait(lambda: [r for r in _passes(instance) if r.status != dg.DagsterRunStatus.QUEUED], proc, log_path,
                  what="the pass starting")
            cli = subprocess.run([ARGUS, "evaluate", "--bench", env["ARGUS_BENCH_DIR"], "--candidates",
                                  env["ARGUS_CANDIDATES_DIR"]], env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
                                 capture_output=True, text=True, timeout=400)
            assert cli.returncode == 0, cli.stdout[-3000:] + cli.stderr[-3000:]
            _wait(lambda: all(r.is_finished for r in instance.get_runs()), proc, log_path, what="every run ending")
        finally:
            stop(proc)

    assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in instance.get_runs()), \
        [(r.job_name, r.status) for r in instance.get_runs() if r.status != dg.DagsterRunStatus.SUCCESS]
    for model in ("n", "o"):
        key = str(dg.MultiPartitionKey({"task": "T2V", "model": model}))
        for asset in ("criterion_evidence", "criterion_scores", "video_scores"):
            got = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset),
                                                                        asset_partitions=[key]), limit=10).records
            assert len(got) == 1, (asset, model, cli.stdout)  # scored once, by one of the two
    board = _leaderboard(settings, instance)
    assert sorted(board["model"]) == ["m", "n", "o"], cli.stdout
    # What a person reads: the home page's row and the overview show the stored leaderboard.
    videos = int(board["n_videos"].sum())
    home = (Path(env["ARGUS_HOME"]) / "benches" / "index.html").read_text()
    assert f"1 tasks, 3 models, {videos} videos scored" in home
    overview = (settings.reports_dir / "index.html").read_text()
    for row in board.iter_rows(named=True):
        assert f"{row['mean_final']:.2f}" in overview, row
    assert load_stored(instance, "site", storage=evaluation_storage(settings)) is not None
