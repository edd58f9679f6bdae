"""The celery environment with steps on machines that share nothing but Postgres and S3: Redis, moto's
S3 server, Postgres and the loopback judge on loopback, three Celery workers (``dagster-celery worker
start`` with the shipped ``deploy/celery/celery.yaml``), each in a folder of its own with its own HOME,
ARGUS_HOME and DAGSTER_HOME. One worker serves the ``gpu`` queue (the evidence step), one ``gpu`` and
``default``, one ``default``. A backfill launched through the webserver's GraphQL (what the UI sends)
and run by a real daemon completes with the scores of a local run of the same bench; with one worker
killed (kill -9, its whole process group, as a machine lost) while it holds the judging step, the step
runs again on another worker, the tables equal the local run's without a duplicate row, and the judge
is asked again only for the requests in flight at the kill (answers stored before come from the
content cache on S3). Nothing a step wrote names a worker's own folders."""

import io
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import dagster as dg
import polars as pl
import pytest
import yaml

from argus_dagster.outputs.overview import stored_table
from tests.skips import unavailable

from ..servers.openai_server import FakeVlmServer, kind_of
from ..waiting import wait_until
from .helpers import backfill_as_the_ui_does, free_port, pattern_clip, stop
from .test_ui_backfill import CANDIDATE_ASSETS, TASK_ASSETS

# Two backfills, each planned by the daemon (about every 30 s), the second waits out a lost worker's
# visibility timeout: past the 5-minute bound on a busy machine.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]
BUCKET, INPUTS, PREFIX = "argus", "argus-inputs", "eval"
TASKS = ["T2V", "TI2V"]
MODELS = {"first": ["m1", "m2"], "killed": ["m3", "m4"]}
# The workers: name -> queues (the GPU machine, a machine of both, a CPU machine).
WORKERS = {"w1": ["gpu"], "w2": ["gpu", "default"], "w3": ["default"]}
# A lost machine's step is given back after this many seconds (deploy/celery/celery.yaml: an hour).
# Longer than any step here, the judging step held at the loopback judge until the kill included.
VISIBILITY_S = 45
COMPARED = ["task", "model", "input_id", "sample", "base_score", "final_score", "n_scored", "n_criteria", "error"]
KEYS = {"video_scores": ["task", "model", "input_id", "sample"],
        "criterion_scores": ["task", "model", "input_id", "sample", "criterion_id"],
        "criterion_evidence": ["task", "model", "input_id", "sample", "criterion_id"]}


