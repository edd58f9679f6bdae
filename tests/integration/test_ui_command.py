"""`argus ui`: the Dagster UI (``dagster dev``: webserver and daemon) and the reports server, both pinned
to the evaluation asked for, whatever was evaluated last; the UI answers only a loopback ``Host`` (its
GraphQL, websocket included, through the proxy in front of it); Ctrl-C, SIGHUP and kill -9 of `argus ui`
end everything it started; a port taken is said at once."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from argus_dagster.client import cli
from argus_dagster.infra.settings import record_bench
from tests.processes import alive, busy_machine, descendants
from tests.waiting import wait_until

from .helpers import GraphQL, free_port, t2v_bench

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]
ROOT = Path(__file__).resolve().parents[2]
LOCATION = ("{ workspaceOrError { ... on Workspace { locationEntries { name locationOrLoadError { __typename "
            "... on RepositoryLocation { repositories { name allTopLevelResourceDetails { name "
            "configuredValues { key value } } } } ... on PythonError { message } } } } } }")


def _answers(url: str):
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.read().decode("utf-8") if resp.status == 200 else None
    except (OSError, urllib.error.URLError):
        return None


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _raw(port: int, request: bytes) -> bytes:
    """The first bytes answered to ``request`` sent as it is."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(request)
        out = b""
        while b"\r\n\r\n" not in out:
            chunk = s.recv(65536)
            if not chunk:
                break
            out += chunk
        return out


