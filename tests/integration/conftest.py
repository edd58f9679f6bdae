"""Real servers the integration tests share: Postgres from Debian's package (one server per session on
a temporary data directory and a loopback port, a fresh database per test) and moto's S3 server on
loopback (one per test)."""

import glob
import itertools
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from .helpers import free_port


def _bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def _as_postgres(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    """initdb and postgres refuse to run as root: as root, run them as the package's user."""
    if os.geteuid() == 0:
        cmd = ["runuser", "-u", "postgres", "--", *cmd]
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


@pytest.fixture(scope="session")
def postgres_server():
    """``(host, port)`` of a Postgres server started for this session; skipped with a message where the
    binaries are absent, never under CI (``make test`` installs them)."""
    if not (_bin("initdb") and _bin("pg_ctl")):
        if os.environ.get("CI") == "true":
            pytest.fail("Postgres is missing under CI (.ci/run installs Debian's postgresql)")
        pytest.skip("Postgres server binaries not found (apt-get install postgresql)")
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
