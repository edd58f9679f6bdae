"""Progress of long work: the phase, videos through the evidence and judgment stages, and VLM requests.

Every stage reports each video it finishes to one process-wide :class:`Progress`; the stage also
logs a line to its Dagster run every ``LOG_EVERY_S`` seconds (what the UI shows for a run launched
anywhere), and ``argus evaluate`` draws one line on the terminal from the same counts: the phase
(rubrics, evidence, judging, reports), videos scored of the total, VLM requests, elapsed and
remaining time. The remaining time comes from :class:`RemainingTime`: the seconds each phase takes
per video, smoothed, times the videos each phase has left; "estimating" until every phase with work
left has a basis.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Callable, TextIO

LOG_EVERY_S = 15.0
PHASES = ("rubrics", "evidence", "judging", "reports")
STAGE_PHASE = {"evidence": "evidence", "judgments": "judging"}  # a stage's videos are its phase's units


class RemainingTime:
    """The time left, from completed work units per phase, steady enough to read.

    Each unit's interval (since the unit before it, or since its phase began) is charged to its
    phase; a phase's seconds per unit is the exponentially smoothed mean of its intervals (``alpha``).
    An estimate exists once every phase with units left has ``basis`` intervals: the units each has
    left times its rate. A new estimate above the one counted down since the last unit is taken only
    in part (``rise``), so one slow unit does not make the line jump; a lower one is taken whole.
    Between units the estimate counts down with the clock. Pure: times are passed in.
    """

    def __init__(self, alpha: float = 0.3, basis: int = 2, rise: float = 0.3):
        self.alpha, self.basis, self.rise = alpha, basis, rise
        self.rate: dict[str, float] = {}
        self.n: dict[str, int] = {}
        self.last_t: float | None = None
        self.estimate: float | None = None  # at ``last_t``

    def begin(self, t: float) -> None:
        """A phase begins at ``t``: what came before (loading, another phase's runs) is no unit's time."""
        self.last_t = t

    def unit_done(self, phase: str, t: float, left: dict[str, int]) -> None:
        """A unit of ``phase`` completed at ``t``; ``left``: the units each phase has left after it."""
        if self.last_t is not None:
            dt = max(0.0, t - self.last_t)
            r = self.rate.get(phase)
            self.rate[phase] = dt if r is None else r + self.alpha * (dt - r)
            self.n[phase] = self.n.get(phase, 0) + 1
        fresh = self._work(left)
        before = self.remaining(t, left) if self.estimate is not None else None
        if fresh is None:
            self.estimate = None
        elif before is None or fresh <= before:
            self.estimate = fresh
        else:
            self.estimate = before + self.rise * (fresh - before)
        self.last_t = t

    def _work(self, left: dict[str, int]) -> float | None:
        todo = {p: n for p, n in left.items() if n > 0}
        if not todo:
            return 0.0
        if any(self.n.get(p, 0) < self.basis for p in todo):
            return None
        return sum(n * self.rate[p] for p, n in todo.items())

    def remaining(self, t: float, left: dict[str, int]) -> float | None:
        """Seconds left at ``t``; None while there is no basis (or nothing is left to do)."""
        if self.estimate is None or self.last_t is None or not any(n > 0 for n in left.values()):
            return None
        return max(1.0, self.estimate - max(0.0, t - self.last_t))


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
        """Add a forwarded count: ``("video", stage)``, ``("request",)`` or ``("phase", name)``."""
        if event[0] == "video":
            self.video_done(event[1])
        elif event[0] == "request":
            self.request_done()
        elif event[0] == "phase":
            self.phase(event[1])

    def reset(self, expected_videos: int = 0) -> None:
        with self._lock:
            self.t0 = time.monotonic()
            self.expected = expected_videos
            self.done: dict[str, int] = {}
            self.requests = 0
            self.current = ""
            self.clock = RemainingTime()
            self.clock.begin(self.t0)
            self.listeners: list[Callable[[], None]] = getattr(self, "listeners", [])

    def on_phase(self, listener: Callable[[], None] | None) -> None:
        """Call ``listener`` whenever the phase changes (the terminal line redraws at once); None: stop."""
        with self._lock:
            self.listeners = [] if listener is None else [listener]

    def phase(self, name: str) -> None:
        """The work is now in phase ``name`` (one of :data:`PHASES`), as the runs launched next say."""
        with self._lock:
            changed = name != self.current
            self.current = name
            if changed:  # what ran before (rubrics, loading) is no video's time
                self.clock.begin(time.monotonic())
            listeners = list(self.listeners) if changed else []
        if self._forward is not None:
            self._forward(("phase", name))
        for listener in listeners:
            listener()

    def _left(self) -> dict[str, int]:
        return {STAGE_PHASE[s]: max(0, self.expected - self.done.get(s, 0)) for s in STAGE_PHASE}

    def expect(self, n: int) -> None:
        """``n`` more (or, negative, fewer) videos to score than said at :meth:`reset`."""
        with self._lock:
            self.expected = max(0, self.expected + n)

    def video_done(self, stage: str) -> None:
        phase = STAGE_PHASE.get(stage)
        with self._lock:
            self.done[stage] = self.done.get(stage, 0) + 1
            if phase is not None and self.expected:
                self.clock.unit_done(phase, time.monotonic(), self._left())
            changed = phase is not None and phase != self.current
            if changed and phase is not None:
                self.current = phase
            listeners = list(self.listeners) if changed else []
        if self._forward is not None:
            self._forward(("video", stage))
        for listener in listeners:
            listener()

    def request_done(self) -> None:
        with self._lock:
            self.requests += 1
        if self._forward is not None:
            self._forward(("request",))

    def line(self, stage: str = "judgments") -> str:
        """``judging · videos 37/200 scored · 412 VLM requests · 1m12s elapsed · about 2m05s left``
        (``estimating time left`` until there is a basis)."""
        with self._lock:
            now = time.monotonic()
            done, total, requests = self.done.get(stage, 0), self.expected, self.requests
            elapsed, phase = now - self.t0, self.current
            left = self.clock.remaining(now, self._left()) if total and done < total else None
        parts = [phase] if phase else []
        parts.append(f"videos {done}/{total} scored" if total else f"{done} videos scored")
        parts.append(f"{requests} VLM requests")
        parts.append(f"{_clock(elapsed)} elapsed")
        if total and done < total:
            parts.append(f"about {_clock(left)} left" if left is not None else "estimating time left")
        return " · ".join(parts)


def _clock(seconds: float) -> str:
    m, s = divmod(int(round(seconds)), 60)
    return f"{m}m{s:02d}s" if m else f"{s}s"


# The process's progress line: a process cache because it is one terminal's line, counted across every
# run the process starts (argus evaluate's in-process runs) and every VLM request they make. Bound:
# counters per phase, reset when an evaluation starts.
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
            self._write_lock = threading.Lock()
            self._thread = threading.Thread(target=self._draw, daemon=True)
            self._thread.start()
            PROGRESS.on_phase(self.redraw)  # a new phase shows at once, however short it is
        return self

    def redraw(self) -> None:
        with self._write_lock:
            self.stream.write("\r\033[2K" + PROGRESS.line())
            self.stream.flush()

    def _draw(self) -> None:
        while not self._stop.wait(self.every_s):
            self.redraw()

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            PROGRESS.on_phase(None)
            self._thread.join()
            self.stream.write("\r\033[2K")
            self.stream.flush()