def _graphql_request(port: int, host: str) -> bytes:
    body = json.dumps({"query": "{ version }"}).encode()
    return _raw(port, b"POST /graphql HTTP/1.1\r\nHost: " + host.encode() + b"\r\nContent-Type: application/json\r\n"
                + b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


def _served_bench(client: GraphQL) -> dict | None:
    """The code location's ``bench`` resource config once it has loaded; None before."""
    try:
        entries = client(LOCATION)["workspaceOrError"]["locationEntries"]
    except (OSError, urllib.error.URLError):
        return None
    loaded = entries and entries[0]["locationOrLoadError"]
    if not loaded or loaded["__typename"] != "RepositoryLocation":
        return None
    for repo in loaded["repositories"]:
        for res in repo["allTopLevelResourceDetails"]:
            if res["name"] == "bench":
                values = {v["key"]: v["value"] for v in res["configuredValues"]}
                return {k: json.loads(v) if v.startswith('"') else v for k, v in values.items()}
    return None


def test_argus_ui_serves_the_evaluation_asked_for_and_ctrl_c_stops_everything(tmp_path, monkeypatch):
    home = tmp_path / "home"
    for k in [k for k in os.environ if k.startswith(("ARGUS_", "DAGSTER_HOME"))]:
        monkeypatch.delenv(k)
    monkeypatch.setenv("ARGUS_HOME", str(home))
    bench, cands = t2v_bench(tmp_path / "alpha", n_inputs=1)
    assert cli.main(["evaluate", "--bench", str(bench), "--candidates", str(cands), "--name", "alpha"]) == 0
    other, other_cands = t2v_bench(tmp_path / "beta", n_inputs=1)
    record_bench(other, other_cands, name="beta")  # the last evaluated, as far as the home knows
    ui_port, reports_port = free_port(), free_port()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "ARGUS_HOME": str(home),
           "PYTHONPATH": str(ROOT)}
    log = open(tmp_path / "ui.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "argus_dagster.client.cli", "ui", "--bench", "alpha", "--port",
                             str(ui_port), "--reports-port", str(reports_port)], cwd=tmp_path, env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        said = lambda: (tmp_path / "ui.log").read_text()[-4000:]  # noqa: E731
        client = GraphQL(ui_port)
        served = wait_until(lambda: proc.poll() is None and _served_bench(client) or proc.poll() is not None,
                            timeout_s=180, what="the Dagster UI's code location")
        assert proc.poll() is None, said()
        assert served["bench"] == "alpha" and served["bench_dir"] == str(bench.resolve()), served
        assert served["profile"] == "default" and served["rubrics_in"] == "bench", served
        overview = wait_until(lambda: _answers(f"http://127.0.0.1:{reports_port}/alpha/default/reports/index.html"),
                              timeout_s=60, what="the reports server's overview")
        assert 'data-task="T2V"' in overview and "bench <b>alpha (" in overview
        # the UI answers a loopback Host only: a page that rebinds its DNS name to 127.0.0.1 reads nothing
        assert _graphql_request(ui_port, f"127.0.0.1:{ui_port}").startswith(b"HTTP/1.1 200")
        refused = _graphql_request(ui_port, f"rebound.example:{ui_port}")
        assert refused.startswith(b"HTTP/1.1 403") and b'"version"' not in refused, refused[:200]
        upgrade = (b"GET /graphql HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                   b"Sec-WebSocket-Protocol: graphql-ws\r\n\r\n")
        assert _raw(ui_port, upgrade % f"localhost:{ui_port}".encode()).startswith(b"HTTP/1.1 101")  # subscriptions
        assert _raw(ui_port, upgrade % b"rebound.example").startswith(b"HTTP/1.1 403")
        started = descendants(proc.pid)
        assert len(started) >= 3, started  # the reports server, dagster dev and its webserver (and daemon)
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        assert proc.wait(timeout=120) == 0, said()
        left = wait_until(lambda: not [p for p in started if alive(p)] or None, timeout_s=30,
                          what="every process argus ui started to end") if any(map(alive, started)) else True
        assert left, [p for p in started if alive(p)]
        assert not _listening(ui_port) and not _listening(reports_port)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()


def _start_ui(tmp_path, ui_port: int, reports_port: int) -> subprocess.Popen:
    """`argus ui` on a recorded one-video bench (nothing evaluated), its output in ``ui.log``."""
    home = tmp_path / "home"
    bench, cands = t2v_bench(tmp_path / "alpha", n_inputs=1)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "ARGUS_HOME": str(home),
           "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-c", "import sys; from argus_dagster.infra.settings import record_bench; "
                    "record_bench(sys.argv[1], sys.argv[2], name='alpha')", str(bench), str(cands)],
                   env=env, check=True)
    with open(tmp_path / "ui.log", "w") as log:
        return subprocess.Popen([sys.executable, "-m", "argus_dagster.client.cli", "ui", "--bench", "alpha", "--port",
                                 str(ui_port), "--reports-port", str(reports_port)], cwd=tmp_path, env=env,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


@pytest.mark.parametrize("ending", [signal.SIGHUP, signal.SIGKILL], ids=["sighup", "kill-9"])
def test_argus_ui_ended_any_way_ends_everything_it_started(tmp_path, ending):
    """A terminal closed (SIGHUP) or a kill -9 of `argus ui`: the webserver, daemon, code servers and
    reports server end with it, and both ports are free again; after SIGHUP within 5 s, on a machine
    kept busy by two busy loops while they end (started once the UI answers: loading its start as well
    would only double the test's cost)."""
    ui_port, reports_port = free_port(), free_port()
    proc = _start_ui(tmp_path, ui_port, reports_port)
    started: set[int] = set()
    try:
        said = lambda: (tmp_path / "ui.log").read_text()[-4000:]  # noqa: E731
        wait_until(lambda: proc.poll() is not None or (_answers(f"http://127.0.0.1:{ui_port}/server_info")
                                                       and _listening(reports_port)),
                   timeout_s=180, what="the Dagster UI's webserver through argus ui")
        assert proc.poll() is None, said()
        started |= descendants(proc.pid)
        assert len(started) >= 4, started  # the reports server, dagster dev, its webserver and daemon (and a watcher)
        with busy_machine(2):
            t0 = time.monotonic()
            os.kill(proc.pid, ending)
            bound_s = 5.0 if ending == signal.SIGHUP else 90  # kill -9: the watcher, polling every 0.5 s, waits 20 s
            wait_until(lambda: not [p for p in started if alive(p)] or None, timeout_s=bound_s,
                       what=f"every process argus ui started to end, {bound_s:g} s after {signal.Signals(ending).name}")
            print(f"{signal.Signals(ending).name}: all argus ui started ended {time.monotonic() - t0:.2f} s after it")
        proc.wait(timeout=120)
        assert not _listening(ui_port) and not _listening(reports_port)
    finally:
        _kill_all(proc, started)


def _kill_all(proc: subprocess.Popen, started: set[int]) -> None:
    """What a failed test leaves: `argus ui` and every process it started."""
    left = started | descendants(proc.pid)
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for pid in left:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_taken_port_is_said_at_once(tmp_path):
    """The UI's port or the reports server's taken: one line naming it, exit 2, nothing left running
    (never a UI that runs headless, its daemon ticking)."""
    for taken in ("ui", "reports"):
        ui_port, reports_port = free_port(), free_port()
        with socket.create_server(("127.0.0.1", ui_port if taken == "ui" else reports_port)):
            proc = _start_ui(tmp_path / taken, ui_port, reports_port)
            try:
                assert proc.wait(timeout=60) == 2
            finally:
                _kill_all(proc, set())
        lines = (tmp_path / taken / "ui.log").read_text().strip().splitlines()
        port = ui_port if taken == "ui" else reports_port
        assert len(lines) == 1 and f"port {port} on 127.0.0.1 is taken" in lines[0], lines