def write_bench(root: Path) -> tuple[Path, Path]:
    """Two prompts each of T2V and TI2V (a first frame from the clip), four models' videos."""
    from PIL import Image

    from argus_dagster.infra.media import write_video

    bench, cands = root / "bench", root / "cands"
    for task in TASKS:
        (bench / task).mkdir(parents=True)
        rows = []
        for i in range(2):
            row = {"id": f"p{i}", "prompt": f"A textured pattern slides to the left, take {i}."}
            if task == "TI2V":
                Image.fromarray(pattern_clip(10 + i, 1)[0]).save(bench / task / f"p{i}.png")
                row["first_frame"] = f"p{i}.png"
            rows.append(row)
        (bench / task / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        # A clip of its own per task, model and input: two partitions judged at once on two workers never
        # ask the judge the same question (one process would have found the other's answer in the cache).
        for j, model in enumerate(MODELS["first"] + MODELS["killed"]):
            for i in range(2):
                write_video(cands / task / model / f"p{i}.mp4", pattern_clip(100 * TASKS.index(task) + 10 * j + i, 16), 12)
    return bench, cands


def write_ratings(folder: Path) -> None:
    """People's ratings of the first backfill's videos (models m1 and m2), one ``<TASK>.csv`` per task."""
    folder.mkdir(parents=True, exist_ok=True)
    for t, task in enumerate(TASKS):
        rows = [f"p{i},{m},{1 + (3 * i + 2 * j + t) % 5}" for j, m in enumerate(MODELS["first"]) for i in range(2)]
        (folder / f"{task}.csv").write_text("input_id,model,score\n" + "\n".join(rows) + "\n")


def _upload(client, folder: Path, bucket: str, prefix: str) -> None:
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            client.put_object(Bucket=bucket, Key=f"{prefix}/{p.relative_to(folder).as_posix()}", Body=p.read_bytes())


def request_key(body: dict) -> str:
    """A request as the judge sees it: the whole body (criterion text, evidence and frames)."""
    import hashlib

    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _table(storage_dir, name: str, store=None) -> pl.DataFrame:
    return stored_table(storage_dir, name, store)


@pytest.fixture(scope="module")
def redis_url(tmp_path_factory):
    """Debian's redis-server on a loopback port, for this module, asking for a password as the celery
    environment's broker must (``resources.broker_problem``)."""
    binary = shutil.which("redis-server")
    if not binary:
        unavailable("redis-server not found (make redis, or apt-get install redis-server)")
    folder = tmp_path_factory.mktemp("redis")
    port = free_port()
    password = secrets.token_urlsafe(24)
    (folder / "redis.conf").write_text(f"requirepass {password}\n")  # not on the command line, where ps shows it
    proc = subprocess.Popen([binary, str(folder / "redis.conf"), "--port", str(port), "--bind", "127.0.0.1", "--save",
                             "", "--appendonly", "no", "--dir", str(folder)], stdout=open(folder / "log", "w"),
                            stderr=subprocess.STDOUT)
    import redis

    client = redis.Redis(host="127.0.0.1", port=port, password=password)
    try:
        wait_until(lambda: _pings(client), timeout_s=30, what="redis-server answering", poll_s=0.1)
        yield f"redis://:{password}@127.0.0.1:{port}/0"
    finally:
        stop(proc)


def _pings(client) -> bool:
    try:
        return bool(client.ping())
    except Exception:
        return False


class Cluster:
    """The servers, the evaluation's bucket, its instance and the workers."""

    def __init__(self, root: Path, env: dict, judge: FakeVlmServer, local: Path, head_home: Path):
        self.root, self.env, self.judge, self.local, self.head_home = root, env, judge, local, head_home
        self.workers: dict[str, subprocess.Popen] = {}
        self.folders: dict[str, Path] = {}

    @property
    def evaluation(self) -> str:
        return f"s3://{BUCKET}/{PREFIX}/benches/b/default"

    def start_worker(self, name: str, queues: list[str]) -> None:
        folder = self.root / "workers" / name
        for sub in ("cwd", "home", "argus_home", "dagster_home"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        shutil.copy(self.root / "dagster.yaml", folder / "dagster_home" / "dagster.yaml")
        env = {**self.env, "HOME": str(folder / "home"), "ARGUS_HOME": str(folder / "argus_home"),
               "DAGSTER_HOME": str(folder / "dagster_home")}
        cmd = [str(Path(sys.executable).parent / "dagster-celery"), "worker", "start", "-A", "dagster_celery.app",
               "-y", str(self.root / "celery.yaml"), "-n", name, "--loglevel", "INFO",
               "-q", ",".join(queues), "--", "-c", "1"]  # one -q, comma-separated: celery keeps the last -Q
        # A session of its own: the worker and its pool processes are one process group, a machine to kill.
        self.workers[name] = subprocess.Popen(cmd, cwd=folder / "cwd", env=env, start_new_session=True,
                                              stdout=open(folder / "worker.log", "w"), stderr=subprocess.STDOUT)
        self.folders[name] = folder

    def wait_workers(self) -> None:
        """Until every worker answers a ping over the broker (each has imported the project)."""
        from celery import Celery

        app = Celery(broker=self.env["ARGUS_CELERY_BROKER"])

        def answering() -> bool:
            for name, proc in self.workers.items():
                assert proc.poll() is None, (self.folders[name] / "worker.log").read_text()[-3000:]
            names = {host.split("@")[0] for reply in app.control.ping(timeout=1) for host in reply}
            return set(WORKERS) <= names

        try:
            wait_until(answering, timeout_s=180, what="three Celery workers answering", poll_s=1)
        finally:
            app.close()

    def instance(self) -> dg.DagsterInstance:
        return dg.DagsterInstance.from_config(str(self.head_home))

    def backfill(self, models: list[str], also: tuple[str, ...] = ()) -> str:
        keys = [str(dg.MultiPartitionKey({"task": t, "model": m})) for m in models for t in TASKS]
        selection = ([{"assetKey": {"path": [a]}, "partitions": {"range": {"start": TASKS[0], "end": TASKS[-1]}}}
                      for a in TASK_ASSETS]
                     + [{"assetKey": {"path": [a]}, "partitions": {"ranges": [{"start": k, "end": k} for k in keys]}}
                        for a in CANDIDATE_ASSETS]
                     + [{"assetKey": {"path": [a]}} for a in ("leaderboard", *also)])
        env = {**self.env, "HOME": str(self.root / "head"), "ARGUS_HOME": str(self.root / "head" / "argus_home"),
               "DAGSTER_HOME": str(self.head_home)}
        return backfill_as_the_ui_does(self.root / "head", env, selection, timeout=500)

    def storage(self):
        from argus_dagster.resources.storage import StorageResource

        return StorageResource(endpoint_url=self.env["ARGUS_S3_ENDPOINT_URL"],
                               media_cache_dir=str(self.root / "reader")).storage()

    def stop(self) -> None:
        for proc in self.workers.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.workers.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, redis_url, postgres_server):
    from moto.server import ThreadedMotoServer

    root = tmp_path_factory.mktemp("celery")
    bench, cands = write_bench(root / "src")
    aws = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}
    with pytest.MonkeyPatch.context() as mp, FakeVlmServer() as reference_judge, FakeVlmServer() as judge:
        # The local run of the same bench, with the same (deterministic) judge: the reference.
        from argus_dagster.client.evaluate import run_all
        from argus_dagster.infra.settings import evaluation_settings

        for k, v in {"ARGUS_HOME": str(root / "local"), "ARGUS_VLM_BASE_URL": reference_judge.base_url,
                     "ARGUS_VLM_MODEL": "fake", **aws}.items():
            mp.setenv(k, v)
        mp.delenv("ARGUS_ENV", raising=False)
        settings = evaluation_settings(shutil.copytree(bench, root / "local_bench"), cands)
        write_ratings(settings.human_dir)  # the bench's ratings, where a local evaluation keeps them
        run_all(progress=lambda m: None, settings=settings)

        port = free_port()
        moto = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        moto.start()
        endpoint = f"http://127.0.0.1:{port}"
        host, pg_port = postgres_server
        subprocess.run(["psql", "-h", host, "-p", str(pg_port), "-U", "argus", "-d", "postgres", "-c",
                        "CREATE DATABASE dagster_celery"], check=True, capture_output=True)
        # What every machine of the deployment is given: the evaluation's variables, the database, the
        # broker, the bucket, the judge. Nothing else: no folder is named here.
        # (PATH: the venv's bin first, where `dagster-celery worker start` finds `celery`.)
        env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
               "PYTHONPATH": str(ROOT), **aws,
               "ARGUS_ENV": "celery", "ARGUS_S3_ENDPOINT_URL": endpoint,
               "ARGUS_BENCH_DIR": f"s3://{INPUTS}/bench", "ARGUS_CANDIDATES_DIR": f"s3://{INPUTS}/cands",
               "ARGUS_BENCH": "b", "ARGUS_S3_BUCKET": BUCKET, "ARGUS_S3_PREFIX": PREFIX,
               "ARGUS_VLM_BASE_URL": judge.base_url, "ARGUS_VLM_MODEL": "fake",
               "ARGUS_CELERY_BROKER": redis_url, "ARGUS_SENSOR_INTERVAL_S": "3", "ARGUS_AUTOMATION_INTERVAL_S": "3",
               "DAGSTER_PG_URL": f"postgresql+psycopg2://argus@{host}:{pg_port}/dagster_celery"}
        import boto3

        client = boto3.client("s3", endpoint_url=endpoint, **{"aws_access_key_id": "test",
                                                              "aws_secret_access_key": "test",
                                                              "region_name": "us-east-1"})
        for b in (BUCKET, INPUTS):
            client.create_bucket(Bucket=b)
        _upload(client, bench, INPUTS, "bench")
        _upload(client, cands, INPUTS, "cands")
        # The same ratings where every machine of the deployment finds them: the bench's prefix.
        write_ratings(root / "src" / "human")
        _upload(client, root / "src" / "human", BUCKET, f"{PREFIX}/benches/b/human")

        # The shipped files, as a deployment copies them: the instance (plus the endpoint line an
        # S3-compatible store other than AWS adds) and the workers' Celery config (a lost machine's
        # task back after VISIBILITY_S, looked for every second, instead of an hour).
        instance_yaml = yaml.safe_load((ROOT / "deploy" / "celery" / "dagster.yaml").read_text())
        instance_yaml["compute_logs"]["config"]["endpoint_url"] = endpoint
        (root / "dagster.yaml").write_text(yaml.safe_dump(instance_yaml))
        celery_yaml = yaml.safe_load((ROOT / "deploy" / "celery" / "celery.yaml").read_text())
        celery_yaml["execution"]["config"]["config_source"]["broker_transport_options"].update(
            visibility_timeout=VISIBILITY_S, unacked_restore_interval=1, unacked_restore_throttle=1)
        (root / "celery.yaml").write_text(yaml.safe_dump(celery_yaml))
        head_home = root / "head" / "dagster_home"
        head_home.mkdir(parents=True)
        shutil.copy(root / "dagster.yaml", head_home / "dagster.yaml")

        for k in ("DAGSTER_PG_URL", "ARGUS_S3_BUCKET"):  # what this process's look at the instance reads
            mp.setenv(k, env[k])
        c = Cluster(root, env, judge, settings.storage_dir, head_home)
        try:
            for name, queues in WORKERS.items():
                c.start_worker(name, queues)
            with c.instance() as instance:
                instance.add_dynamic_partitions("candidate_models", MODELS["first"] + MODELS["killed"])
            c.wait_workers()
            yield c
        finally:
            c.stop()
            moto.stop()


