"""Progress of long work: videos through the evidence and judgment stages, and VLM requests.

Every stage reports each video it finishes to one process-wide :class:`Progress`; the stage also
logs a line to its Dagster run every ``LOG_EVERY_S`` seconds (what the UI shows for a run launched
anywhere), and ``argus evaluate`` draws one line on the terminal from the same counts: videos scored
of the total, VLM requests, elapsed and remaining time.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable, TextIO

LOG_EVERY_S = 15.0


class Progress:
    """Thread-safe counts of one process's work (videos per stage, expected totals, VLM requests)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._forward: Callable[[tuple], None] | None = None
        self.reset()

    def forward_to(self, send: Callable[[tuple], None] | None) -> None:
        """Also send every count to ``send`` (a worker process's events to the launcher's
        :class:`Progress`, which :meth:`apply` adds them to)."""
        self._forward = send

    def apply(self, event: tuple) -> None:
        """Add a forwarded count: ``("video", stage)`` or ``("request",)``."""
        if event[0] == "video":
            self.video_done(event[1])
        elif event[0] == "request":
            self.request_done()

    def reset(self, expected_videos: int = 0) -> None:
        with self._lock:
            self.t0 = time.monotonic()
            self.expected = expected_videos
            self.done: dict[str, int] = {}
            self.requests = 0

    def expect(self, n: int) -> None:
        """``n`` more (or, negative, fewer) videos to score than said at :meth:`reset`."""
        with self._lock:
            self.expected = max(0, self.expected + n)

    def video_done(self, stage: str) -> None:
        with self._lock:
            self.done[stage] = self.done.get(stage, 0) + 1
        if self._forward is not None:
            self._forward(("video", stage))

    def request_done(self) -> None:
        with self._lock:
            self.requests += 1
        if self._forward is not None:
            self._forward(("request",))

    def line(self, stage: str = "judgments") -> str:
        """``videos 37/200 scored · 412 VLM requests · 1m12s elapsed · about 2m05s left``."""
        with self._lock:
            done, total, requests = self.done.get(stage, 0), self.expected, self.requests
            elapsed = time.monotonic() - self.t0
        parts = [f"videos {done}/{total} scored" if total else f"{done} videos scored"]
        parts.append(f"{requests} VLM requests")
        parts.append(f"{_clock(elapsed)} elapsed")
        if total and 0 < done < total:
            parts.append(f"about {_clock(elapsed * (total - done) / done)} left")
        return " · ".join(parts)


def _clock(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


PROGRESS = Progress()


class StageLog:
    """Logs ``<what> n/N videos`` to a run at most every ``LOG_EVERY_S`` seconds, and when the stage ends."""

    def __init__(self, log: Callable[[str], None], what: str, total: int, stage: str):
        self.log, self.what, self.total, self.stage = log, what, total, stage
        self.n = 0
        self._lock = threading.Lock()
        self._said = time.monotonic()

    def video_done(self) -> None:
        PROGRESS.video_done(self.stage)
        with self._lock:
            self.n += 1
            due = time.monotonic() - self._said > LOG_EVERY_S or self.n == self.total
            if due:
                self._said = time.monotonic()
        if due:
            self.log(f"{self.what} {self.n}/{self.total} videos ({PROGRESS.line(self.stage)})")


class TerminalLine:
    """Redraws :data:`PROGRESS`'s line on a terminal every ``every_s`` seconds while a block runs;
    nothing when the stream is not a terminal (logs and pipes keep their plain lines)."""

    def __init__(self, stream: TextIO = sys.stderr, every_s: float = 1.0):
        self.stream, self.every_s = stream, every_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "TerminalLine":
        if self.stream.isatty():
            self._thread = threading.Thread(target=self._draw, daemon=True)
            self._thread.start()
        return self

    def _draw(self) -> None:
        while not self._stop.wait(self.every_s):
            self.stream.write("\r\033[2K" + PROGRESS.line())
            self.stream.flush()

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self.stream.write("\r\033[2K")
            self.stream.flush()
