"""Real servers the integration tests share: Postgres from Debian's package (one server per session on
a temporary data directory and a loopback port, a fresh database per test) and moto's S3 server on
loopback (one per test); and what several files read alike, built once per test run: the aws tests'
local run (``local_t2v_run``) and the whole demo evaluated (``evaluated_demo``)."""

import glob
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.skips import unavailable

from ..conftest import shared_across_workers
from .helpers import DEMO_HUMAN_T2V, DEMO_ODD_MODEL, ROOT, free_port


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def _as_postgres(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    """initdb and postgres refuse to run as root: as root, run them as the package's user."""
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


@pytest.fixture()
def server():
    """The loopback OpenAI-compatible server (``FakeVlmServer``), one per test: what the VLM clients, the
    judge and the rubric writer talk to (a file with a ``server`` of its own uses that one)."""
    from tests.servers.openai_server import FakeVlmServer

    with FakeVlmServer() as srv:
        yield srv


@pytest.fixture(scope="session")
def postgres_server():
    """``(host, port)`` of a Postgres server started for this session; skipped with a message where the
    binaries are absent, never under CI (``make test`` installs them)."""
    if not (_bin("initdb") and _bin("pg_ctl")):
        unavailable("Postgres server binaries not found (make postgres, or apt-get install postgresql)")
    root = Path(tempfile.mkdtemp(prefix="argus_pg_"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sock, "postgres")
    port = free_port()
    _as_postgres([_bin("initdb"), "-D", str(data), "-U", "argus", "--auth=trust", "-E", "UTF8"])
    _as_postgres([_bin("pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w", "start",
                  "-o", f"-p {port} -k {sock} -c listen_addresses=127.0.0.1"])
    try:
        yield "127.0.0.1", port
    finally:
        _as_postgres([_bin("pg_ctl"), "-D", str(data), "-m", "fast", "stop"])
        shutil.rmtree(root, ignore_errors=True)


_databases = itertools.count()


@pytest.fixture
def postgres_url(postgres_server):
    """A new, empty database on the session's server, as a dagster-postgres URL."""
    host, port = postgres_server
    name = f"dagster_{next(_databases)}"
    subprocess.run(["psql", "-h", host, "-p", str(port), "-U", "argus", "-d", "postgres", "-c",
                    f"CREATE DATABASE {name}"], check=True, capture_output=True)
    return f"postgresql+psycopg2://argus@{host}:{port}/{name}"


@pytest.fixture
def moto_endpoint(monkeypatch):
    """moto's S3 server on a loopback port (not mock_aws in process: every process of a test reaches
    it over HTTP), with test credentials in the environment."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    url = f"http://127.0.0.1:{port}"
    for k, v in {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(k, v)
    try:
        yield url
    finally:
        server.stop()


@pytest.fixture
def s3_endpoint(moto_endpoint, monkeypatch):
    """moto's S3 server on loopback, with the environment a user sets for an S3-compatible endpoint
    (``ARGUS_S3_ENDPOINT_URL``)."""
    monkeypatch.setenv("ARGUS_S3_ENDPOINT_URL", moto_endpoint)
    return moto_endpoint


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (tests/integration/chromium.py), one per test file."""
    from .chromium import launched

    with launched() as b:
        yield b


@pytest.fixture(scope="session")
def local_t2v_run(tmp_path_factory):
    """The two-prompt T2V bench the aws tests put in a bucket (``src/bench``, ``src/cands``: model ``m``'s
    videos) and its local run as `argus evaluate` makes it (``run_all`` on the embedded default, on a
    copy of the bench: a run freezes its new rubrics into the bench folder), made once per test run:
    ``{"bench", "cands", "storage"}``, the last the local evaluation's storage folder."""
    from argus_dagster.client.evaluate import run_all
    from argus_dagster.infra.settings import evaluation_settings

    from .helpers import t2v_bench

    def build(folder: Path) -> None:
        bench, cands = t2v_bench(folder / "src", n_inputs=2, n_frames=16)
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("ARGUS_HOME", str(folder / "local"))
            settings = evaluation_settings(shutil.copytree(bench, folder / "local_bench"), cands)
            run_all(progress=lambda m: None, settings=settings)
        (folder / "storage").symlink_to(settings.storage_dir, target_is_directory=True)

    folder = shared_across_workers(tmp_path_factory, "local_t2v_run", build)
    return {"bench": folder / "src" / "bench", "cands": folder / "src" / "cands", "storage": folder / "storage"}


# The demo's evaluation as `argus demo` makes it, in a process of its own: the leaderboard run_all
# returned and every progress line it printed are kept beside the home.
_EVALUATE_DEMO = """
import json, sys
from argus_dagster.client.evaluate import run_all
from argus_dagster.infra.settings import record_bench
bench, cands, board, progress = sys.argv[1:]
record_bench(bench, cands, name="demo")
lines = []
run_all(progress=lines.append).write_parquet(board)
with open(progress, "w") as f:
    json.dump(lines, f)
"""


def _port_outside_the_ephemeral_range() -> int:
    """A free loopback port below Linux's ephemeral range (32768-60999): no client socket of the run
    takes it between the evaluation that names it and the server that later listens on it."""
    import random
    import socket

    for port in random.sample(range(20000, 32000), 200):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free loopback port in 20000-32000")


@pytest.fixture(scope="session")
def evaluated_demo(tmp_path_factory, demo_bench_in):
    """The whole demo bench evaluated once per test run (the first worker to ask evaluates it, the
    others wait and read the same folder): every task and model of the demo, an extra T2V model with
    an odd name (``DEMO_ODD_MODEL``, the best model's videos), people's ratings of the four
    demo T2V models (``DEMO_HUMAN_T2V``) in the bench's ``human/T2V.csv``, and the reports' links
    pointing at ``served`` (``ARGUS_REPORTS_URL``, a loopback port no server holds yet: the test file
    that serves the reports, ``test_browser``, listens there). ``{"home", "bench", "cands", "evaluation", "served", "port",
    "returned", "progress"}``: ``returned`` is the leaderboard ``run_all`` returned (a parquet file),
    ``progress`` its progress lines. Read it in place; a test that writes (a run, a server that
    encodes pages' videos) works on a copy of ``home``."""
    from argus_dagster.client.demo import BEST_MODEL

    def build(folder: Path) -> None:
        home = folder / "argus"
        bench, cands = demo_bench_in(home)
        # A model whose name is not a plain file name: its pages are "~%..." files, and links must say so.
        shutil.copytree(cands / "T2V" / BEST_MODEL, cands / "T2V" / DEMO_ODD_MODEL)
        ids = [json.loads(line)["id"] for line in (bench / "T2V" / "manifest.jsonl").read_text().splitlines()]
        human = home / "benches" / "demo" / "human"  # the demo bench's ratings
        human.mkdir(parents=True)
        (human / "T2V.csv").write_text("input_id,model,score\n" + "".join(
            f"{i},{m},{s}\n" for i in ids for m, s in DEMO_HUMAN_T2V.items()))
        port = _port_outside_the_ephemeral_range()
        (folder / "port").write_text(str(port))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(folder), "ARGUS_HOME": str(home),
               "ARGUS_REPORTS_URL": f"http://127.0.0.1:{port}/", "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, "-c", _EVALUATE_DEMO, str(bench), str(cands),
                               str(folder / "returned.parquet"), str(folder / "progress.json")],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
        assert done.returncode == 0, done.stderr[-3000:]

    folder = shared_across_workers(tmp_path_factory, "evaluated_demo", build)
    port = int((folder / "port").read_text())
    home = folder / "argus"
    return {"home": home, "bench": home / "bench", "cands": home / "candidates",
            "evaluation": home / "benches" / "demo" / "default", "served": f"http://127.0.0.1:{port}/",
            "port": port, "returned": folder / "returned.parquet",
            "progress": json.loads((folder / "progress.json").read_text())}
