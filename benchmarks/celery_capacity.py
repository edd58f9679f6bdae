"""Capacity of the celery environment: the same backfill on 1, 2 and 4 Celery workers.

Starts, on loopback: Debian's Postgres (``initdb`` on a temporary folder), Redis (``redis-server``),
moto's S3 server and the loopback OpenAI-compatible judge (a process of its own, fixed latency). The
bench (``benchmarks.daemon_throughput.build_bench``: 5 tasks x ``--inputs`` inputs, ``--models``
models, each model a different degradation, so no two share a cached judgment) goes into a bucket.
Then, for each N in ``--workers``, on a fresh database and a fresh S3 prefix (a cold content cache):

1. starts N workers (``dagster-celery worker start -y deploy/celery/celery.yaml``, each serving both
   queues, ``gpu`` and ``default``, one task at a time), each in a folder of its own with its own
   HOME, ARGUS_HOME and DAGSTER_HOME, and ``dagster-webserver`` and ``dagster-daemon`` on the
   instance of ``deploy/celery/dagster.yaml``;
2. submits one backfill of every task's inputs and rubrics, every task x model partition of the
   candidate assets and the leaderboard with GraphQL ``launchPartitionBackfill`` (what the UI sends),
   and waits until it is done and every run has finished.

It prints, per N, the wall time from submission to the last run's end, the runs, the judge requests,
the judge-latency bound ``requests x latency / (concurrency x N)`` (the bound is per worker machine:
each worker has its own ``ARGUS_VLM_CONCURRENCY`` slots) and wall time against it.

    .venv/bin/python -m benchmarks.celery_capacity [--models 4] [--inputs 1] [--workers 1,2,4] \\
        [--latency 0.5] [--concurrency 2]
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.daemon_throughput import BACKFILL, LAUNCH_BACKFILL, TASKS, _free_port, _graphql, sensors_stopped

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TASK_ASSETS = ["input_instances", "rubrics"]
CANDIDATE_ASSETS = ["candidate_videos", "criterion_evidence", "criterion_scores", "video_scores", "diagnostic_reports"]
AWS = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1"}


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not (found or shutil.which(name)):
        raise SystemExit(f"{name} not found: apt-get install postgresql")
    return found[-1] if found else shutil.which(name)


def _as_postgres(cmd: list[str]) -> None:
    if os.geteuid() == 0:  # initdb and postgres refuse root
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    subprocess.run(cmd, check=True, capture_output=True)


class Servers:
    """Postgres, Redis and moto's S3 server on loopback, in ``root``."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.procs: list[subprocess.Popen] = []
        # A folder of its own at the top of /tmp: the postgres user must reach it (a folder made by
        # mkdtemp inside another is behind that one's 0700).
        self.pg = Path(tempfile.mkdtemp(prefix="argus_bench_pg_"))
        self.pg_data = self.pg / "data"

    def __enter__(self) -> "Servers":
        from moto.server import ThreadedMotoServer

        (self.pg / "sock").mkdir(parents=True)
        if os.geteuid() == 0:
            for p in (self.pg, self.pg / "sock"):
                shutil.chown(p, "postgres")
        self.pg_port = _free_port()
        _as_postgres([_pg_bin("initdb"), "-D", str(self.pg_data), "-U", "argus", "--auth=trust", "-E", "UTF8"])
        _as_postgres([_pg_bin("pg_ctl"), "-D", str(self.pg_data), "-l", str(self.pg / "log"), "-w", "start",
                      "-o", f"-p {self.pg_port} -k {self.pg / 'sock'} -c listen_addresses=127.0.0.1"])
        redis_port = _free_port()
        if not shutil.which("redis-server"):
            raise SystemExit("redis-server not found: make redis (apt-get install redis-server)")
        self.procs.append(subprocess.Popen(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
                                            "--save", "", "--appendonly", "no", "--dir", str(self.root)],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        self.redis_url = f"redis://127.0.0.1:{redis_port}/0"
        s3_port = _free_port()
        self.moto = ThreadedMotoServer(ip_address="127.0.0.1", port=s3_port, verbose=False)
        self.moto.start()
        self.s3 = f"http://127.0.0.1:{s3_port}"
        return self

    def database(self, name: str) -> str:
        subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.pg_port), "-U", "argus", "-d", "postgres", "-c",
                        f"CREATE DATABASE {name}"], check=True, capture_output=True)
        return f"postgresql+psycopg2://argus@127.0.0.1:{self.pg_port}/{name}"

    def __exit__(self, *exc) -> None:
        self.moto.stop()
        for p in self.procs:
            p.terminate()
            p.wait(timeout=30)
        _as_postgres([_pg_bin("pg_ctl"), "-D", str(self.pg_data), "-m", "fast", "stop"])
        shutil.rmtree(self.pg, ignore_errors=True)


