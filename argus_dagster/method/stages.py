"""The per-candidate stages as plain functions; the Dagster assets call these.

``candidate_media`` opens one candidate's media (decoded once per sampling policy, shared by all its
criteria), ``criterion_evidence_row`` normalizes and runs one criterion's plan, ``judge_criteria``
turns evidence into scores, ``score_video`` aggregates (method §8). Tool steps and judgments go
through the content-addressed cache (:mod:`argus_dagster.infra.cache`), so a rerun pays only for what
changed; criteria are independent, so a stage can run all criteria of all videos at once.
"""

from __future__ import annotations

import contextvars
import json
import threading
import time
from concurrent.futures import Executor
from typing import Any, Callable

from argus_dagster.infra.cache import ContentCache
from argus_dagster.infra.identities import JudgmentIdentity, record_key
from argus_dagster.infra.media import JUDGE_POLICY, SAMPLING_ID, Frames, MediaError, file_digest
from argus_dagster.infra.tables import COSTS
from argus_dagster.method.evidence.executor import run_plan
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.evidence.plan import normalize_plan
from argus_dagster.method.evidence.tools.registry import ToolSuite
from argus_dagster.method.inputs import InputInstance
from argus_dagster.method.judge import judge_view, judgment_evidence
from argus_dagster.method.rubric.schema import IMPORTANCE_WEIGHT, Criterion, Rubric
from argus_dagster.method.scoring import ScoredCriterion, aggregate
from argus_dagster.vlm.ledger import cost_ledger


def candidate_media(inst: InputInstance, video_uri: str, video_sha256: str = "", storage=None) -> MediaStore:
    """The store of one candidate: its output video and its input's conditions, with content hashes
    (a medium that cannot be hashed has none; the tools that read it then report why), read through
    ``storage`` (the storage resource's; local paths only without it)."""
    uris = {**inst.condition_media, "output_video": video_uri}
    digests = {"output_video": video_sha256} if video_sha256 else {}
    for m, uri in inst.condition_media.items():
        try:
            digests[m] = file_digest(uri, storage)
        except (MediaError, OSError):
            pass
    return MediaStore(uris, digests, storage=storage)


def criterion_evidence_row(inst: InputInstance, c: Criterion, media: MediaStore, suite: ToolSuite, *,
                           web_search: bool = False, vlm_only: bool = False,
                           cache: ContentCache | None = None) -> dict[str, Any]:
    """One criterion's evidence row; its steps come from the cache where they were computed before."""
    t0 = time.perf_counter()
    plan = normalize_plan(c, present_media=set(inst.condition_media), available_tools=suite.available(),
                          web_search=web_search, vlm_only=vlm_only)
    hits: list[bool] = []
    with cost_ledger() as spent:  # its vlm_qa calls (none for steps from the cache)
        records = run_plan(plan, media.scope(), suite, cache=cache, hits=hits)
    return {
        "input_id": inst.id,
        "criterion_id": c.id,
        "plan": json.dumps(plan.steps),
        "repairs": json.dumps(plan.repairs),
        "plan_status": plan.status,
        "tools": [s["tool"] for s in plan.steps],
        "evidence": json.dumps(records, default=float),
        "n_ok": sum(1 for r in records if r.get("ok")),
        "seconds": round(time.perf_counter() - t0, 4),
        "n_cached": sum(hits),
        "cache_hit": bool(hits) and all(hits),
        # failed steps are not stored, so a rerun runs them again; "not measurable" is final
        "n_failed": sum(1 for r in records if not (r.get("ok") or r.get("unavailable") or r.get("not_measurable"))),
        "error": None,
        **spent.costs(),
    }


def judgment_identity(judge, view: dict[str, Any], evidence: list[dict[str, Any]],
                      video_sha256: str) -> JudgmentIdentity:
    """Everything a judgment depends on: the judge (its record: backend, model, prompt version and
    text, token budget), the criterion as the judge sees it, the evidence, and for a judge that looks,
    the video and the sampling policies."""
    looks = bool(getattr(judge, "needs_frames", False))
    return JudgmentIdentity(judge=judge.cache_identity, view=view, evidence=evidence,
                            video=video_sha256 if looks else None, sampling=SAMPLING_ID if looks else None)


