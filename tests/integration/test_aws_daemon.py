"""The aws environment as a deployment runs it: a backfill submitted through the webserver's GraphQL
(what the UI sends), queued and launched by a real ``dagster-daemon`` on Postgres storage (the
project's ``deploy/aws/dagster.yaml``), each step in its own process (the aws executor), reading the
bench and the candidates from moto's S3 server and writing tables, cache, rubrics and reports there.
The leaderboard read back from S3 equals the local run's."""

import os
import shutil
from pathlib import Path

import dagster as dg
import pytest

from argus_dagster.infra.settings import load_settings
from argus_dagster.outputs.overview import stored_table

from .helpers import backfill_as_the_ui_does, partitions_by_asset
from .test_aws_storage import BUCKET, INPUTS, _upload
from .test_ui_backfill import CANDIDATE_ASSETS, TASK_ASSETS

# A backfill the daemon plans every 30 s may take up to 400 s (backfill_as_the_ui_does): past the 5-minute bound.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]


def test_a_daemon_backfill_on_postgres_and_s3_gives_the_local_scores(tmp_path, moto_endpoint, postgres_url,
                                                                     local_t2v_run, monkeypatch):
    # The bench, its videos and their local run (conftest.local_t2v_run, shared with test_aws_storage).
    bench, cands = local_t2v_run["bench"], local_t2v_run["cands"]
    local_board = stored_table(local_t2v_run["storage"], "leaderboard")

    env_vars = {"ARGUS_ENV": "aws", "ARGUS_HOME": str(tmp_path / "home"), "ARGUS_S3_ENDPOINT_URL": moto_endpoint,
                "ARGUS_BENCH_DIR": f"s3://{INPUTS}/bench", "ARGUS_CANDIDATES_DIR": f"s3://{INPUTS}/cands",
                "ARGUS_BENCH": "b", "ARGUS_S3_BUCKET": BUCKET, "ARGUS_S3_PREFIX": "eval", "DAGSTER_PG_URL": postgres_url}
    for k, v in env_vars.items():
        monkeypatch.setenv(k, v)
    from argus_dagster.resources import resources_for

    resources = resources_for()
    client = resources["storage"].storage().client
    for b in (BUCKET, INPUTS):
        client.create_bucket(Bucket=b)
    _upload(client, bench, INPUTS, "bench")
    _upload(client, cands, INPUTS, "cands")
    settings = load_settings()
    settings.dagster_home.mkdir(parents=True)
    shutil.copy(ROOT / "deploy" / "aws" / "dagster.yaml", settings.dagster_home / "dagster.yaml")
    instance = dg.DagsterInstance.from_config(str(settings.dagster_home))
    assert type(instance.run_storage).__name__ == "PostgresRunStorage"
    instance.add_dynamic_partitions("candidate_models", ["m"])
    key = str(dg.MultiPartitionKey({"task": "T2V", "model": "m"}))

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "PYTHONPATH": str(ROOT),
           "DAGSTER_HOME": str(settings.dagster_home), **env_vars,
           **{k: os.environ[k] for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION")}}
    backfill_as_the_ui_does(tmp_path, env, partitions_by_asset(
        "T2V", [key], {"task": TASK_ASSETS, "candidate": CANDIDATE_ASSETS}))
    runs = instance.get_runs()
    assert runs and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
    # Each step ran in its own process (the aws executor), as the run launcher started the run.
    starts = [e for r in runs for e in instance.all_logs(r.run_id, of_type=dg.DagsterEventType.STEP_START)]
    assert {"candidate_videos", "criterion_evidence", "criterion_scores", "video_scores"} <= {e.step_key for e in starts}
    assert len({e.dagster_event.pid for e in starts}) == len(starts)  # a process per step
    # The leaderboard, read back from S3, is the local run's.
    evaluation = f"s3://{BUCKET}/eval/benches/b/default"
    board = stored_table(f"{evaluation}/storage", "leaderboard", resources["storage"].storage())
    cols = ["task", "model", "mean_final", "n_videos", "n_errors"]
    assert board.select(cols).equals(local_board.select(cols)), (board, local_board)
    recorded = instance.get_latest_materialization_event(dg.AssetKey("leaderboard")).asset_materialization.metadata[
        "path"].value
    assert recorded == "storage/leaderboard.parquet"  # relative to the evaluation, on S3 as on disk
    store = resources["storage"].storage()
    assert store.resolve(recorded) == f"{evaluation}/storage/leaderboard.parquet" and store.exists(store.resolve(recorded))
    instance.dispose()
