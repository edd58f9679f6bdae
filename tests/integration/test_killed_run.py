"""A run killed while it holds a concurrency-pool slot does not hang the next one: the dead-run sensor
fails it and frees the slot, asked by the next ``argus evaluate`` or ticked by a real daemon."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from .helpers import stop, t2v_bench

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

    # The same under the daemon (argus ui), with no argus command after the kill: a run this machine's
    # process executed holds the slot when the process is killed; the daemon's tick of the dead-run
    # sensor fails it. The evaluation is up to date: the other sensors request nothing meanwhile.
    hold = subprocess.Popen([sys.executable, "-c", HOLD], cwd=tmp_path, start_new_session=True,
                            env={**env, "DAGSTER_HOME": str(dagster_home)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not instance.event_log_storage.get_concurrency_info("gpu").claimed_slots:
        assert hold.poll() is None and time.time() < deadline, "the run never took the gpu slot"
        time.sleep(0.05)
    os.killpg(hold.pid, signal.SIGKILL)
    hold.wait()
    [held] = instance.event_log_storage.get_concurrency_info("gpu").claimed_slots
    assert instance.get_run_by_id(held.run_id).status == dg.DagsterRunStatus.STARTED
    log = open(tmp_path / "daemon.log", "w")
    daemon = subprocess.Popen([str(Path(sys.executable).parent / "dagster-daemon"), "run", "-w", "workspace.yaml"],
                              cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                              env={**env, "DAGSTER_HOME": str(dagster_home), "ARGUS_BENCH_DIR": str(bench),
                                   "ARGUS_CANDIDATES_DIR": str(cands), "ARGUS_DEAD_RUN_INTERVAL_S": "1"})
    try:
        deadline = time.time() + 120
        while instance.get_run_by_id(held.run_id).status != dg.DagsterRunStatus.FAILURE:
            assert daemon.poll() is None and time.time() < deadline, (tmp_path / "daemon.log").read_text()[-3000:]
            time.sleep(0.5)
    finally:
        stop(daemon)
        log.close()
    assert not instance.event_log_storage.get_concurrency_info("gpu").claimed_slots
    failure = instance.get_run_by_id(held.run_id)
    assert failure.tags["argus/process"].split(":")[1] == str(hold.pid)
    assert [r.run_id for r in instance.get_runs(dg.RunsFilter(tags={"dagster/sensor_name": "dead_run_sensor"}))] == []


# A run this machine's process executes itself (as argus evaluate's are), holding one slot of the gpu pool.
HOLD = """
import time
import dagster as dg
from argus_dagster.infra.processes import launcher_tags

@dg.asset(pool="gpu")
def holds_the_gpu_pool() -> None:
    time.sleep(600)

dg.materialize([holds_the_gpu_pool], instance=dg.DagsterInstance.get(), tags=launcher_tags())
"""
