"""Which process executes a run, and the runs whose process is gone.

A run ``argus evaluate`` executes in its own process carries that process's identity in the tag
:data:`PROCESS_TAG` (``host:pid:start:pidns``). When the process is killed (a signal, the out-of-memory
killer, a closed laptop), Dagster keeps the run started, and the concurrency-pool slots its steps
held stay claimed: runs that need the pool would wait forever. :func:`assets.sensors.fail_dead_runs` marks such a
run failed and gives its slots back. It runs as the ``dead_run_sensor`` (:mod:`assets.sensors`),
ticked by the daemon under ``argus ui``, and ``argus evaluate`` asks the same sensor before its runs.

Only runs an ``argus`` process executes itself (tag ``argus/launcher=cli``) name their process. Runs
the daemon or the UI launched run in processes Dagster's run launcher starts; this sensor does not
judge them. Dagster's run monitoring (``run_monitoring`` in ``deploy/aws/dagster.yaml``) fails those
that never start, but with the default launcher it cannot see a worker that died after starting. A
process of another machine is not judged: the sensor of that machine's daemon, or its next ``argus
evaluate``, judges it.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

PROCESS_TAG = "argus/process"  # host:pid:start:pidns of the process that executes a CLI run
LAUNCHER_TAG = "argus/launcher"


def process_id(pid: int | None = None) -> str:
    """``host:pid:start:pidns``: the start time (in clock ticks since boot) tells a reused pid apart,
    the pid namespace a container's process (whose pids this machine's other processes do not see)."""
    pid = pid or os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid)}:{_pid_namespace(pid)}"


def _pid_namespace(pid: int | str = "self") -> str:
    try:
        return os.readlink(f"/proc/{pid}/ns/pid").removeprefix("pid:[").removesuffix("]")
    except OSError:
        return "?"


def launcher_tags() -> dict[str, str]:
    """The tags of a run this process executes itself (``argus evaluate``'s in-process runs)."""
    return {LAUNCHER_TAG: "cli", PROCESS_TAG: process_id()}


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command's name (empty when there is no such process)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _start_ticks(pid: int) -> str:
    fields = _stat(pid)
    return fields[19] if len(fields) > 19 else "?"


def alive(process: str) -> bool:
    """Whether the process a :data:`PROCESS_TAG` names still runs. A process of another machine, or of
    another pid namespace (a container sharing the host's name), counts as alive (not this process's
    to judge); a zombie (killed, not yet reaped by whoever adopted it) and a reused pid (another start
    time) do not."""
    host, pid, start, namespace = (process.split(":") + ["?", "?", "?"])[:4]
    if host != socket.gethostname() or not pid.isdigit():
        return True
    if namespace not in ("?", _pid_namespace()):
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = _stat(int(pid))
    if fields and fields[0] in ("Z", "X"):
        return False
    return start in ("?", _start_ticks(int(pid)))