def _step_workers(c: Cluster, instance: dg.DagsterInstance, run_ids) -> dict[str, set[str]]:
    """Which workers ran each step (by the process group of the step's process)."""
    groups = {proc.pid: name for name, proc in c.workers.items()}
    out: dict[str, set[str]] = {}
    for run_id in run_ids:
        for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_SUCCESS):
            host = _worker_of_step(instance, run_id, e.step_key)
            out.setdefault(e.step_key, set()).add(host or groups.get(e.dagster_event.pid, "?"))
    return out


def _worker_of_step(instance, run_id: str, step_key: str) -> str | None:
    """The worker named by the last 'Executing steps ... in celery worker' engine event of the step."""
    name = None
    for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        if e.step_key == step_key and e.dagster_event.engine_event_data:
            worker = (e.dagster_event.engine_event_data.metadata or {}).get("Celery worker")
            if worker is not None:
                name = str(worker.value).split("@")[0]
    return name


def _story(instance, run_ids) -> str:
    """What each run's steps did, where and when (for a failure's message)."""
    lines = []
    for run_id in run_ids:
        for e in instance.all_logs(run_id):
            ev = e.dagster_event
            if ev is None or not e.step_key:
                continue
            meta = (ev.engine_event_data.metadata or {}) if ev.event_type == dg.DagsterEventType.ENGINE_EVENT \
                and ev.engine_event_data else {}
            worker = meta.get("Celery worker")
            lines.append(f"{e.timestamp:.1f} {run_id[:8]} {e.step_key} {ev.event_type.value} pid={ev.pid}"
                         f"{' ' + str(worker.value) if worker is not None else ''}")
    return "\n".join(sorted(lines))


