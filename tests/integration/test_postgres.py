"""The aws environment's instance on a real Postgres server (Debian's `postgresql`), started here on a
temporary data directory and a loopback port: `argus evaluate` records its runs and materializations
there, and the instance file's queue and monitoring settings are the ones Dagster reads."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml

from .helpers import t2v_bench

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_the_aws_instance_file_on_postgres_records_argus_evaluate(postgres_url, tmp_path):
    home = tmp_path / "home"
    dagster_home = home / "benches" / "bench" / "default" / "dagster_home"  # the evaluation's instance
    dagster_home.mkdir(parents=True)
    shutil.copy(ROOT / "deploy" / "aws" / "dagster.yaml", dagster_home / "dagster.yaml")
    storage = yaml.safe_load((dagster_home / "dagster.yaml").read_text())["storage"]
    assert storage == {"postgres": {"postgres_url": {"env": "DAGSTER_PG_URL"}}}  # the URL stays in the environment
    bench, cands = t2v_bench(tmp_path, n_inputs=2)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ARGUS_")}, "DAGSTER_PG_URL": postgres_url,
           "ARGUS_HOME": str(home), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([str(Path(sys.executable).parent / "argus"), "evaluate", "--bench", str(bench),
                           "--candidates", str(cands)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    os.environ["DAGSTER_PG_URL"] = postgres_url
    try:
        instance = dg.DagsterInstance.from_config(str(dagster_home))
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        runs = instance.get_runs()
        assert len(runs) == 3 and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)  # task, partition, board
        key = str(dg.MultiPartitionKey({"task": "T2V", "model": "m"}))
        assert instance.get_materialized_partitions(dg.AssetKey("video_scores")) == {key}
        assert instance.get_latest_materialization_event(dg.AssetKey("leaderboard")) is not None
        assert instance.run_monitoring_enabled and instance.run_monitoring_start_timeout_seconds == 300
        config = yaml.safe_load((ROOT / "deploy" / "aws" / "dagster.yaml").read_text())
        queue = instance.run_coordinator.get_run_queue_config()
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        assert queue.max_concurrent_runs == config["run_queue"]["max_concurrent_runs"]
        assert queue.tag_concurrency_limits == config["run_queue"]["tag_concurrency_limits"]
        assert not instance.telemetry_enabled
        instance.dispose()
    finally:
        os.environ.pop("DAGSTER_PG_URL", None)
