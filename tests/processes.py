"""Process trees for tests: what a process started (read from /proc), whether a process still runs, and
a busy machine (busy loops on every core the test shares), under which shutdown bounds are checked."""

from __future__ import annotations

import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

# A busy loop that ends itself after its argument's seconds, should the test that started it die first.
_BUSY = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n    pass\n"


def descendants(pid: int) -> set[int]:
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


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, ended and not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@contextmanager
def busy_machine(loops: int = 2, limit_s: float = 300.0) -> Iterator[list[subprocess.Popen]]:
    """``loops`` processes spinning on the CPU while the block runs (each ends itself after ``limit_s``),
    killed when it ends."""
    procs = [subprocess.Popen([sys.executable, "-c", _BUSY, str(limit_s)]) for _ in range(loops)]
    try:
        yield procs
    finally:
        for p in procs:
            p.send_signal(signal.SIGKILL)
            p.wait()