def _check_tables(c: Cluster, models: list[str]) -> None:
    """The distributed run's tables equal the local run's for ``models``, with no duplicate row."""
    store = c.storage()
    for name, keys in KEYS.items():
        got = _table(f"{c.evaluation}/storage", name, store).filter(pl.col("model").is_in(models))
        assert got.height and got.select(keys).is_duplicated().sum() == 0, (name, got)
        want = _table(c.local, name).filter(pl.col("model").is_in(models))
        assert got.height == want.height, (name, got.height, want.height)
    got = _table(f"{c.evaluation}/storage", "video_scores", store).filter(pl.col("model").is_in(models))
    want = _table(c.local, "video_scores").filter(pl.col("model").is_in(models))
    got, want = (t.select(COMPARED).sort("task", "model", "input_id", "sample") for t in (got, want))
    assert want.height == 2 * len(models) * len(TASKS) and want["final_score"].null_count() == 0, want
    assert got.equals(want), (got, want)


def _no_worker_paths(c: Cluster) -> None:
    """No table cell, page or stored object names a folder of a worker (or the head's)."""
    store = c.storage()
    folders = [str(f) for f in c.folders.values()] + [str(c.root / "head")]
    seen = 0
    for obj in store.list(f"s3://{BUCKET}/{PREFIX}"):
        data = store.read_bytes(obj.uri)
        texts = []
        if obj.uri.endswith(".parquet"):
            texts = [pl.read_parquet(io.BytesIO(data)).write_ndjson()]  # every cell, nested ones too
        elif obj.uri.endswith((".html", ".json", ".jsonl", ".csv", ".txt", ".svg")):
            texts = [data.decode("utf-8", "replace")]
        seen += 1
        for folder in folders:
            assert not any(folder in t for t in texts), (obj.uri, folder)
    assert seen > 20, seen


