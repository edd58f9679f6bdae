"""Storage that fails under the CLI, for real: a home on a read-only bind mount and one on a tmpfs too
small for it (each in a private mount namespace, so nothing outside the test sees the mounts). Every
failure is one line naming the path and what to do; the read-only commands work on a read-only home."""

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.skips import machine_lacks

from .helpers import ROOT, t2v_bench

pytestmark = pytest.mark.integration


def _can_mount(tmp: Path) -> bool:
    if not shutil.which("unshare"):
        return False
    (tmp / "probe").mkdir()
    done = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                           f"mount -t tmpfs -o size=64k tmpfs {shlex.quote(str(tmp / 'probe'))}"], capture_output=True)
    return done.returncode == 0


def _argus_in(mount: str, home: Path, args: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    """``argus args`` with ARGUS_HOME=home, after ``mount`` (a shell command) in a mount namespace of its own."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARGUS_", "DAGSTER_"))}
    env.update(ARGUS_HOME=str(home), PYTHONPATH=str(ROOT))
    cli = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "argus_dagster.client.cli", *args])
    return subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", f"{mount} && exec {cli}"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture()
def mountable(tmp_path):
    if not _can_mount(tmp_path):
        machine_lacks("this machine does not let the test mount (needs unshare and CAP_SYS_ADMIN)")
    return tmp_path


def test_a_read_only_home_is_read_and_never_a_traceback(mountable, monkeypatch):
    from argus_dagster.client.cli import main

    bench, cands = t2v_bench(mountable, n_inputs=2)
    home = mountable / "home"
    monkeypatch.setenv("ARGUS_HOME", str(home))
    assert main(["evaluate", "--bench", str(bench), "--candidates", str(cands)]) == 0
    h = shlex.quote(str(home))
    read_only = f"mount --bind {h} {h} && mount -o remount,ro,bind {h}"

    lb = _argus_in(read_only, home, ["leaderboard"])
    assert lb.returncode == 0, lb.stdout + lb.stderr
    assert lb.stdout.startswith("Leaderboard of bench/default") and " m " in lb.stdout

    ev = _argus_in(read_only, home, ["evaluate", "--bench", str(bench), "--candidates", str(cands)])
    assert ev.returncode == 2 and "Traceback" not in ev.stdout + ev.stderr
    last = ev.stdout.strip().splitlines()[-1]
    assert last.startswith("argus evaluate: cannot write ") and str(home) in last and "read-only" in last
    assert "set ARGUS_HOME to a folder that is" in last

    # argus open serves until it is stopped: 8 s of it, then its output.
    opened = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c",
                             f"{read_only} && ARGUS_HOME={h} PYTHONPATH={shlex.quote(str(ROOT))} timeout 8 "
                             f"{shlex.quote(sys.executable)} -m argus_dagster.client.cli open --port 0"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    out = opened.stdout + opened.stderr
    assert opened.returncode == 124 and "serving bench/default's reports" in out and "Traceback" not in out
    assert "the index of every evaluation is not refreshed" in out


def test_a_home_on_a_full_disk_is_one_line(mountable):
    bench, cands = t2v_bench(mountable, n_inputs=2)
    home = mountable / "small"
    home.mkdir()
    h = shlex.quote(str(home))
    done = _argus_in(f"mount -t tmpfs -o size=300k tmpfs {h}", home,
                     ["evaluate", "--bench", str(bench), "--candidates", str(cands)])
    out = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in out, out[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("argus evaluate: ") and str(home) in last and "free space" in last


def test_a_home_whose_disk_fills_under_sqlite_is_one_line(mountable):
    """256 KB left: SQLite fails to grow the instance's shared-memory file, which it reports as a
    "disk I/O error" (on this kind of machine; a "database or disk is full" elsewhere)."""
    bench, cands = t2v_bench(mountable, n_inputs=2)
    home = mountable / "nearly_full"
    home.mkdir()
    h = shlex.quote(str(home))
    fill = f"mount -t tmpfs -o size=3m tmpfs {h} && head -c {3 * 1024 * 1024 - 256 * 1024} /dev/zero > {h}/filler"
    done = _argus_in(fill, home, ["evaluate", "--bench", str(bench), "--candidates", str(cands)])
    out = done.stdout + done.stderr
    assert done.returncode == 2 and "Traceback" not in out, out[-3000:]
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("argus evaluate: ") and str(home) in last and "free space" in last
    assert "disk I/O error" in last or "no space left" in last
