"""A partition's evidence, and the judging that overlaps it: the one loop the ``criterion_evidence``
asset, the controls, the benchmarks and the tests run.

:func:`gather_evidence` runs every criterion of every video at once, up to ``workers`` threads (the
VLM's bound plus one per CPU in the asset, so tools compute while ``vlm_qa`` waits). Each video's media
is opened once, shared by its criteria and closed after its last one. The error policy is one: a
criterion whose evidence raises gets a row with ``n_failed`` 1 and ``error`` "evidence failed: ...", and
every other criterion and video goes on. :func:`collect_evidence` is the same loop on one video.

:class:`JudgeAhead` judges each video as soon as its evidence is in, so the judge's requests fill the
VLM's slots while other videos' tools run; the judgments go to the content cache with the run's id, where
the judging stage takes them. Whether a run judges ahead is the caller's decision (the asset's: the same
process must also run that stage).
"""

from __future__ import annotations

import contextvars
import threading
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence, TypeVar

from argus_dagster.infra.cache import ContentCache
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.evidence.tools.registry import ToolSuite
from argus_dagster.method.inputs import InputInstance
from argus_dagster.method.rubric.schema import Criterion, Rubric
from argus_dagster.method.stages import candidate_media, criterion_evidence_row, judge_video
from argus_dagster.vlm.ledger import CallStats
from argus_dagster.vlm.priorities import STAGE_EVIDENCE, STAGE_JUDGMENTS, request_pool, request_priority, video_group


@dataclass(frozen=True)
class Video:
    """One candidate video to gather evidence for: its input, the input's frozen rubric, where it is and
    its content hash, and the columns each of its rows carries (``row``: task, model, sample, ...)."""

    inst: InputInstance
    rubric: Rubric
    uri: str
    sha256: str = ""
    sample: str | None = None
    row: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str | None, str]:
        """The video among those of one loop: its input, sample and file (controls of one video share
        its input and sample)."""
        return self.inst.id, self.sample, self.uri

    @property
    def label(self) -> str:
        return video_label(self.inst.id, self.sample)


def video_label(input_id: str, sample: str | None) -> str:
    """How logs and metadata name a video: its input id, and ``#<k>`` for sample ``k``."""
    return f"{input_id}#{sample}" if sample else input_id


class JudgeAhead:
    """Judges each video of an evidence loop as soon as its evidence is in (``judge``: a VLM judge,
    ``cache``: the judgments' content cache, which carries them to the judging stage, ``run_id``: the
    run asking). Leaving the block waits for every judgment asked; a video whose judging fails is left
    to the judging stage, which asks again. ``warn`` says a line for the run's log."""

    def __init__(self, judge, cache: ContentCache, *, workers: int, n_videos: int, run_id: str | None,
                 storage=None, stats: CallStats | None = None, warn: Callable[[str], None] = lambda _m: None):
        self.judge, self.cache, self.run_id, self.storage, self.warn = judge, cache, run_id, storage, warn
        self.stats = stats if stats is not None else CallStats()
        self.workers = workers
        self.n_pool = min(max(4, workers), max(1, n_videos))
        self.n_videos = self.n_judgments = self.n_failed = 0
        self.pending: list[Future[int]] = []

    def __enter__(self) -> JudgeAhead:
        with request_priority(stage=STAGE_JUDGMENTS):  # pools of the judgments' stage: behind the evidence's
            self.calls, self.per_video = request_pool(self.workers), request_pool(self.n_pool)
        return self

    def submit(self, video: Video, evidence_rows: list[dict[str, Any]], group: int) -> None:
        self.pending.append(self.per_video.submit(contextvars.copy_context().run, self._one, video, evidence_rows, group))

    def _one(self, video: Video, evidence_rows: list[dict[str, Any]], group: int) -> int:
        with request_priority(stage=STAGE_JUDGMENTS, group=group):
            got, blind = judge_video(video.rubric, evidence_rows, self.judge, video.uri, video.sha256, self.storage,
                                     pool=self.calls if self.workers > 1 else None, cache=self.cache,
                                     run_id=self.run_id, ahead=True)
        if blind:
            self.warn(f"{video.label}: the judge saw no frames (the video cannot be decoded)")
        return sum(1 for r in got if r["asked"])

    def __exit__(self, exc_type, *exc) -> None:
        if exc_type is not None:  # the loop failed: what was not asked yet is not asked
            for f in self.pending:
                f.cancel()
        try:
            for f in self.pending:
                if f.cancelled():
                    continue
                try:
                    self.n_judgments += f.result()
                    self.n_videos += 1
                except Exception as e:  # the judging stage asks again what was not judged here
                    self.n_failed += 1
                    self.warn(f"judging ahead failed ({type(e).__name__}: {e}); the judging stage judges that video itself")
        finally:
            self.per_video.shutdown()
            self.calls.shutdown()