def judgment_key(judge, view: dict[str, Any], evidence: list[dict[str, Any]], video_sha256: str) -> str:
    return record_key(judgment_identity(judge, view, evidence, video_sha256))


def judge_criteria(rubric: Rubric, evidence_rows: list[dict[str, Any]], judge, *,
                   frames: Frames | Callable[[], Frames | None] | None = None, pool: Executor | None = None,
                   cache: ContentCache | None = None, video_sha256: str = "", run_id: str | None = None,
                   ahead: bool = False, claimed: dict[str, object] | None = None) -> list[dict[str, Any]]:
    """Score every criterion of one candidate; with ``pool``, the judge calls run concurrently.

    ``frames`` may be a function, called once and only if some criterion is not in the cache. A
    judgment is cached only when it has a score (an unscored one is asked again next time).

    ``run_id``: the run asking. A judgment it finds in the cache that this same run made
    (``judged_ahead``: its evidence step judged each video as soon as its evidence was in, ``ahead``)
    is not a hit: the row carries what it cost, and an unscored one stands (it was asked once, in
    this run). Judgments made ahead are cached with their cost and the run's id, scored or not; a
    later run takes an unscored one as a miss. ``claimed`` (shared by a step's calls): the keys whose
    cost a row took already; another row with the same key (an identical video) is a hit.
    """
    by_id = {r["criterion_id"]: r for r in evidence_rows}
    got: list[Frames | None] = []

    def the_frames() -> Frames | None:
        if not callable(frames):
            return frames
        if not got:
            got.append(frames())
        return got[0]

    def one(c: Criterion) -> dict[str, Any]:
        ev = by_id.get(c.id)
        hit, retry, costs, ahead_made, asked = False, False, {}, False, []
        if ev is None or ev.get("error"):
            reason = ev["error"] if ev else "no evidence row"
            score, rationale, judge_id, retry = None, f"unscored: {reason}", judge.identity, True
        else:
            view, evidence = judge_view(c), judgment_evidence(json.loads(ev["evidence"]))

            def ask() -> dict[str, Any]:
                asked.append(c.id)
                with cost_ledger() as paid:
                    j = judge.judge(view, evidence, the_frames() if judge.needs_frames else None)
                out = {"score": j.score, "rationale": j.rationale, "judge": j.judge}
                return {**out, "paid": {"run": run_id, "ahead": ahead, **paid.costs()}} if run_id else out

            def ours(r: dict[str, Any]) -> bool:  # judged ahead by this run, whatever its score
                paid = r.get("paid") or {}
                return bool(run_id) and paid.get("run") == run_id and bool(paid.get("ahead"))

            key = judgment_key(judge, view, evidence, video_sha256)

            with cost_ledger() as spent:  # the judge's calls (none for a judgment from the cache)
                if cache is not None and video_sha256:
                    res, hit = cache.get_or_compute(key, ask,
                                                    keep=lambda r: r["score"] is not None or (ahead and ours(r)),
                                                    usable=lambda r: r["score"] is not None or ours(r))
                else:
                    res = ask()
            costs = spent.costs()
            if hit and ours(res) and _claim(claimed, key):  # judged ahead: not reuse, its cost is this row's
                hit, ahead_made, costs = False, True, {k: int(res["paid"].get(k) or 0) for k in COSTS}
            score, rationale, judge_id = res["score"], res["rationale"], res["judge"]
            retry = score is None and not getattr(judge, "deterministic", False)
        return {
            "criterion_id": c.id, "dimension": c.dimension, "type": c.type, "importance": c.importance,
            "hard_cap": c.hard_cap, "fail_threshold": float(c.fail_threshold),
            "score": score, "rationale": rationale, "judge": judge_id, "cache_hit": hit,
            "judged_ahead": ahead_made, "asked": bool(asked),  # counted in the step's metadata, not stored
            "retry": retry,  # unscored for a reason a rerun may not meet again
            # what the score cost: its evidence's VLM calls and the judge's
            **{k: ((ev or {}).get(k) or 0) + costs.get(k, 0) for k in COSTS},
        }

    if pool is None:
        return [one(c) for c in rubric.criteria]
    # Each call keeps the caller's context: its requests wait in the caller's stage, priority and group.
    return [f.result() for f in [pool.submit(contextvars.copy_context().run, one, c) for c in rubric.criteria]]


