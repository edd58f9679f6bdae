"""Progress of long work: counts, the phase, the remaining-time estimate, the line a terminal shows,
and the run-log cadence."""

import io
import types

from argus_dagster.infra import progress
from argus_dagster.infra.progress import PROGRESS, Progress, RemainingTime, StageLog, TerminalLine
from tests.waiting import wait_until


def _clock(monkeypatch, start: float = 1000.0) -> list[float]:
    """The progress module's clock, stopped: every time is exactly what the test sets."""
    now = [start]
    monkeypatch.setattr(progress, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    return now


def test_the_line_counts_videos_requests_and_estimates_what_is_left(monkeypatch):
    now = _clock(monkeypatch)
    p = Progress()
    p.reset(expected_videos=10)
    p.expect(-2)  # a partition found up to date: 8 videos
    assert p.line() == "videos 0/8 scored · 0 VLM requests · 0s elapsed · estimating time left"
    for _ in range(7):
        p.request_done()
    for t in (1010, 1014, 1018, 1022, 1026, 1030, 1034, 1038):  # 4 s per video's evidence
        now[0] = t
        p.video_done("evidence")
    now[0] = 1039
    # no judgment yet: no basis for what judging the 8 videos takes
    assert p.line() == "evidence · videos 0/8 scored · 7 VLM requests · 39s elapsed · estimating time left"
    now[0] = 1040
    p.video_done("judgments")  # one interval of judging (2 s after the last evidence): not yet a basis
    assert p.line().endswith("estimating time left")
    now[0] = 1042
    p.video_done("judgments")  # two intervals of 2 s each: 6 videos left, 12 s
    assert p.line() == "judging · videos 2/8 scored · 7 VLM requests · 42s elapsed · about 12s left"
    now[0] = 1047
    assert p.line().endswith("about 7s left")  # counted down with the clock between videos
    for t in (1048, 1050, 1052, 1054, 1056, 1058):
        now[0] = t
        p.video_done("judgments")
    assert p.line() == "judging · videos 8/8 scored · 7 VLM requests · 58s elapsed"  # done: no estimate


def test_the_estimate_is_smoothed_rises_slowly_and_falls_at_once():
    est = RemainingTime(alpha=0.5, basis=2, rise=0.5)
    est.begin(0.0)
    est.unit_done("evidence", 10.0, {"evidence": 9, "judging": 0})
    assert est.remaining(10.0, {"evidence": 9}) is None  # one interval: no basis, "estimating"
    est.unit_done("evidence", 20.0, {"evidence": 8, "judging": 0})
    assert est.remaining(20.0, {"evidence": 8}) == 80.0  # 8 units x 10 s
    assert est.remaining(25.0, {"evidence": 8}) == 75.0  # counts down between units
    est.unit_done("evidence", 30.0, {"evidence": 7, "judging": 0})
    assert est.remaining(30.0, {"evidence": 7}) == 70.0
    # One slow unit (40 s): the rate moves half way, 10 + 0.5 x 30 = 25 s, so 6 x 25 = 150 s; the
    # estimate counted down to 70 - 40 = 30 s rises half way to it, 30 + 0.5 x 120 = 90 s (the naive
    # elapsed x left / done would jump from 70 to 105 s).
    est.unit_done("evidence", 70.0, {"evidence": 6, "judging": 0})
    assert est.remaining(70.0, {"evidence": 6}) == 90.0
    # A fast one (2 s): rate 25 + 0.5 x (2 - 25) = 13.5, 5 x 13.5 = 67.5 s, below 90 - 2: taken whole.
    est.unit_done("evidence", 72.0, {"evidence": 5, "judging": 0})
    assert est.remaining(72.0, {"evidence": 5}) == 67.5
    assert est.remaining(500.0, {"evidence": 5}) == 1.0  # overdue: never 0 while work is left
    assert est.remaining(72.0, {"evidence": 0}) is None  # nothing left: no estimate


def test_each_phase_has_its_own_rate_and_a_new_phase_restarts_the_clock():
    est = RemainingTime(alpha=0.5, basis=1, rise=1.0)
    est.begin(100.0)  # the rubrics took 100 s: no unit's time
    est.unit_done("evidence", 103.0, {"evidence": 1, "judging": 2})
    assert est.remaining(103.0, {"evidence": 1, "judging": 2}) is None  # judging has no basis yet
    est.unit_done("evidence", 106.0, {"evidence": 0, "judging": 2})
    est.unit_done("judging", 107.0, {"evidence": 0, "judging": 1})
    # evidence 3 s per video (none left), judging 1 s per video (1 left)
    assert est.remaining(107.0, {"evidence": 0, "judging": 1}) == 1.0
    assert est.rate == {"evidence": 3.0, "judging": 1.0}


def test_the_phase_is_shown_forwarded_and_told_to_a_listener(monkeypatch):
    _clock(monkeypatch)
    p = Progress()
    p.reset(expected_videos=1)
    told, sent = [], []
    p.on_phase(lambda: told.append(p.line().split(" · ")[0]))
    p.forward_to(sent.append)
    for phase in ("rubrics", "rubrics", "evidence", "judging", "reports"):
        p.phase(phase)
    assert told == ["rubrics", "evidence", "judging", "reports"]  # each change once
    assert ("phase", "reports") in sent
    q = Progress()
    q.reset(expected_videos=1)
    for event in sent:
        q.apply(event)
    assert q.line().startswith("reports · videos 0/1 scored")
    p.on_phase(None)
    p.phase("rubrics")
    assert told[-1] == "reports"


def test_a_stage_logs_to_its_run_every_interval_and_when_it_ends(monkeypatch):
    said: list[str] = []
    monkeypatch.setattr(progress, "LOG_EVERY_S", 3600.0)
    stage = StageLog(said.append, "judged", 3, "judgments")
    stage.video_done(), stage.video_done()
    assert said == []  # within the interval, nothing
    stage.video_done()
    assert len(said) == 1 and said[0].startswith("judged 3/3 videos (")
    monkeypatch.setattr(progress, "LOG_EVERY_S", 0.0)
    stage = StageLog(said.append, "evidence", 5, "evidence")
    stage.video_done()
    assert said[-1].startswith("evidence 1/5 videos")


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_terminal_line_is_redrawn_on_a_terminal_only():
    PROGRESS.reset(expected_videos=2)
    tty = _Tty()
    with TerminalLine(tty, every_s=0.01):
        wait_until(lambda: "\r\x1b[2Kvideos 0/2 scored" in tty.getvalue(), what="the line drawn")
    assert tty.getvalue().endswith("\r\x1b[2K")
    pipe = io.StringIO()
    with TerminalLine(pipe, every_s=0.01) as line:
        assert line._thread is None  # no redrawing thread at all, however long the block runs
    assert pipe.getvalue() == ""
