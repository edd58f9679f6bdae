"""The children of `argus ui` (the Dagster UI and the reports server): started, watched, and ended with it.

Each child is started in a session (process group) of its own with ``PR_SET_PDEATHSIG``
(:func:`die_with_parent`), and :data:`WATCHER` (a small process of its own) ends their whole groups
when the parent is gone, a kill -9 included. Ctrl-C (SIGINT), SIGTERM or SIGHUP stop them as
:func:`stop_children` does: each group is interrupted as Ctrl-C would, waited for, then killed, so
nothing a child started outlives it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from typing import Callable, Protocol

# Run as ``python -c WATCHER <parent pid> <process group>...``, in a session of its own: when the
# parent is gone (any way, kill -9 included), interrupt each group as Ctrl-C would, then kill what is left.
WATCHER = """
import os, signal, sys, time
parent, groups = int(sys.argv[1]), [int(g) for g in sys.argv[2:]]
for sig in (signal.SIGHUP, signal.SIGINT):
    signal.signal(sig, signal.SIG_IGN)
while os.getppid() == parent:
    time.sleep(0.5)
def alive():
    left = []
    for g in groups:
        try:
            os.killpg(g, 0)
            left.append(g)
        except OSError:
            pass
    return left
for g in alive():
    os.killpg(g, signal.SIGINT)
deadline = time.monotonic() + 20
while alive() and time.monotonic() < deadline:
    time.sleep(0.2)
for g in alive():
    os.killpg(g, signal.SIGKILL)
"""


class Front(Protocol):
    """What stands in front of the children (`argus ui`'s :class:`argus_dagster.client.ui.HostProxy`):
    served while they run, closed before they are stopped."""

    def serve_in_thread(self) -> object: ...

    def close(self) -> None: ...


def die_with_parent(parent: int):
    """A ``preexec_fn``: the child is sent SIGTERM when its parent (``parent``) ends, however it ends.
    libc is loaded here, in the parent: the forked child only calls it (no import after a fork)."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def preexec() -> None:
        prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the parent ended before the line above
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def supervise(commands: dict[str, list[str]], env: dict[str, str], front: Front,
              stopped: Callable[[str, int], None]) -> int:
    """Serve ``front`` and run each of ``commands`` (name -> argv, with ``env``) until one of them ends
    (``stopped(name, exit status)`` is told, and the status is 1) or this process is interrupted
    (Ctrl-C, SIGTERM or SIGHUP; the status is 0). Either way ``front`` is closed and every child
    stopped with all it started (:func:`stop_children`) before this returns."""
    children: dict[str, subprocess.Popen] = {}
    watcher = None

    def interrupted(signum, frame):
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupted) for sig in (signal.SIGTERM, signal.SIGHUP)}
    status = 0
    try:
        front.serve_in_thread()
        for name, cmd in commands.items():  # each in a session of its own: stopped here, with all it started
            children[name] = subprocess.Popen(cmd, env=env, start_new_session=True, stdin=subprocess.DEVNULL,
                                              preexec_fn=die_with_parent(os.getpid()))
        watcher = subprocess.Popen([sys.executable, "-c", WATCHER, str(os.getpid()), *(str(p.pid) for p in children.values())],
                                   start_new_session=True, stdin=subprocess.DEVNULL)
        while all(p.poll() is None for p in children.values()):
            time.sleep(0.5)
        name, ended = next((n, p) for n, p in children.items() if p.poll() is not None)
        stopped(name, ended.returncode)
        status = 1
    except KeyboardInterrupt:
        pass
    finally:
        front.close()
        stop_children(children)
        if watcher is not None:
            watcher.kill()
            watcher.wait()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return status


def stop_children(children: dict[str, subprocess.Popen], grace_s: float = 30.0) -> None:
    """Interrupt each child's process group (as Ctrl-C would), wait for them, then kill what is left of
    each group: nothing they started outlives them."""
    for p in children.values():
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace_s
    for p in children.values():
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except Exception:
            pass
        try:
            os.killpg(p.pid, signal.SIGKILL)  # the group: a webserver or daemon its parent left behind
        except (ProcessLookupError, PermissionError):
            pass
        p.wait()