def test_a_backfill_on_three_workers_gives_the_local_scores(cluster):
    c = cluster
    backfill = c.backfill(MODELS["first"], also=("human_alignment",))
    with c.instance() as instance:
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill}))
        assert runs and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs), runs
        ran = _step_workers(c, instance, [r.run_id for r in runs])
    # The evidence step on the gpu queue's workers, every other step on the default queue's.
    assert ran["criterion_evidence"] <= {"w1", "w2"}, ran
    assert all(ran[s] <= {"w2", "w3"} for s in ran if s != "criterion_evidence"), ran
    _check_tables(c, MODELS["first"])
    # Rubrics and cache entries are on S3, and so are the pages; no worker kept any of it.
    keys = {o.rel for o in c.storage().list(f"s3://{BUCKET}/{PREFIX}")}
    assert any(k.startswith("benches/b/rubrics/") and k.endswith("/TI2V/p1.json") for k in keys), sorted(keys)[:20]
    assert any(k.startswith("cache/judgments/") for k in keys) and any(k.startswith("cache/evidence/") for k in keys)
    # (the overview is the site asset's, which this backfill does not ask for: test_aws_storage writes it on S3)
    assert "benches/b/default/reports/T2V/m1/p0.html" in keys
    # Agreement with people, from the ratings on S3 (no worker has them in its folders): the local run's.
    got = _table(f"{c.evaluation}/storage", "human_alignment", c.storage())
    want = _table(c.local, "human_alignment")
    assert want is not None and set(want["task"]) == set(TASKS), want
    assert got is not None, "human_alignment stored nothing"
    order = ["task", "dimension", "evaluator"]
    got, want = (t.sort(order) for t in (got, want))
    assert got.select(order).equals(want.select(order)), (got, want)
    for col in ("n_videos", "srcc", "krcc", "pairwise_acc", "srcc_lo", "srcc_hi"):
        assert got[col].to_list() == pytest.approx(want[col].to_list(), nan_ok=True), col
    assert any(k.startswith("benches/b/default/reports/alignment/T2V/") for k in keys)
    for name in WORKERS:
        assert not (c.folders[name] / "argus_home" / "benches").exists()
    _no_worker_paths(c)


