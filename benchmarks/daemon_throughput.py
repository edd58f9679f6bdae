"""Throughput of the daemon path: a backfill submitted as the UI submits it, run by a real daemon.

Builds a bench of 5 tasks x ``--inputs`` inputs (``benchmarks.scale``'s bench: the demo's real clips
and stills) and ``--models`` candidate models (each model a different degradation of the same videos,
so no two models share a cached tool step or judgment), and starts the loopback OpenAI-compatible
judge (a process of its own, fixed latency). Then, for each N in ``--runs``, in a fresh ``ARGUS_HOME``
whose evaluation instance (``$ARGUS_HOME/benches/<bench>/default/dagster_home``) has a
QueuedRunCoordinator with ``max_concurrent_runs: N``:

1. starts ``dagster-webserver`` (127.0.0.1) and ``dagster-daemon`` on that instance;
2. stops the candidate-store and automation sensors (GraphQL ``stopSensor``, the UI's toggle), so the
   backfill's runs are the only ones, adds the models to ``candidate_models`` and materializes each
   task's inputs and rubrics (``dagster asset materialize``; timed apart, not in the figures);
3. submits one backfill of the candidate assets over every task x model partition with GraphQL
   ``launchPartitionBackfill`` (the mutation the UI's "Materialize" dialog sends), and waits until the
   backfill is done and every one of its runs has finished.

It prints, per N, the wall time from submission to the last run's end, the runs, the VLM requests, the
judge-latency bound ``requests x latency / concurrency`` and the ratio of wall time to that bound.

    .venv/bin/python -m benchmarks.daemon_throughput [--models 10] [--inputs 1] [--runs 1,4,8] \\
        [--latency 0.2] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
CANDIDATE_ASSETS = ["candidate_videos", "criterion_evidence", "criterion_scores", "video_scores", "diagnostic_reports"]
TASKS = ["T2V", "TI2V", "TS2V", "TV2V", "TSV2V"]


def build_bench(root: Path, n_inputs: int, n_models: int) -> tuple[Path, Path]:
    """``benchmarks.scale``'s bench with one faithful model, then ``n_models`` models ``m00``.. made
    from its videos by the demo's degradations with a seed per model (distinct content per model)."""
    from argus_dagster.client import demo
    from argus_dagster.infra.media import VideoReader, write_video
    from benchmarks.scale import build_scale_bench

    bench, cands = build_scale_bench(root, 5 * n_inputs, 1)
    for video in sorted((cands).glob("*/faithful/*.mp4")):
        frames = VideoReader(str(video)).get(list(range(demo.N_FRAMES)))
        for k in range(n_models):
            bad = demo.flicker(frames, k) if k % 2 == 0 else demo.blurry(frames, k)
            write_video(cands / video.parent.parent.name / f"m{k:02d}" / video.name, bad, demo.FPS)
    for folder in cands.glob("*/faithful"):
        shutil.rmtree(folder)
    return bench, cands


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _graphql(port: int, query: str, variables: dict | None = None) -> dict:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", method="POST",
                                 data=json.dumps({"query": query, "variables": variables or {}}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        out = json.loads(resp.read())
    if out.get("errors"):
        raise RuntimeError(out["errors"])
    return out["data"]


SENSORS = """query { sensorsOrError(repositorySelector: {repositoryName: "__repository__",
  repositoryLocationName: "argus_dagster"}) { __typename ... on Sensors { results { id name sensorState { status } } }
  ... on PythonError { message } } }"""
STOP_SENSOR = """mutation($id: String) { stopSensor(id: $id) { __typename
  ... on StopSensorMutationResult { instigationState { status } } ... on PythonError { message } } }"""
LAUNCH_BACKFILL = """mutation($params: LaunchBackfillParams!) { launchPartitionBackfill(backfillParams: $params) {
  __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message stack } } }"""
BACKFILL = """query($id: String!) { partitionBackfillOrError(backfillId: $id) { __typename
  ... on PartitionBackfill { status } ... on PythonError { message } } }"""


def _env(home: Path, bench: Path, cands: Path, base_url: str, concurrency: int, max_runs: int) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARGUS_", "DAGSTER_"))}
    dagster_home = home / "benches" / bench.name / "default" / "dagster_home"  # the evaluation's instance
    dagster_home.mkdir(parents=True)
    (dagster_home / "dagster.yaml").write_text(
        f"run_queue:\n  max_concurrent_runs: {max_runs}\n  dequeue_interval_seconds: 1\n"
        "telemetry:\n  enabled: false\n")
    env.update(ARGUS_HOME=str(home), DAGSTER_HOME=str(dagster_home), ARGUS_VLM_BASE_URL=base_url,
               ARGUS_VLM_MODEL="bench-model", ARGUS_VLM_CONCURRENCY=str(concurrency),
               ARGUS_BENCH_DIR=str(bench), ARGUS_CANDIDATES_DIR=str(cands), PYTHONPATH=str(ROOT))
    return env


def sensors_stopped(port: int, webserver: subprocess.Popen, log: Path, timeout_s: float = 300) -> None:
    """Wait until the webserver answers with the code location's sensors, then stop every one of them
    (the benchmark launches its backfill itself); the webserver's log is raised if it never answers."""
    deadline = time.time() + timeout_s
    while True:
        try:
            sensors = _graphql(port, SENSORS)["sensorsOrError"]
            if sensors["__typename"] == "Sensors":
                break
        except OSError:
            pass
        if time.time() > deadline or webserver.poll() is not None:
            raise RuntimeError(log.read_text()[-3000:])
        time.sleep(1)
    for s in sensors["results"]:
        stopped = _graphql(port, STOP_SENSOR, {"id": s["id"]})["stopSensor"]
        assert stopped["__typename"] == "StopSensorMutationResult", stopped


def one_setting(root: Path, bench0: Path, cands: Path, base_url: str, concurrency: int, max_runs: int,
                n_models: int) -> dict:
    home = root / f"n{max_runs}"
    bench = shutil.copytree(bench0, home / "media" / bench0.name)  # rubrics generated here stay here
    env = _env(home, bench, cands, base_url, concurrency, max_runs)
    port = _free_port()
    logs = {name: open(home / f"{name}.log", "w") for name in ("webserver", "daemon")}
    procs = []
    try:
        procs.append(subprocess.Popen([str(BIN / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(port),
                                       "-w", "workspace.yaml"], cwd=ROOT, env=env, stdout=logs["webserver"],
                                      stderr=subprocess.STDOUT))
        sensors_stopped(port, procs[0], home / "webserver.log")
        procs.append(subprocess.Popen([str(BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"], cwd=ROOT, env=env,
                                      stdout=logs["daemon"], stderr=subprocess.STDOUT))

        import dagster as dg

        os.environ["DAGSTER_HOME"] = env["DAGSTER_HOME"]
        instance = dg.DagsterInstance.from_config(env["DAGSTER_HOME"])
        models = [f"m{k:02d}" for k in range(n_models)]
        instance.add_dynamic_partitions("candidate_models", models)
        t0 = time.perf_counter()
        for task in TASKS:  # each task's inputs and rubrics: what the candidate partitions read
            subprocess.run([str(BIN / "dagster"), "asset", "materialize", "-m", "argus_dagster.location",
                            "--select", "input_instances,rubrics", "--partition", task], cwd=ROOT, env=env,
                           check=True, capture_output=True)
        t_rubrics = time.perf_counter() - t0

        partitions = [f"{m}|{t}" for m in models for t in TASKS]  # model|task: the dimensions, sorted by name
        t0 = time.perf_counter()
        launched = _graphql(port, LAUNCH_BACKFILL, {"params": {
            "assetSelection": [{"path": [a]} for a in CANDIDATE_ASSETS], "partitionNames": partitions,
            "fromFailure": False, "title": f"daemon throughput, max_concurrent_runs {max_runs}"}})
        result = launched["launchPartitionBackfill"]
        if result["__typename"] != "LaunchBackfillSuccess":
            raise RuntimeError(result)
        backfill_id = result["backfillId"]
        finished = {"SUCCESS", "FAILURE", "CANCELED"}
        status, max_running, deadline = None, 0, time.time() + 3600
        while time.time() < deadline:
            status = _graphql(port, BACKFILL, {"id": backfill_id})["partitionBackfillOrError"]["status"]
            runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
            max_running = max(max_running, sum(r.status.value in ("STARTED", "STARTING") for r in runs))
            if status not in ("REQUESTED", "CANCELING", "FAILING") and runs and all(r.status.value in finished for r in runs):
                break
            for p in procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited: " + (home / "daemon.log").read_text()[-3000:])
            time.sleep(0.5)
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
        # The last run's end, from the instance's records (the poll adds up to half a second).
        ends = [rec.end_time for rec in instance.get_run_records(filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
                if rec.end_time]
        starts = [rec.create_timestamp.timestamp() for rec in
                  instance.get_run_records(filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id}))]
        wall = time.perf_counter() - t0
        span = max(ends) - min(starts) if ends and starts else float("nan")
        ok = sum(r.status.value == "SUCCESS" for r in runs)
        instance.dispose()
        return {"n": max_runs, "status": status, "runs": len(runs), "ok": ok, "wall": wall, "span": span,
                "max_running": max_running, "t_rubrics": t_rubrics, "partitions": len(partitions)}
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
        for f in logs.values():
            f.close()


def bench_arguments(description: str, *, models: int, latency: float, concurrency: int, concurrency_help: str,
                    keep_help: str) -> argparse.ArgumentParser:
    """The options a backfill benchmark shares: the bench's size (``--models``, ``--inputs``), the loopback
    judge's latency, the judge's bound and ``--keep``."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--models", type=int, default=models, help="candidate models (partitions = 5 tasks x models)")
    ap.add_argument("--inputs", type=int, default=1, help="inputs per task (videos per partition)")
    ap.add_argument("--latency", type=float, default=latency, help="judge latency per request, seconds")
    ap.add_argument("--concurrency", type=int, default=concurrency, help=concurrency_help)
    ap.add_argument("--keep", action="store_true", help=keep_help)
    return ap


def served_since(conn, n0: int) -> dict:
    """The loopback judge's log of the requests after the first ``n0`` (``kinds``, ``max_in_flight``,
    ``n_total``: the count to pass next time)."""
    conn.send(("log", n0))
    return conn.recv()


def say_bench(cands: Path, args, bound: str) -> None:
    """One line on the bench and the judge a backfill benchmark runs against."""
    n_videos = sum(1 for _ in cands.rglob("*.mp4"))
    print(f"bench: {n_videos} videos ({args.inputs} per task x model), 5 tasks x {args.models} models; "
          f"judge latency {args.latency * 1000:.0f} ms, {bound}; CPUs {os.cpu_count()}", flush=True)


def drop_or_keep(root: Path, keep: bool) -> None:
    """The benchmark's temporary folder removed, or kept (``--keep``) and named."""
    if not keep:
        shutil.rmtree(root, ignore_errors=True)
    else:
        print(f"kept {root}")


def main() -> None:
    ap = bench_arguments(__doc__.splitlines()[0], models=10, latency=0.2, concurrency=8,
                         concurrency_help="the judge's machine-wide bound (ARGUS_VLM_CONCURRENCY)",
                         keep_help="keep the temporary folder (logs, instances)")
    ap.add_argument("--runs", default="1,4,8", help="max_concurrent_runs settings, comma-separated")
    args = ap.parse_args()

    sys.path.insert(0, str(ROOT))
    from benchmarks.scale import serving

    root = Path(tempfile.mkdtemp(prefix="argus_daemon_bench_"))
    results = []
    try:
        with serving(args.latency) as (conn, base_url):
            bench, cands = build_bench(root / "media", args.inputs, args.models)
            say_bench(cands, args, f"concurrency {args.concurrency}")
            n0 = served_since(conn, 0)["n_total"]
            for n in [int(x) for x in args.runs.split(",")]:
                res = one_setting(root, bench, cands, base_url, args.concurrency, n, args.models)
                log = served_since(conn, n0)
                n0 = log["n_total"]
                kinds = log["kinds"]
                res["rubric_requests"] = kinds.count("rubric")
                res["requests"] = len(kinds) - kinds.count("rubric")  # the backfill's (rubrics came before)
                res["max_in_flight"] = log["max_in_flight"]
                results.append(res)
                print(f"N={n}: backfill {res['status']}, {res['ok']}/{res['runs']} runs succeeded, "
                      f"{res['wall']:.1f} s; inputs and rubrics {res['t_rubrics']:.1f} s before "
                      f"({res['rubric_requests']} rubric requests)", flush=True)
    finally:
        drop_or_keep(root, args.keep)
    print(f"{'N':>3}{'runs':>6}{'ok':>5}{'most running':>14}{'wall s':>8}{'runs span s':>13}{'requests':>10}"
          f"{'bound s':>9}{'wall/bound':>12}{'s/partition':>13}")
    for r in results:
        bound = r["requests"] * args.latency / args.concurrency
        print(f"{r['n']:>3}{r['runs']:>6}{r['ok']:>5}{r['max_running']:>14}{r['wall']:>8.1f}{r['span']:>13.1f}"
              f"{r['requests']:>10}{bound:>9.1f}{r['wall'] / bound if bound else float('nan'):>12.2f}"
              f"{r['wall'] / r['partitions']:>13.2f}")


if __name__ == "__main__":
    main()