_CLAIMS = threading.Lock()


def _claim(claimed: dict[str, object] | None, key: str) -> bool:
    """Whether this row is the first (or only) one to take the judgment ``key`` made ahead."""
    if claimed is None:
        return True
    token = object()
    with _CLAIMS:
        return claimed.setdefault(key, token) is token


def judge_label(identity: str) -> str:
    """A judge identity as people read it: ``evidence-only/2`` -> ``evidence-only``, ``vlm/b/m/v`` -> ``vlm m``."""
    parts = (identity or "").split("/")
    return f"vlm {parts[2]}" if parts[0] == "vlm" and len(parts) > 2 else parts[0]


def coverage(criterion_rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What a score covers: criteria and importance weight scored, by which judge, and the criteria
    left unscored because only a VLM could judge them (the evidence-only judge had nothing to measure)."""
    weights = [IMPORTANCE_WEIGHT.get(r["importance"], 0) for r in criterion_rows]
    total = sum(weights)
    scored_w = sum(w for w, r in zip(weights, criterion_rows) if r["score"] is not None)
    judges = sorted({judge_label(r.get("judge") or "") for r in criterion_rows if r["score"] is not None})
    needs_vlm = [r["criterion_id"] for r in criterion_rows
                 if r["score"] is None and judge_label(r.get("judge") or "") == "evidence-only"]
    return {"weight_scored": round(scored_w / total, 4) if total else 0.0,
            "judge": ", ".join(judges) or None, "needs_vlm": needs_vlm}


def score_video(criterion_rows: list[dict[str, Any]], alpha: float) -> dict[str, Any]:
    agg = aggregate([
        ScoredCriterion(r["criterion_id"], r["importance"], r["type"],
                        None if r["score"] is None else float(r["score"]), r["hard_cap"], r["fail_threshold"])
        for r in criterion_rows
    ], alpha)
    return {
        "base_score": agg.base_score, "final_score": agg.final_score, "cap_alpha": agg.cap_alpha,
        "caps_fired": agg.caps_fired, "n_scored": agg.n_scored, "n_criteria": agg.n_criteria,
        **coverage(criterion_rows),
        **{k: sum(r.get(k) or 0 for r in criterion_rows) for k in COSTS},  # what the video's scores cost
    }


def judge_video(rubric: Rubric, evidence_rows: list[dict[str, Any]], judge, video_uri: str | None, video_sha256: str | None,
                storage=None, **kw: Any) -> tuple[list[dict[str, Any]], bool]:
    """:func:`judge_criteria` on one candidate video (``kw``: its other arguments), its frames decoded
    (or taken from the frame pool) once, and only if the judge asks; ``(rows, blind)``, ``blind`` when
    the judge was asked without frames (the video cannot be decoded)."""
    store = MediaStore({"output_video": video_uri or ""}, {"output_video": video_sha256 or ""}, storage=storage)
    seen: list[Frames | None] = []

    def frames() -> Frames | None:
        if not seen:
            seen.append(output_frames(store)())
        return seen[0]

    try:
        rows = judge_criteria(rubric, evidence_rows, judge, frames=frames, video_sha256=video_sha256 or "", **kw)
    finally:
        store.close()
    return rows, bool(getattr(judge, "needs_frames", False) and seen and seen[0] is None)


def output_frames(media: MediaStore) -> Callable[[], Frames | None]:
    """The judge's frames of the output video, decoded (or taken from the frame pool) on first use."""

    def get() -> Frames | None:
        try:
            return media.frames("output_video", JUDGE_POLICY)
        except MediaError:
            return None

    return get
