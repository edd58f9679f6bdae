"""Progress of long work: counts, the line a terminal shows, and the run-log cadence."""

import io
import types

from argus_dagster import progress
from argus_dagster.progress import PROGRESS, Progress, StageLog, TerminalLine
from tests.waiting import wait_until


def test_the_line_counts_videos_requests_and_estimates_what_is_left(monkeypatch):
    now = [1000.0]  # the progress module's clock, stopped: the elapsed time is exactly what is set
    monkeypatch.setattr(progress, "time", types.SimpleNamespace(monotonic=lambda: now[0]))
    p = Progress()
    p.reset(expected_videos=10)
    p.expect(-2)  # a partition found up to date
    for _ in range(4):
        p.video_done("judgments")
    for _ in range(7):
        p.request_done()
    p.t0 = now[0] - 40  # 40 s for 4 of 8 videos: about 40 s left
    line = p.line()
    assert line.startswith("videos 4/8 scored · 7 VLM requests · 40s elapsed · about 40s left"), line
    p.video_done("judgments"), p.video_done("judgments"), p.video_done("judgments"), p.video_done("judgments")
    assert "left" not in p.line()  # done: no estimate


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
