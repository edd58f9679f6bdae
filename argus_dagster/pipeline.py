"""The per-candidate stages as plain functions; the Dagster assets call these row by row.

``collect_evidence`` normalizes and runs every criterion's plan on one candidate (one media store,
so each video is decoded once per sampling policy), ``judge_criteria`` turns evidence into scores,
``score_video`` aggregates (method §8).
"""

from __future__ import annotations

import json
import time
from concurrent.futures import Executor
from typing import Any

from .cache import EvidenceCache, cache_key
from .evidence.executor import run_plan
from .evidence.media_store import MediaStore
from .evidence.plan import normalize_plan
from .evidence.tools.registry import ToolSuite
from .instances import InputInstance
from .judge import judge_view
from .rubric.schema import Rubric
from .scoring import ScoredCriterion, aggregate


def collect_evidence(
    inst: InputInstance,
    rubric: Rubric,
    video_uri: str,
    suite: ToolSuite,
    *,
    web_search: bool = False,
    vlm_only: bool = False,
    cache: EvidenceCache | None = None,
    video_sha256: str = "",
) -> list[dict[str, Any]]:
    """Evidence rows for every criterion; with a cache, criteria already computed are not rerun."""
    media = MediaStore({**inst.condition_media, "output_video": video_uri})
    present = set(inst.condition_media)
    versions = suite.versions()
    rubric_hash = rubric.content_hash()
    rows = []
    for c in rubric.criteria:
        t0 = time.perf_counter()
        plan = normalize_plan(c, present_media=present, available_tools=suite.available(),
                              web_search=web_search, vlm_only=vlm_only)
        key = cache_key(video=video_sha256 or video_uri, input=inst.content_hash, rubric=rubric_hash,
                        criterion=c.id, plan=plan.steps, tools={s["tool"]: versions[s["tool"]] for s in plan.steps})
        use_cache = cache is not None and bool(video_sha256)
        records = cache.get(key) if use_cache else None
        cached = records is not None
        if records is None:
            records = run_plan(plan, media, suite)
            # A step that failed (not merely unavailable) may succeed next time: keep it out.
            if use_cache and all(r.get("ok") or r.get("unavailable") for r in records):
                cache.put(key, records)
        rows.append({
            "input_id": inst.id,
            "criterion_id": c.id,
            "plan": json.dumps(plan.steps),
            "repairs": json.dumps(plan.repairs),
            "plan_status": plan.status,
            "tools": [s["tool"] for s in plan.steps],
            "evidence": json.dumps(records, default=float),
            "n_ok": sum(1 for r in records if r.get("ok")),
            "seconds": round(time.perf_counter() - t0, 4),
            "cache_hit": cached,
            "error": None,
        })
    return rows


def judge_criteria(rubric: Rubric, evidence_rows: list[dict[str, Any]], judge, *, frames: Any = None,
                   pool: Executor | None = None) -> list[dict[str, Any]]:
    """Score every criterion of one candidate; with ``pool``, the judge calls run concurrently."""
    by_id = {r["criterion_id"]: r for r in evidence_rows}

    def one(c) -> dict[str, Any]:
        ev = by_id.get(c.id)
        if ev is None or ev.get("error"):
            reason = ev["error"] if ev else "no evidence row"
            score, rationale, judge_id = None, f"unscored: {reason}", judge.identity
        else:
            j = judge.judge(judge_view(c), json.loads(ev["evidence"]), frames)
            score, rationale, judge_id = j.score, j.rationale, j.judge
        return {
            "criterion_id": c.id, "dimension": c.dimension, "type": c.type, "importance": c.importance,
            "hard_cap": c.hard_cap, "fail_threshold": float(c.fail_threshold),
            "score": score, "rationale": rationale, "judge": judge_id,
        }

    if pool is None:
        return [one(c) for c in rubric.criteria]
    return [f.result() for f in [pool.submit(one, c) for c in rubric.criteria]]


def score_video(criterion_rows: list[dict[str, Any]], alpha: float) -> dict[str, Any]:
    agg = aggregate([
        ScoredCriterion(r["criterion_id"], r["importance"], r["type"],
                        None if r["score"] is None else float(r["score"]), r["hard_cap"], r["fail_threshold"])
        for r in criterion_rows
    ], alpha)
    return {
        "base_score": agg.base_score, "final_score": agg.final_score, "cap_alpha": agg.cap_alpha,
        "caps_fired": agg.caps_fired, "n_scored": agg.n_scored, "n_criteria": agg.n_criteria,
    }
