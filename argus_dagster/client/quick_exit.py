"""How an ``argus`` command leaves its process: at once, without the interpreter's teardown.

What must happen when a process ends still happens (the exit handlers run, the output is flushed);
the interpreter's teardown of every module it imported (Dagster, polars, numpy: thousands of them)
is skipped. A process that leaves a thread at work, or runs under a profiler or tracer
(``python -m cProfile``, coverage: they write their results at the ordinary exit), ends the ordinary way.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading


def leave(status: int) -> None:
    """End this process with exit status ``status``: at once where nothing needs the ordinary exit,
    else through :func:`sys.exit`."""
    if sys.getprofile() is not None or sys.gettrace() is not None or any(
            t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(status)
    atexit._run_exitfuncs()  # logging's shutdown, multiprocessing's children, and any others registered
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can reach it
            pass
    os._exit(status)