def evidence_failed(criterion_id: str, exc: BaseException) -> dict[str, Any]:
    """The row of a criterion whose evidence could not be gathered: the error policy of the loop."""
    return {"criterion_id": criterion_id, "n_failed": 1, "error": f"evidence failed: {type(exc).__name__}: {exc}"}


def gather_evidence(videos: Sequence[Video], suite: ToolSuite, *, web_search: bool = False, vlm_only: bool = False,
                    cache: ContentCache | None = None, storage=None, workers: int = 1,
                    on_video: Callable[[Video, list[dict[str, Any]]], None] | None = None,
                    ahead: JudgeAhead | None = None) -> list[dict[str, Any]]:
    """Evidence rows for every criterion of every video (each row: the video's ``row`` columns, its
    input, sample, content hash and rubric's criterion, then the criterion's evidence), in the order of
    ``videos`` and their criteria. ``on_video(video, rows)`` is called as each video's rows are in, in
    that order; with ``ahead`` each video is then judged at once (leave ``ahead``'s block after this)."""
    media: dict[tuple[str, str | None, str], MediaStore] = {}
    left = {v.key: len(v.rubric.criteria) for v in videos}
    group_of = {v.key: video_group() for v in videos}  # the VLM queue serves videos in this order
    lock = threading.Lock()

    def one(video: Video, c: Criterion) -> dict[str, Any]:
        base = {**video.row, "input_id": video.inst.id, "sample": video.sample, "video_sha256": video.sha256}
        try:
            with lock:
                if video.key not in media:
                    media[video.key] = candidate_media(video.inst, video.uri, video.sha256, storage)
                store = media[video.key]
            with request_priority(group=group_of[video.key]):  # a video's vlm_qa requests go out together
                return {**base, **criterion_evidence_row(video.inst, c, store, suite, web_search=web_search,
                                                         vlm_only=vlm_only, cache=cache)}
        except Exception as exc:  # the criterion gets the error; the others go on
            return {**base, **evidence_failed(c.id, exc)}
        finally:
            with lock:
                left[video.key] -= 1
                done = media.pop(video.key, None) if left[video.key] == 0 else None  # its last criterion: it may go
            if done is not None:
                done.close()

    rows: list[dict[str, Any]] = []
    with request_priority(stage=STAGE_EVIDENCE), request_pool(max(1, workers)) as pool:
        futures = [(v, [pool.submit(one, v, c) for c in v.rubric.criteria]) for v in videos]
        for video, fs in futures:
            got = [f.result() for f in fs]
            rows += got
            if on_video is not None:
                on_video(video, got)
            if ahead is not None:
                ahead.submit(video, got, group_of[video.key])
    return rows


T = TypeVar("T")
R = TypeVar("R")


def each(items: Sequence[T], one: Callable[[T], R], *, workers: int, stage: int | None = None,
         own_context: bool = False) -> list[R]:
    """``one(item)`` for every item, up to ``workers`` at once (one per item at most), in the items' order;
    ``stage``: the VLM queue's stage its requests wait in (the rubrics', the judgments'), where it makes
    any (making a control's video makes none). ``own_context``: each item runs in its own copy of the
    caller's context variables, taken when it is handed over (a partition of a range as a run of one
    partition runs: what one item sets is never another's), not only the queue's stage and priority."""
    with request_priority(stage=stage), request_pool(max(1, min(workers, len(items)))) as pool:
        if not own_context:
            return list(pool.map(one, items))
        futures = [pool.submit(contextvars.copy_context().run, one, item) for item in items]
        return [f.result() for f in futures]


def judge_each(items: Sequence[T], one: Callable[[T, Executor | None], R], *, workers: int) -> list[R]:
    """``one(item, calls)`` for every item (a video), several videos at once (``workers``, at least 4,
    at most one per item); ``calls``: the pool all their judge calls share, up to ``workers`` at once
    (None for one worker: the calls go one after another). In the judgments' stage of the VLM queue."""
    with request_priority(stage=STAGE_JUDGMENTS), request_pool(max(1, workers)) as calls, \
            request_pool(min(max(4, workers), max(1, len(items)))) as per_video:
        return list(per_video.map(lambda item: one(item, calls if workers > 1 else None), items))


def collect_evidence(inst: InputInstance, rubric: Rubric, video_uri: str, suite: ToolSuite, *,
                     web_search: bool = False, vlm_only: bool = False, cache: ContentCache | None = None,
                     video_sha256: str = "", storage=None) -> list[dict[str, Any]]:
    """Evidence rows for every criterion of one candidate, one after another (:func:`gather_evidence`
    on one video, one thread)."""
    return gather_evidence([Video(inst, rubric, video_uri, video_sha256)], suite, web_search=web_search,
                           vlm_only=vlm_only, cache=cache, storage=storage)