def test_a_worker_killed_in_the_judging_step_costs_only_that_step(cluster):
    c = cluster
    judge = c.judge
    passed, held = [], []  # the first judge requests are answered; later ones wait for the gate
    gate, holding = threading.Event(), [True]

    def hold_judging(body: dict):
        if kind_of(body) != "judge" or not holding[0]:
            return None
        if len(passed) < 3:
            passed.append(request_key(body))
            return None
        held.append(request_key(body))
        gate.wait(timeout=300)
        return None

    before, cached = len(judge.requests), _judgments(c.storage())
    judge.fault = hold_judging
    result: dict = {}
    thread = threading.Thread(target=lambda: result.update(id=_run(c)), daemon=True)
    thread.start()
    try:
        # The judging step holds requests: the three answered are in the content cache on S3.
        judge.wait_for(lambda s: len(held) >= 1, timeout_s=400, what="a held judge request")
        store = c.storage()
        wait_until(lambda: _judgments(store) >= cached + 3, timeout_s=60, poll_s=0.1,
                   what=f"the three answers in the cache ({cached} before, {len(passed)} answered, {len(held)} held, "
                        f"{sum(kind_of(r['body']) == 'judge' for r in judge.requests[before:])} judge requests, "
                        f"now {_judgments(store)})")
        with c.instance() as instance:  # a judging step under way (a run per task may judge at once)
            judging = []
            for r in instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED])):
                events = {e.dagster_event.event_type: e.dagster_event.pid for e in instance.all_logs(r.run_id)
                          if e.step_key == "criterion_scores" and e.dagster_event is not None}
                if dg.DagsterEventType.STEP_START in events and dg.DagsterEventType.STEP_SUCCESS not in events:
                    judging.append(events[dg.DagsterEventType.STEP_START])
        assert judging, "no judging step under way"
        pgid = os.getpgid(judging[0])
        [victim] = [name for name, proc in c.workers.items() if proc.pid == pgid]
        assert victim in ("w2", "w3"), victim  # the default queue's workers
        import time

        killed_at = time.time()
        os.killpg(pgid, signal.SIGKILL)  # the machine is lost: the worker and its pool processes
        c.workers[victim].wait(timeout=30)
        in_flight = set(held)  # every request held now was the lost worker's, unanswered
        holding[0] = False
        gate.set()
        thread.join(timeout=560)
        assert not thread.is_alive() and result.get("id"), "the backfill did not complete"
    finally:
        holding[0] = False
        gate.set()
        judge.fault = None
    with c.instance() as instance:
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": result["id"]}))
        assert runs and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs), runs
        ran = _step_workers(c, instance, [r.run_id for r in runs])
        story = _story(instance, [r.run_id for r in runs])
    assert victim not in ran["criterion_scores"] and ran["criterion_scores"] <= {"w2", "w3"}, (victim, ran)
    _check_tables(c, MODELS["killed"])
    # Asked twice: only what was in flight at the kill. The answers stored before were not asked again.
    asked: dict[str, int] = {}
    for r in judge.requests[before:]:
        if kind_of(r["body"]) == "judge":
            asked[request_key(r["body"])] = asked.get(request_key(r["body"]), 0) + 1
    again = {k for k, n in asked.items() if n > 1}
    times = [(round(r["t"] - (killed_at - time.time() + time.monotonic()), 1), request_key(r["body"])[:8])
             for r in judge.requests[before:] if kind_of(r["body"]) == "judge"]
    if not again <= in_flight:
        (c.root / "story.txt").write_text(json.dumps({"again": sorted(k[:8] for k in again), "times": times,
                                                      "in_flight": sorted(k[:8] for k in in_flight),
                                                      "passed": [k[:8] for k in passed], "victim": victim}, indent=1)
                                          + "\n" + story)
    assert again <= in_flight, (len(again), len(in_flight), f"see {c.root / 'story.txt'}")
    assert all(asked[k] == 1 for k in passed), "an answer in the cache was asked again"
    _no_worker_paths(c)


