"""`argus ui`'s children stopped on SIGHUP, SIGTERM and SIGINT within seconds on a busy machine, all they
started included: real process trees (no Dagster), one child that ignores every stop signal and one
that ends on it but leaves a grandchild that ignores them, so only the kill of their groups ends them.
The real `argus ui` under load: tests/integration/test_ui_command.py."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.processes import alive, busy_machine, descendants
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]

# `argus ui`'s supervision of ``commands`` (argv[1], JSON), behind the real proxy it serves in front.
DRIVER = """
import json, os, sys
from argus_dagster.client.supervise import supervise
from argus_dagster.client.ui import HostProxy, free_loopback_port
from argus_dagster.outputs.serve import LOOPBACK_HOSTS
front = HostProxy("127.0.0.1", 0, free_loopback_port(), LOOPBACK_HOSTS)
said = lambda name, status: print("stopped", name, status)
sys.exit(supervise(json.loads(sys.argv[1]), dict(os.environ), front, said))
"""

# A child: "stubborn" ignores the stop signals, "polite" ends on them; each starts a "leaf" that ignores
# them (in the child's process group), and says it is ready in the folder argv[1] once it has.
CHILD = """
import os, pathlib, signal, subprocess, sys, time
ready, role = pathlib.Path(sys.argv[1]), sys.argv[2]
if role != "polite":
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
if role != "leaf":
    subprocess.Popen([sys.executable, __file__, str(ready), "leaf"])
(ready / str(os.getpid())).write_text(role)
end = time.monotonic() + 300
while time.monotonic() < end:
    time.sleep(0.1)
"""

BOUND_S = 5.0  # every process gone this long after the signal, however busy the machine


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM, signal.SIGINT], ids=["sighup", "sigterm", "sigint"])
def test_a_stop_signal_ends_every_child_and_all_it_started_within_seconds(tmp_path, sig):
    ready = tmp_path / "ready"
    ready.mkdir()
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    commands = {role: [sys.executable, str(child), str(ready), role] for role in ("stubborn", "polite")}
    started: set[int] = set()
    with busy_machine(2), open(tmp_path / "driver.log", "w") as log:
        driver = subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps(commands)], stdout=log,
                                  stderr=subprocess.STDOUT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        said = lambda: (tmp_path / "driver.log").read_text()[-4000:]  # noqa: E731
        try:
            wait_until(lambda: driver.poll() is not None or len(list(ready.iterdir())) == 4, timeout_s=60,
                       what="both children and their grandchildren to start")
            assert driver.poll() is None, said()
            started = descendants(driver.pid)
            assert len(started) >= 5, started  # two children, two grandchildren, the watcher
            t0 = time.monotonic()
            driver.send_signal(sig)
            wait_until(lambda: not [p for p in started if alive(p)], timeout_s=BOUND_S,
                       what=f"every process started to end after {signal.Signals(sig).name}")
            print(f"{signal.Signals(sig).name}: every process ended {time.monotonic() - t0:.2f} s after it")
            assert driver.wait(timeout=BOUND_S) == 0, said()
        finally:
            if driver.poll() is None:
                driver.kill()
                driver.wait()
            for pid in started | descendants(driver.pid):
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
