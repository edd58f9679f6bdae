"""A run killed while it holds a concurrency-pool slot does not hang the next one."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from .helpers import t2v_bench

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_a_run_killed_holding_the_gpu_pool_is_swept_and_the_next_run_finishes(tmp_path):
    home = tmp_path / "home"
    bench, cands = t2v_bench(tmp_path, n_inputs=6, n_frames=36)  # enough work to be caught holding the slot
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("ARGUS_")},
           "ARGUS_HOME": str(home), "PYTHONPATH": str(ROOT)}
    dagster_home = home / "benches" / "bench" / "default" / "dagster_home"  # the evaluation's instance
    dagster_home.mkdir(parents=True)
    instance = dg.DagsterInstance.from_config(str(dagster_home))
    instance.event_log_storage.set_concurrency_slots("gpu", 1)  # as `dagster instance concurrency set gpu 1`
    cmd = [str(Path(sys.executable).parent / "argus"), "evaluate", "--bench", str(bench), "--candidates", str(cands)]

    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 180
    while not instance.event_log_storage.get_concurrency_info("gpu").claimed_slots:
        assert proc.poll() is None and time.time() < deadline, "the run never took the gpu slot"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)  # while criterion_evidence holds the slot
    proc.wait()
    [held] = instance.event_log_storage.get_concurrency_info("gpu").claimed_slots
    assert instance.get_run_by_id(held.run_id).status == dg.DagsterRunStatus.STARTED

    again = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert f"run {held.run_id[:8]} was left started by a process that is gone" in again.stdout
    assert instance.get_run_by_id(held.run_id).status == dg.DagsterRunStatus.FAILURE
    assert not instance.event_log_storage.get_concurrency_info("gpu").claimed_slots
    assert "T2V" in again.stdout and " m " in again.stdout  # scored and on the leaderboard
