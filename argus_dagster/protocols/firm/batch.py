"""FIRM-Video over a task's inputs and a model's videos (what the assets call): every input's IF
checklist planned, every video evaluated, each in a request pool with its cost on its row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Sequence

from argus_dagster.protocols.firm.evaluator import FirmEvaluator
from argus_dagster.protocols.firm.offline import evaluate_offline, unscored_offline
from argus_dagster.protocols.firm.tables import checklist_rows, score_row, verdict_rows
from argus_dagster.protocols.firm.training_records import export_records, frame_refs
from argus_dagster.protocols.firm.types import DIMENSIONS, PQ, Checklist, DimensionResult
from argus_dagster.vlm.ledger import cost_ledger
from argus_dagster.vlm.priorities import request_pool
from argus_dagster.vlm.reply import ParseError, VlmError


def plan_checklists(evaluator: FirmEvaluator, prompts: dict[str, str], *,
                    references: dict[str, tuple[dict[str, Any], dict[str, str]]] | None = None,
                    max_workers: int = 4, costs: dict[str, dict] | None = None
                    ) -> tuple[list[dict], dict[str, Checklist | str]]:
    """``firm_checklists`` rows and, per input, its checklist or the reason it has none. ``references``
    maps an input id to ``(condition frames by label, their digests)`` for TI2V/TS2V/TV2V/TSV2V.
    ``costs``, when given, receives each input's planner cost (:meth:`CallStats.costs`; zeros for a
    checklist from the cache)."""
    def one(iid: str) -> Checklist | str:
        refs, digests = (references or {}).get(iid, (None, None))
        with cost_ledger() as spent:
            try:
                return evaluator.plan_if(prompts[iid], references=refs, reference_digests=digests)
            except (ParseError, VlmError) as exc:
                return f"IF planner: {exc}"
            finally:
                if costs is not None:
                    costs[iid] = spent.costs()

    with request_pool(max(1, max_workers)) as pool:
        out = dict(zip(prompts, pool.map(one, list(prompts))))
    rows = [r for iid, c in out.items() if isinstance(c, Checklist) for r in checklist_rows(iid, c)]
    return rows, out


@dataclass(frozen=True)
class VideoJob:
    """One candidate video to evaluate. ``load_frames`` returns its sampled frames (a
    :class:`~argus_dagster.infra.media.Frames`) and may raise: the row then records why."""

    input_id: str
    prompt: str
    video_uri: str
    video_digest: str
    load_frames: Callable[[], Any]
    references: dict[str, Any] | None = None
    reference_digests: dict[str, str] | None = None


class OfflineRecords(NamedTuple):
    """What the offline path rates a video's PQ from: the CPU tools' records and the video's size."""

    records: list[dict]
    width: int | None
    height: int | None


class VideoOutcome(NamedTuple):
    """One job evaluated: its results by dimension, its frame references and what its calls cost."""

    job: VideoJob
    results: dict[str, DimensionResult]
    frame_refs: list[str]
    costs: dict


@dataclass
class FirmTables:
    """A model's videos evaluated: the ``firm_verdicts`` and ``firm_scores`` rows, the training
    instances and, per job in job order, its results."""

    verdicts: list[dict] = field(default_factory=list)
    scores: list[dict] = field(default_factory=list)
    export: list[dict] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)  # videos without export records, and why
    results: list[dict[str, DimensionResult]] = field(default_factory=list)  # per job, in job order


def _evaluate_job(evaluator: FirmEvaluator | None, job: VideoJob, checklists: dict[str, Checklist | str],
                  offline_records: Callable[[VideoJob], OfflineRecords] | None
                  ) -> tuple[dict[str, DimensionResult], list[str]]:
    """One job's results by dimension and its frame references (none when its frames cannot be read:
    every dimension then says why)."""
    try:
        frames = job.load_frames()
    except Exception as exc:  # a video that cannot be read: every dimension says so
        why = f"video {job.video_uri}: {exc}"
        return {d: DimensionResult(d, reason=why) for d in DIMENSIONS}, []
    refs = frame_refs(job.video_uri, frames)
    if evaluator is None:
        if offline_records is None:
            no_pq = DimensionResult(PQ, reason="PQ offline: no CPU tool records")
            return {**unscored_offline(), PQ: no_pq}, refs
        measured = offline_records(job)
        return evaluate_offline(measured.records, width=measured.width, height=measured.height), refs
    cl = checklists.get(job.input_id, "no IF checklist for this input")
    res = evaluator.evaluate(job.prompt, frames, cl if isinstance(cl, Checklist) else None,
                             video_digest=job.video_digest, references=job.references,
                             reference_digests=job.reference_digests,
                             if_reason=cl if isinstance(cl, str) else "")
    return res, refs


def evaluate_videos(evaluator: FirmEvaluator | None, jobs: Sequence[VideoJob],
                    checklists: dict[str, Checklist | str], *, video_prefix: str = "", max_workers: int = 4,
                    offline_records: Callable[[VideoJob], OfflineRecords] | None = None) -> FirmTables:
    """Every job's verdict rows, score row and export records; a video that fails (its frames, a call)
    gets its reasons in the row and the rest proceeds. ``evaluator=None`` is the offline path:
    ``offline_records(job)`` gives the CPU tool records and the video's width and height
    (:class:`OfflineRecords`). Each score row carries what the video's calls
    cost (:meth:`CallStats.costs`: the ledger's FIRM stage)."""

    def costed(job: VideoJob) -> VideoOutcome:
        with cost_ledger() as spent:
            results, refs = _evaluate_job(evaluator, job, checklists, offline_records)
        return VideoOutcome(job, results, refs, spent.costs())

    out = FirmTables()
    with request_pool(max(1, max_workers)) as pool:
        done = list(pool.map(costed, jobs))
    for v in done:
        out.results.append(v.results)
        out.verdicts += verdict_rows(v.job.input_id, v.results)
        out.scores.append({**score_row(v.job.input_id, v.results), "frames": v.frame_refs, **v.costs})
        recs, why = export_records(f"{video_prefix}{v.job.input_id}", v.job.prompt, v.frame_refs, v.results)
        out.export += recs
        if why:
            out.left_out.append(why)
    return out
