"""`argus ui`: the Dagster UI (``dagster dev``: webserver and daemon) and the reports server, both pinned
to the evaluation asked for, whatever was evaluated last; Ctrl-C stops both and everything they started."""

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from argus_dagster import cli
from argus_dagster.settings import record_bench
from tests.waiting import wait_until

from .helpers import GraphQL, free_port, t2v_bench

pytestmark = [pytest.mark.integration, pytest.mark.timeout(420)]
ROOT = Path(__file__).resolve().parents[2]
LOCATION = ("{ workspaceOrError { ... on Workspace { locationEntries { name locationOrLoadError { __typename "
            "... on RepositoryLocation { repositories { name allTopLevelResourceDetails { name "
            "configuredValues { key value } } } } ... on PythonError { message } } } } } }")


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid``, from /proc."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = set(), [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _answers(url: str):
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.read().decode("utf-8") if resp.status == 200 else None
    except (OSError, urllib.error.URLError):
        return None


def _listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


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
    proc = subprocess.Popen([sys.executable, "-m", "argus_dagster.cli", "ui", "--bench", "alpha", "--port",
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
        started = _descendants(proc.pid)
        assert len(started) >= 3, started  # the reports server, dagster dev and its webserver (and daemon)
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        assert proc.wait(timeout=120) == 0, said()
        left = wait_until(lambda: not [p for p in started if _alive(p)] or None, timeout_s=30,
                          what="every process argus ui started to end") if any(map(_alive, started)) else True
        assert left, [p for p in started if _alive(p)]
        assert not _listening(ui_port) and not _listening(reports_port)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
