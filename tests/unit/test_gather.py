"""argus_dagster.method.gather: the one evidence loop (the criterion_evidence asset, the controls, the
benchmarks run it): rows in the order of videos and criteria, each video's media opened once and closed
after its last criterion, one error policy, the same rows on one thread or many."""

import json

import numpy as np
import pytest

from argus_dagster.method import gather
from argus_dagster.method.evidence.tools.registry import embedded_suite
from argus_dagster.method.inputs import InputInstance
from argus_dagster.method.rubric.schema import parse_rubric

RUBRIC = parse_rubric({"criteria": [
    {"id": "stable", "dimension": 12, "criterion": "stable", "type": "soft", "importance": "high",
     "scoring_rule": "0-10", "evidence_plan": {"tool_sequence": [{"tool": "flicker_probe", "args": {}}]}},
    {"id": "sharp", "dimension": 10, "criterion": "sharp", "type": "soft", "importance": "low",
     "scoring_rule": "0-10", "evidence_plan": {"tool_sequence": [{"tool": "aesthetic", "args": {}}]}}]})
TIMING = ("seconds",)


def _frames(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 255, (12, 48, 64, 3), dtype=np.uint8)


@pytest.fixture
def videos(write_clip):
    out = []
    for i in range(3):
        uri = write_clip(f"v{i}.mp4", _frames(i))
        out.append(gather.Video(InputInstance(f"in{i}", "a prompt"), RUBRIC, uri, f"sha{i}", sample=str(i % 2),
                                row={"task": "T2V", "model": "m"}))
    return out


def _steady(rows):
    """The rows without their timings (the row's and each tool step's seconds)."""
    return [{k: ([{s: x for s, x in step.items() if s != "seconds"} for step in json.loads(v)] if k == "evidence" else v)
             for k, v in r.items() if k not in TIMING} for r in rows]


def test_rows_come_in_the_order_of_videos_and_criteria_with_each_videos_columns(videos):
    said = []
    rows = gather.gather_evidence(videos, embedded_suite(), workers=4, on_video=lambda v, got: said.append(
        ((v.inst.id, v.sample), [r["criterion_id"] for r in got])))
    assert [(r["input_id"], r["sample"], r["criterion_id"]) for r in rows] == [
        (f"in{i}", str(i % 2), c) for i in range(3) for c in ("stable", "sharp")]
    assert {(r["task"], r["model"]) for r in rows} == {("T2V", "m")}
    assert [r["video_sha256"] for r in rows] == ["sha0", "sha0", "sha1", "sha1", "sha2", "sha2"]
    assert said == [((f"in{i}", str(i % 2)), ["stable", "sharp"]) for i in range(3)]
    assert all(r["error"] is None and r["n_ok"] == 1 for r in rows)


def test_one_thread_or_many_give_the_same_rows(videos):
    one = gather.gather_evidence(videos, embedded_suite(), workers=1)
    many = gather.gather_evidence(videos, embedded_suite(), workers=6)
    assert _steady(one) == _steady(many)


def test_each_videos_media_is_opened_once_and_closed_after_its_last_criterion(videos, monkeypatch):
    opened, closed = [], []
    real = gather.candidate_media

    def spy(inst, uri, sha, storage=None):
        store = real(inst, uri, sha, storage)
        opened.append(inst.id)
        close = store.close
        store.close = lambda: (closed.append(inst.id), close())[1]  # type: ignore[method-assign]
        return store

    monkeypatch.setattr(gather, "candidate_media", spy)
    gather.gather_evidence(videos, embedded_suite(), workers=4)
    assert sorted(opened) == sorted(closed) == ["in0", "in1", "in2"]


def test_a_criterion_that_raises_gets_its_error_and_the_rest_go_on(videos, monkeypatch):
    real = gather.criterion_evidence_row

    def row(inst, c, media, suite, **kw):
        if (inst.id, c.id) == ("in1", "sharp"):
            raise RuntimeError("the plan cannot be checked")
        return real(inst, c, media, suite, **kw)

    monkeypatch.setattr(gather, "criterion_evidence_row", row)
    rows = gather.gather_evidence(videos, embedded_suite(), workers=3)
    failed = [r for r in rows if r["error"]]
    assert [(r["input_id"], r["criterion_id"], r["n_failed"], r["error"]) for r in failed] == [
        ("in1", "sharp", 1, "evidence failed: RuntimeError: the plan cannot be checked")]
    assert sum(1 for r in rows if r.get("n_ok")) == 5


def test_collect_evidence_is_the_loop_on_one_video(videos):
    v = videos[0]
    alone = gather.collect_evidence(v.inst, v.rubric, v.uri, embedded_suite(), video_sha256=v.sha256)
    looped = gather.gather_evidence([gather.Video(v.inst, v.rubric, v.uri, v.sha256)], embedded_suite())
    assert _steady(alone) == _steady(looped)
    assert [r["criterion_id"] for r in alone] == ["stable", "sharp"]


def test_each_in_own_context_sees_the_callers_variables_and_keeps_its_own(tmp_path):
    """A range's partitions (``own_context``): each item starts from the caller's context variables
    as they were when it was handed over, and what one item sets is never another's, even on a thread
    that ran another item before."""
    import contextvars
    import threading

    var = contextvars.ContextVar("test_each_var", default="unset")
    token = var.set("caller")
    started = threading.Barrier(2)
    try:
        def one(i: int) -> tuple[str, str]:
            seen = var.get()
            var.set(f"item {i}")
            if i < 2:
                started.wait(timeout=30)  # the first two are in the pool at once: two threads
            return seen, var.get()

        out = gather.each(list(range(6)), one, workers=2, own_context=True)
        assert out == [("caller", f"item {i}") for i in range(6)]
        assert var.get() == "caller"  # nothing an item set came back to the caller
        # without it, a pool thread has a context of its own: the caller's variables are not there
        assert gather.each(list(range(3)), lambda i: var.get(), workers=1) == ["unset"] * 3
    finally:
        var.reset(token)