def _upload(client, folder: Path, bucket: str, prefix: str) -> None:
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            client.put_object(Bucket=bucket, Key=f"{prefix}/{p.relative_to(folder).as_posix()}", Body=p.read_bytes())


def one_setting(root: Path, servers: Servers, n_workers: int, models: list[str], base_url: str,
                concurrency: int) -> dict:
    import dagster as dg

    home = root / f"n{n_workers}"
    prefix = f"n{n_workers}"
    env = {"PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}", "PYTHONPATH": str(ROOT), **AWS,
           "ARGUS_ENV": "celery", "ARGUS_S3_ENDPOINT_URL": servers.s3, "ARGUS_BENCH_DIR": "s3://inputs/bench",
           "ARGUS_CANDIDATES_DIR": "s3://inputs/cands", "ARGUS_BENCH": "bench", "ARGUS_S3_BUCKET": "argus",
           "ARGUS_S3_PREFIX": prefix, "ARGUS_VLM_BASE_URL": base_url, "ARGUS_VLM_MODEL": "bench-model",
           "ARGUS_VLM_CONCURRENCY": str(concurrency), "ARGUS_CELERY_BROKER": servers.redis_url,
           "DAGSTER_PG_URL": servers.database(f"bench_{prefix}")}
    instance_yaml = yaml.safe_load((ROOT / "deploy" / "celery" / "dagster.yaml").read_text())
    instance_yaml["compute_logs"]["config"]["endpoint_url"] = servers.s3
    instance_yaml["run_queue"]["dequeue_interval_seconds"] = 1

    def folder(name: str) -> dict:
        f = home / name
        for sub in ("home", "argus_home", "dagster_home", "cwd"):
            (f / sub).mkdir(parents=True, exist_ok=True)
        (f / "dagster_home" / "dagster.yaml").write_text(yaml.safe_dump(instance_yaml))
        return {**env, "HOME": str(f / "home"), "ARGUS_HOME": str(f / "argus_home"),
                "DAGSTER_HOME": str(f / "dagster_home")}

    procs: list[subprocess.Popen] = []
    head = folder("head")
    try:
        for k in range(n_workers):
            worker_env = folder(f"w{k}")
            procs.append(subprocess.Popen(
                [str(BIN / "dagster-celery"), "worker", "start", "-A", "dagster_celery.app",
                 "-y", str(ROOT / "deploy" / "celery" / "celery.yaml"), "-n", f"w{k}", "-q", "gpu,default",
                 "--", "-c", "1"], cwd=home / f"w{k}" / "cwd", env=worker_env, start_new_session=True,
                stdout=open(home / f"w{k}.log", "w"), stderr=subprocess.STDOUT))
        port = _free_port()
        procs.append(subprocess.Popen([str(BIN / "dagster-webserver"), "-h", "127.0.0.1", "-p", str(port),
                                       "-w", "workspace.yaml"], cwd=ROOT, env=head, start_new_session=True,
                                      stdout=open(home / "webserver.log", "w"), stderr=subprocess.STDOUT))
        sensors_stopped(port, procs[-1], home / "webserver.log")
        os.environ.update(DAGSTER_PG_URL=env["DAGSTER_PG_URL"], ARGUS_S3_BUCKET="argus", **AWS)
        instance = dg.DagsterInstance.from_config(head["DAGSTER_HOME"])
        instance.add_dynamic_partitions("candidate_models", models)
        from celery import Celery

        app = Celery(broker=servers.redis_url)
        deadline = time.time() + 300
        while len({h for reply in app.control.ping(timeout=1) for h in reply}) < n_workers:
            if time.time() > deadline:
                raise RuntimeError("workers did not answer")
        app.close()
        procs.append(subprocess.Popen([str(BIN / "dagster-daemon"), "run", "-w", "workspace.yaml"], cwd=ROOT, env=head,
                                      start_new_session=True, stdout=open(home / "daemon.log", "w"),
                                      stderr=subprocess.STDOUT))
        keys = [f"{m}|{t}" for m in models for t in TASKS]
        selection = ([{"assetKey": {"path": [a]}, "partitions": {"range": {"start": TASKS[0], "end": TASKS[-1]}}}
                      for a in TASK_ASSETS]
                     + [{"assetKey": {"path": [a]}, "partitions": {"ranges": [{"start": k, "end": k} for k in keys]}}
                        for a in CANDIDATE_ASSETS] + [{"assetKey": {"path": ["leaderboard"]}}])
        t0 = time.perf_counter()
        result = _graphql(port, LAUNCH_BACKFILL, {"params": {"partitionsByAssets": selection}})["launchPartitionBackfill"]
        if result["__typename"] != "LaunchBackfillSuccess":
            raise RuntimeError(result)
        backfill_id = result["backfillId"]
        finished = {"SUCCESS", "FAILURE", "CANCELED"}
        status, deadline = None, time.time() + 3600
        while time.time() < deadline:
            status = _graphql(port, BACKFILL, {"id": backfill_id})["partitionBackfillOrError"]["status"]
            runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
            if status not in ("REQUESTED", "CANCELING", "FAILING") and runs and all(r.status.value in finished for r in runs):
                break
            time.sleep(0.5)
        wall = time.perf_counter() - t0
        records = instance.get_run_records(filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
        ends = [r.end_time for r in records if r.end_time]
        span = max(ends) - min(r.create_timestamp.timestamp() for r in records) if ends else float("nan")
        ok = sum(r.dagster_run.status.value == "SUCCESS" for r in records)
        steps = 0
        for r in records:
            steps += len(instance.all_logs(r.dagster_run.run_id, of_type=dg.DagsterEventType.STEP_SUCCESS))
        instance.dispose()
        return {"n": n_workers, "status": status, "runs": len(records), "ok": ok, "wall": wall, "span": span,
                "steps": steps}
    finally:
        for p in reversed(procs):
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=60)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from benchmarks.daemon_throughput import bench_arguments, build_bench, drop_or_keep, say_bench, served_since

    ap = bench_arguments(__doc__.splitlines()[0], models=4, latency=0.5, concurrency=2,
                         concurrency_help="ARGUS_VLM_CONCURRENCY: judge slots per worker machine",
                         keep_help="keep the temporary folder (logs)")
    ap.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated")
    args = ap.parse_args()
    import boto3

    from benchmarks.scale import serving

    root = Path(tempfile.mkdtemp(prefix="argus_celery_bench_"))
    results = []
    try:
        with serving(args.latency) as (conn, base_url), Servers(root / "servers") as servers:
            bench, cands = build_bench(root / "media", args.inputs, args.models)
            client = boto3.client("s3", endpoint_url=servers.s3, aws_access_key_id="bench",
                                  aws_secret_access_key="bench", region_name="us-east-1")
            for b in ("argus", "inputs"):
                client.create_bucket(Bucket=b)
            _upload(client, bench, "inputs", "bench")
            _upload(client, cands, "inputs", "cands")
            models = [f"m{k:02d}" for k in range(args.models)]
            say_bench(cands, args, f"{args.concurrency} slots per worker")
            n0 = served_since(conn, 0)["n_total"]
            for n in [int(x) for x in args.workers.split(",")]:
                res = one_setting(root, servers, n, models, base_url, args.concurrency)
                log = served_since(conn, n0)
                n0 = log["n_total"]
                res["requests"] = len(log["kinds"])
                res["max_in_flight"] = log["max_in_flight"]
                results.append(res)
                print(f"workers={n}: backfill {res['status']}, {res['ok']}/{res['runs']} runs succeeded, "
                      f"{res['steps']} steps, {res['wall']:.1f} s", flush=True)
    finally:
        drop_or_keep(root, args.keep)
    print(f"{'workers':>8}{'runs':>6}{'ok':>5}{'steps':>7}{'wall s':>8}{'requests':>10}{'most in flight':>16}"
          f"{'bound s':>9}{'wall/bound':>12}")
    for r in results:
        bound = r["requests"] * args.latency / (args.concurrency * r["n"])
        print(f"{r['n']:>8}{r['runs']:>6}{r['ok']:>5}{r['steps']:>7}{r['wall']:>8.1f}{r['requests']:>10}"
              f"{r['max_in_flight']:>16}{bound:>9.1f}{r['wall'] / bound if bound else float('nan'):>12.2f}")


if __name__ == "__main__":
    main()