def _judgments(store) -> int:
    return sum(1 for o in store.list(f"s3://{BUCKET}/{PREFIX}/cache/judgments") if o.uri.endswith(".json"))


def _run(c: Cluster) -> str:
    return c.backfill(MODELS["killed"])


def test_the_workers_celery_config_is_the_one_runs_send(monkeypatch):
    """deploy/celery/celery.yaml (what `dagster-celery worker start -y` gives each worker) says what the
    runs' executor sends, and the code location under ARGUS_ENV=celery has that executor, with the
    evidence step on the gpu queue and no other step tagged for one."""
    from argus_dagster.resources import CELERY_QUEUES, celery_executor_config

    shipped = yaml.safe_load((ROOT / "deploy" / "celery" / "celery.yaml").read_text())["execution"]["config"]
    assert shipped == celery_executor_config()
    assert shipped["config_source"]["task_acks_late"] and shipped["config_source"]["task_reject_on_worker_lost"]
    assert shipped["config_source"]["task_default_queue"] == "default" and set(CELERY_QUEUES) == {"default", "gpu"}

    monkeypatch.setenv("ARGUS_ENV", "celery")
    from argus_dagster.definitions import build_definitions
    from argus_dagster.infra.settings import load_settings

    defs = build_definitions(load_settings())
    job = defs.resolve_implicit_global_asset_job_def()
    assert job.executor_def.name == "celery"
    queues = {node.name: node.tags.get("dagster-celery/queue") for node in job.graph.node_defs}
    assert queues["criterion_evidence"] == "gpu", queues
    assert {n for n, q in queues.items() if q} == {"criterion_evidence"}, queues


def test_the_broker_asks_for_its_password_and_runs_refuse_an_open_one(redis_url, monkeypatch):
    """The tests' Redis asks for a password as a deployment's must: a client without it is refused. A
    run's executor refuses a broker URL with no password, or redis:// (no TLS) off loopback, before
    any task is sent; the tests' URL passes."""
    import redis

    from argus_dagster.resources import _celery_executor, broker_problem

    open_url = redis_url.replace(redis_url[len("redis://"):redis_url.index("@") + 1], "")
    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis.from_url(open_url).ping()
    assert redis.Redis.from_url(redis_url).ping()
    assert broker_problem(redis_url) is None
    assert "names no password" in broker_problem(open_url)
    assert "sends the password and every task in clear" in broker_problem("redis://:pw@redis.internal:6379/0")
    assert broker_problem("rediss://:pw@redis.internal:6380/0?ssl_cert_reqs=required") is None
    executor = _celery_executor()
    for url, said in ((open_url, "names no password"), ("", "is not set")):
        monkeypatch.setenv("ARGUS_CELERY_BROKER", url)
        with pytest.raises(dg.DagsterInvalidConfigError, match=said):
            executor.config_schema.resolve_config({})
    monkeypatch.setenv("ARGUS_CELERY_BROKER", redis_url)
    resolved = executor.config_schema.resolve_config({}).value["config"]
    assert resolved["broker"] == resolved["backend"] == redis_url
