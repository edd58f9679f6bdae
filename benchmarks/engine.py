"""``argus evaluate`` against the path UI and sensor runs take, on the same bench and judge.

Builds a bench of about N videos over the five tasks (``benchmarks.scale``'s bench: the demo's real
clips and stills), starts the loopback OpenAI-compatible server (a process of its own, fixed latency),
and materializes every asset cold, twice, each time in a fresh ``ARGUS_HOME``:

* ``cli``: ``argus evaluate`` (the CLI's runner);
* ``dagster``: the same runs as a UI backfill (or the candidate-store sensor) launches them, one
  ``dagster asset materialize`` process per run (the code location's executor, a process per run as
  the run launcher starts it). Under the assets' backfill policy a run takes a range of partitions:
  the tasks' inputs and rubrics in one run, then one run per model over its tasks, up to
  ``--parallel`` at once (the run queue's ``max_concurrent_runs``, 4 as ``argus evaluate`` uses it),
  then the leaderboard.
* ``ui`` (not run unless named): a real UI backfill. ``dagster-webserver`` and ``dagster-daemon`` on
  the evaluation's instance (up and idle before the clock starts, the sensors stopped so the backfill
  runs alone); the clock runs from the webserver's GraphQL ``launchPartitionBackfill`` (what the UI
  sends: the tasks' inputs and rubrics, the candidate assets over their partitions, the leaderboard)
  to the leaderboard run's success. It also prints how much of that the runs themselves took; the
  rest is the daemon's planning, which looks at a backfill every 30 s (Dagster's fixed interval) and
  launches each wave once the one before it is materialized.

* ``job`` (not run unless named): the ``evaluate`` job launched as the UI's Launchpad launches it
  (GraphQL ``launchRun`` on a running webserver and daemon, the sensors stopped): one run worker
  carries the whole pass. The clock runs from the launch to the run's end.
* ``sensor`` (not run unless named): a model added while the daemon is up. The daemon and its sensors
  run on an evaluation whose candidate folder is empty; the clock starts when the videos are copied in
  and stops when the candidate-store sensor's ``evaluate`` run ends (one sensor tick, at most
  ``--sensor-interval`` s, then one run worker).

For ``job`` and ``sensor`` it prints where the time went: the wait for the sensor's tick, the run
queue's wait with the run worker's start (its process importing the code), the pass observing the
sources and planning, the pass's runs, and how many processes were started (one run worker).

It prints, per path, the wall time, the VLM requests, the judge-latency bound
``requests x latency / concurrency`` and the ratio of the dagster path to the CLI's.

    .venv/bin/python -m benchmarks.engine [--videos 12] [--latency 0.2] [--concurrency 8] [--parallel 4] \\
        [--paths cli,dagster,ui,job,sensor] [--sensor-interval 5]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CANDIDATE_ASSETS = "candidate_videos,criterion_evidence,criterion_scores,video_scores,diagnostic_reports"


def _env(home: Path, base_url: str, concurrency: int, bench: Path, cands: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARGUS_")}
    dagster_home = home / "benches" / bench.name / "default" / "dagster_home"  # the evaluation's instance
    env.update(ARGUS_HOME=str(home), DAGSTER_HOME=str(dagster_home), ARGUS_VLM_BASE_URL=base_url,
               ARGUS_VLM_MODEL="bench-model", ARGUS_VLM_CONCURRENCY=str(concurrency),
               ARGUS_BENCH_DIR=str(bench), ARGUS_CANDIDATES_DIR=str(cands), PYTHONPATH=str(ROOT))
    from argus_dagster.client.instance import ensure_instance_yaml

    ensure_instance_yaml(dagster_home)  # the instance argus evaluate makes: its run queue allows 4 runs at once
    return env


def _cli(env: dict, bench: Path, cands: Path) -> float:
    t0 = time.perf_counter()
    subprocess.run([str(Path(sys.executable).parent / "argus"), "evaluate", "--bench", str(bench),
                    "--candidates", str(cands)], env=env, check=True, capture_output=True)
    return time.perf_counter() - t0


def _dagster(env: dict, cands: Path, parallel: int) -> float:
    from argus_dagster.method.candidate_store import discover
    from argus_dagster.method.inputs import ALL_TASKS

    dagster = str(Path(sys.executable).parent / "dagster")

    def materialize(select: str, partitions: tuple[str, str] | None = None) -> None:
        cmd = [dagster, "asset", "materialize", "-m", "argus_dagster.location", "--select", select]
        if partitions and partitions[0] == partitions[1]:
            cmd += ["--partition", partitions[0]]
        elif partitions:
            cmd += ["--partition-range", f"{partitions[0]}...{partitions[1]}"]
        subprocess.run(cmd, env=env, cwd=ROOT, check=True, capture_output=True)

    found = discover(cands).models
    tasks = [t for t in ALL_TASKS if any(t in ts for ts in found.values())]

    def range_of(keys: list[str]) -> tuple[str, str]:
        return keys[0], keys[-1]  # contiguous here: every model of the bench has every task
    t0 = time.perf_counter()
    # The instance is created here, timed as argus evaluate's is (a cold evaluation's first command
    # creates it); then the partitions the sensor adds, then the runs it requests.
    from dagster import DagsterInstance

    os.environ["DAGSTER_HOME"] = env["DAGSTER_HOME"]
    DagsterInstance.get().add_dynamic_partitions("candidate_models", sorted(found))
    # The runs a backfill of these partitions launches under the assets' backfill policy: one per
    # range (Dagster holds the dimension with fewer keys fixed: here each model, over its tasks).
    materialize("input_instances,rubrics", range_of(tasks))
    ranges = [range_of([f"{m}|{t}" for t in ALL_TASKS if t in ts]) for m, ts in sorted(found.items())]
    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(lambda r: materialize(CANDIDATE_ASSETS, r), ranges))
    materialize("leaderboard")
    return time.perf_counter() - t0


def _ui(env: dict, cands: Path, root: Path) -> float:
    """A backfill of every partition as the UI launches it, on a running webserver and daemon."""
    from dagster import DagsterInstance, DagsterRunStatus, MultiPartitionKey, RunsFilter

    from argus_dagster.method.candidate_store import discover
    from argus_dagster.method.inputs import ALL_TASKS
    from tests.integration.helpers import start_webserver, stop, stop_sensors

    found = discover(cands).models
    tasks = [t for t in ALL_TASKS if any(t in ts for ts in found.values())]
    if len(found) != 1:
        raise SystemExit(f"the ui path backfills one model's range of partitions; the bench has {len(found)} models")
    [model] = found
    keys = [str(MultiPartitionKey({"task": t, "model": model})) for t in tasks]
    instance = DagsterInstance.from_config(env["DAGSTER_HOME"])
    instance.add_dynamic_partitions("candidate_models", sorted(found))  # as the candidate-store sensor adds them
    web, graphql = start_webserver(root, env)
    daemon = None
    try:
        stop_sensors(graphql)
        daemon = _daemon_up(env, root, graphql, ("BACKFILL", "QUEUED_RUN_COORDINATOR"))
        selection = ([{"assetKey": {"path": [a]}, "partitions": {"range": {"start": tasks[0], "end": tasks[-1]}}}
                      for a in ("input_instances", "rubrics")]
                     + [{"assetKey": {"path": [a]}, "partitions": {"range": {"start": keys[0], "end": keys[-1]}}}
                        for a in CANDIDATE_ASSETS.split(",")]
                     + [{"assetKey": {"path": ["leaderboard"]}}, {"assetKey": {"path": ["costs"]}}])
        t0 = time.perf_counter()
        launched = graphql("mutation($p: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $p) { "
                           "__typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }",
                           p={"partitionsByAssets": selection})["launchPartitionBackfill"]
        if launched["__typename"] != "LaunchBackfillSuccess":
            raise SystemExit(f"the backfill was not launched: {launched}")
        backfill = launched["backfillId"]
        deadline = time.time() + 600
        while True:
            runs = instance.get_run_records(RunsFilter(tags={"dagster/backfill": backfill}))
            if any(r.dagster_run.status in (DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED) for r in runs):
                raise SystemExit(f"a run of the backfill failed: {(root / 'daemon.log').read_text()[-2000:]}")
            done = [r for r in runs if r.dagster_run.status == DagsterRunStatus.SUCCESS
                    and [k.to_user_string() for k in r.dagster_run.asset_selection or []] == ["leaderboard"]]
            if done:
                wall = time.perf_counter() - t0
                break
            if time.time() > deadline or daemon.poll() is not None:
                raise SystemExit(f"the backfill did not finish: {(root / 'daemon.log').read_text()[-2000:]}")
            time.sleep(0.1)
        in_runs = sum(r.end_time - r.create_timestamp.timestamp() for r in runs if r.end_time)
        print(f"ui backfill: {len(runs)} runs, {in_runs:.1f} s from each run's creation to its end (summed); "
              f"the rest of {wall:.1f} s waits for the daemon's next look at the backfill")
        return wall
    finally:
        if daemon is not None:
            stop(daemon)
        stop(web)


LAUNCH_RUN = """mutation($p: ExecutionParams!) { launchRun(executionParams: $p) { __typename
  ... on LaunchRunSuccess { run { runId } } ... on PythonError { message } } }"""


def _pass(env: dict, cands: Path, root: Path, via: str, sensor_interval: int) -> float:
    """The ``evaluate`` job's one run, launched as the UI's Launchpad does (``via="job"``) or requested
    by the candidate-store sensor when the videos appear (``via="sensor"``); prints where the time went."""
    from dagster import DagsterInstance, DagsterRunStatus, RunsFilter

    from argus_dagster.client.pass_job import PASS_RUN_TAG
    from tests.integration.helpers import REPO, start_webserver, stop, stop_sensors

    env = {**env, "ARGUS_SENSOR_INTERVAL_S": str(sensor_interval)}
    if via == "sensor":  # the evaluation starts with no candidate videos: they are added while the daemon is up
        env["ARGUS_CANDIDATES_DIR"] = str(root / "candidates")
        (root / "candidates").mkdir(parents=True)
    web, graphql = start_webserver(root, env)
    daemon = None
    try:
        if via == "job":
            stop_sensors(graphql)
        daemon = _daemon_up(env, root, graphql, ("SENSOR", "QUEUED_RUN_COORDINATOR"))
        instance = DagsterInstance.from_config(env["DAGSTER_HOME"])
        t0, wall_t0 = time.perf_counter(), time.time()
        if via == "sensor":
            for task in sorted(p for p in cands.iterdir() if p.is_dir()):
                shutil.copytree(task, root / "candidates" / task.name)
        else:
            launched = graphql(LAUNCH_RUN, p={"selector": {**REPO, "jobName": "evaluate"}, "runConfigData": {}})
            if launched["launchRun"]["__typename"] != "LaunchRunSuccess":
                raise SystemExit(f"the evaluate job was not launched: {launched}")
        deadline = time.time() + 900
        while True:
            runs = instance.get_run_records(RunsFilter(job_name="evaluate"))
            if any(r.dagster_run.status in (DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED) for r in runs):
                raise SystemExit(f"the evaluate run failed: {(root / 'daemon.log').read_text()[-2000:]}")
            if runs and runs[0].dagster_run.status == DagsterRunStatus.SUCCESS:
                wall = time.perf_counter() - t0
                break
            if time.time() > deadline or daemon.poll() is not None:
                raise SystemExit(f"the evaluate run did not finish: {(root / 'daemon.log').read_text()[-2000:]}")
            time.sleep(0.1)
        [record] = runs
        stats = instance.get_run_stats(record.dagster_run.run_id)
        inner = [instance.get_run_stats(r.run_id)
                 for r in instance.get_runs(RunsFilter(tags={PASS_RUN_TAG: record.dagster_run.run_id}))]
        created = record.create_timestamp.timestamp()
        first = min((s.start_time for s in inner if s.start_time), default=stats.end_time)
        last = max((s.end_time for s in inner if s.end_time), default=stats.end_time)
        print(f"{via}: {wall:.1f} s = {created - wall_t0:.1f} s until the run was requested"
              + (" (the sensor's tick)" if via == "sensor" else "")
              + f", {stats.start_time - created:.1f} s from the request to the run's start (the run queue, the run "
              f"worker's process and its imports), {first - stats.start_time:.1f} s for the pass to observe the sources "
              f"and plan, {last - first:.1f} s in the pass's {len(inner)} runs, "
              f"{stats.end_time - last:.1f} s after them; 1 process started (the run worker)")
        return wall
    finally:
        if daemon is not None:
            stop(daemon)
        stop(web)


def _daemon_up(env: dict, root: Path, graphql, kinds: tuple[str, ...]) -> subprocess.Popen:
    """``dagster-daemon`` on the evaluation's instance, once the daemons ``kinds`` report healthy; its log
    is ``root/daemon.log``."""
    log = open(root / "daemon.log", "w")
    daemon = subprocess.Popen([str(Path(sys.executable).parent / "dagster-daemon"), "run", "-w", "workspace.yaml"],
                              cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 180
    while not _daemons_healthy(graphql, kinds):
        if daemon.poll() is not None or time.time() > deadline:
            raise SystemExit(f"the daemon did not come up: {(root / 'daemon.log').read_text()[-2000:]}")
        time.sleep(0.5)
    return daemon


def _daemons_healthy(graphql, kinds: tuple[str, ...]) -> bool:
    data = graphql("{ instance { daemonHealth { allDaemonStatuses { daemonType healthy } } } }")
    statuses = {d["daemonType"]: d["healthy"] for d in data["instance"]["daemonHealth"]["allDaemonStatuses"]}
    return all(statuses.get(k) for k in kinds)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--videos", type=int, default=12, help="at least this many candidate videos (5 tasks)")
    ap.add_argument("--latency", type=float, default=0.2, help="server latency per request, seconds")
    ap.add_argument("--concurrency", type=int, default=8, help="the judge's bound (ARGUS_VLM_CONCURRENCY)")
    ap.add_argument("--parallel", type=int, default=4,
                    help="runs at once on the dagster path (the instance's run queue: max_concurrent_runs 4)")
    ap.add_argument("--paths", default="cli,dagster", help="which paths to measure: cli, dagster, ui (a UI backfill), "
                                                           "job (the evaluate job from the UI), sensor (a model added "
                                                           "under the daemon)")
    ap.add_argument("--demo", action="store_true", help="the demo's bench (argus demo's) instead of --videos")
    ap.add_argument("--sensor-interval", type=int, default=5,
                    help="the candidate-store sensor's interval on the job and sensor paths (shipped: 60 s)")
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT))
    from benchmarks.scale import build_scale_bench, serving

    root = Path(tempfile.mkdtemp(prefix="argus_engine_bench_"))
    try:
        with serving(args.latency) as (conn, base_url):
            if args.demo:
                from argus_dagster.client.demo import build_demo_bench

                bench, cands = build_demo_bench(root / "media", progress=lambda _m: None)
            else:
                bench, cands = build_scale_bench(root / "media", args.videos, 1)
            n_videos = sum(1 for _ in cands.rglob("*.mp4"))
            print(f"bench: {'the demo, ' if args.demo else ''}{n_videos} videos, 5 tasks; judge latency {args.latency * 1000:.0f} ms, concurrency "
                  f"{args.concurrency}; dagster path: {args.parallel} runs at once")
            results, n0 = [], 0
            for name in args.paths.split(","):
                # Each path gets its own copy of the bench: rubrics generated by one are not frozen for the other.
                own = shutil.copytree(bench, root / name / "bench_copy" / "bench")
                env = _env(root / name, base_url, args.concurrency, own, cands)
                wall = (_cli(env, own, cands) if name == "cli" else _dagster(env, cands, args.parallel)
                        if name == "dagster" else _ui(env, cands, root / name) if name == "ui"
                        else _pass(env, cands, root / name, name, args.sensor_interval))
                conn.send(("log", n0))
                log = conn.recv()
                n0 = log["n_total"]
                results.append((name, wall, len(log["kinds"])))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{'path':<9}{'wall s':>8}{'requests':>10}{'bound s':>9}{'wall/bound':>12}")
    for name, wall, n in results:
        bound = n * args.latency / args.concurrency
        print(f"{name:<9}{wall:>8.1f}{n:>10}{bound:>9.1f}{wall / bound if bound else float('nan'):>12.2f}")
    walls = {name: wall for name, wall, _ in results}
    for name in ("dagster", "ui", "job", "sensor"):
        if name in walls and "cli" in walls:
            print(f"{name} path / cli: {walls[name] / walls['cli']:.2f}x")


if __name__ == "__main__":
    main()
