"""Which launcher processes count as gone when a run they started is failed by the dead-run sensor: a
zombie (killed, not yet reaped by whoever adopted it) is gone; a live process, or another's reused
pid, is told apart."""

import subprocess
import sys
import time

from argus_dagster.infra.processes import alive, process_id


def test_a_live_process_is_alive_and_a_killed_unreaped_one_is_gone():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        tag = process_id(child.pid)
        assert alive(tag)
        child.kill()
        deadline = time.time() + 10
        while time.time() < deadline and alive(tag):  # a zombie until waited for
            time.sleep(0.01)
        assert not alive(tag)
    finally:
        child.kill()
        child.wait()
    assert not alive(tag)  # reaped: no such process


def test_a_reused_pid_is_not_the_process_that_started_the_run():
    host, pid, start, namespace = process_id().split(":")
    assert namespace.isdigit()
    assert alive(f"{host}:{pid}:{start}:{namespace}") and alive(f"{host}:{pid}:{start}")
    assert not alive(f"{host}:{pid}:{int(start) + 1}:{namespace}")
    assert not alive(f"{host}:{pid}:{int(start) + 1}")  # a tag written before the namespace was recorded
    assert alive(f"another-host:{pid}:{start}:{namespace}")  # another machine's run: not ours to judge


def test_a_process_of_another_pid_namespace_is_not_judged():
    """A container that shares the host's name (``--uts=host``) has pids this machine's processes do
    not see: its run is left to its own daemon or next command."""
    host, _, _, namespace = process_id().split(":")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert not alive(f"{host}:{gone.pid}:1:{namespace}")
    assert alive(f"{host}:{gone.pid}:1:{int(namespace) + 1}")
