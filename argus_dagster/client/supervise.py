"""The children of `argus ui` (the Dagster UI and the reports server): started, watched, and ended with it.

Each child is started in a session (process group) of its own with ``PR_SET_PDEATHSIG``
(:func:`die_with_parent`), and :data:`WATCHER` (a small process of its own) ends their whole groups
when the parent is gone, a kill -9 included. Ctrl-C (SIGINT), SIGTERM or SIGHUP stop them as
:func:`stop_children` does: the signal is passed on to each group, which has :data:`STOP_GRACE_S` to
end before what is left of it is killed, so nothing a child started outlives it and stopping takes
seconds however busy the machine (dagster dev alone can take longer than that to stop its webserver
and daemon on a loaded machine). A second signal while they stop does not cut the stopping short.
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


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
STOP_GRACE_S = 3.0  # what a child's process group has to end on the signal passed on, before it is killed
# The signal each child's group is sent when argus ui receives one. The children have sessions of their
# own, with no terminal to hang up: a hangup asks them to stop, SIGTERM's meaning (dagster dev stops its
# webserver and daemon on SIGTERM, as on Ctrl-C; on SIGHUP it dies at once and leaves them to the kill).
PASSED_ON: dict[int, signal.Signals] = {signal.SIGINT: signal.SIGINT, signal.SIGTERM: signal.SIGTERM, signal.SIGHUP: signal.SIGTERM}


class _StopSignals:
    """The handler of :data:`STOP_SIGNALS`: records each, and raises ``KeyboardInterrupt`` once, only
    while :attr:`armed` (never while the children start, nor while they are stopped)."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.armed = False

    def __call__(self, signum, frame) -> None:
        self.received.append(signum)
        if self.armed:
            self.armed = False
            raise KeyboardInterrupt

    def arm(self) -> None:
        """Raise from now on; at once when a signal came while disarmed."""
        self.armed = True
        if self.received:
            self.armed = False
            raise KeyboardInterrupt


def supervise(commands: dict[str, list[str]], env: dict[str, str], front: Front,
              stopped: Callable[[str, int], None]) -> int:
    """Serve ``front`` and run each of ``commands`` (name -> argv, with ``env``) until one of them ends
    (``stopped(name, exit status)`` is told, and the status is 1) or this process is interrupted
    (Ctrl-C, SIGTERM or SIGHUP; the status is 0). Either way ``front`` is closed and every child
    stopped with all it started (:func:`stop_children`) before this returns."""
    children: dict[str, subprocess.Popen] = {}
    watcher = None
    signals = _StopSignals()  # disarmed while the children start: none is started and then forgotten
    previous = {sig: signal.signal(sig, signals) for sig in STOP_SIGNALS}
    status = 0
    try:
        front.serve_in_thread()
        for name, cmd in commands.items():  # each in a session of its own: stopped here, with all it started
            children[name] = subprocess.Popen(cmd, env=env, start_new_session=True, stdin=subprocess.DEVNULL,
                                              preexec_fn=die_with_parent(os.getpid()))
        watcher = subprocess.Popen([sys.executable, "-c", WATCHER, str(os.getpid()), *(str(p.pid) for p in children.values())],
                                   start_new_session=True, stdin=subprocess.DEVNULL)
        signals.arm()
        while all(p.poll() is None for p in children.values()):
            time.sleep(0.5)
        signals.armed = False
        name, ended = next((n, p) for n, p in children.items() if p.poll() is not None)
        stopped(name, ended.returncode)
        status = 1
    except KeyboardInterrupt:
        pass
    finally:
        signals.armed = False
        front.close()
        stop_children(children, PASSED_ON[signals.received[0]] if signals.received else signal.SIGINT)
        if watcher is not None:
            watcher.kill()
            watcher.wait()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return status


def stop_children(children: dict[str, subprocess.Popen], signum: int = signal.SIGINT,
                  grace_s: float = STOP_GRACE_S) -> None:
    """Send ``signum`` to each child's process group (SIGINT: as Ctrl-C would), give the groups
    ``grace_s`` to end, then kill what is left of each: nothing they started outlives them, and this
    returns a moment after ``grace_s`` at most."""
    groups = [p.pid for p in children.values()]
    for group in groups:
        _signal_group(group, signum)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        for p in children.values():
            p.poll()  # reaped: an ended child's zombie would keep its group alive
        if not any(_signal_group(group, 0) for group in groups):
            break
        time.sleep(0.05)
    for group in groups:  # the group: a webserver or daemon its parent left behind
        _signal_group(group, signal.SIGKILL)
    for p in children.values():
        try:
            p.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:  # a process the kernel has not ended yet (a stuck disk)
            pass


def _signal_group(group: int, signum: int) -> bool:
    """Send ``signum`` to a process group; whether it still had a process (0: only ask)."""
    try:
        os.killpg(group, signum)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
