"""Candidate-side assets, partitioned by task x model: videos, evidence, criterion and video scores."""


import hashlib
import json
import time
from concurrent.futures import ThreadPoolExecutor

import dagster as dg
import polars as pl

from argus_dagster import bench as bench_lib
from argus_dagster.evidence.media_store import MediaStore
from argus_dagster.evidence.tools.registry import ToolSuite
from argus_dagster.evidence.tools.vlm_qa import VlmQa
from argus_dagster.instances import InputInstance
from argus_dagster.media import JUDGE_POLICY, MediaError, probe_video, sha256_file
from argus_dagster.pipeline import collect_evidence, judge_criteria, score_video
from argus_dagster.rubric.schema import parse_rubric
from argus_dagster.vlm import CallStats
from argus_dagster.tables import CANDIDATE_VIDEOS, CRITERION_EVIDENCE, CRITERION_SCORES, VIDEO_SCORES, frame
from resources.bench import BenchResource
from resources.judging import JudgeResource, ScoringResource
from resources.tools import ToolsResource
from resources.vlm import VlmResource

from .lineage import criterion_delta_metadata, video_delta_metadata
from .partitions import task_and_model, task_model_partitions


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _vlm_metadata(vlm: VlmResource, stats: CallStats) -> dict:
    """The VLM calls a stage made (never the endpoint's key)."""
    if not vlm.configured:
        return {"vlm": "none"}
    meta = stats.as_metadata()
    return {"vlm": f"{vlm.backend}:{vlm.model_name()}",
            **{k: dg.MetadataValue.json(v) if isinstance(v, dict) else v for k, v in meta.items()}}


def _version(df: pl.DataFrame, cols: list[str]) -> dg.DataVersion:
    text = df.select(cols).sort(cols[:3]).write_csv()
    return dg.DataVersion(hashlib.sha256(text.encode()).hexdigest()[:16])


@dg.asset(partitions_def=task_model_partitions, code_version="1", group_name="candidates", kinds={"polars"})
def candidate_videos(context: dg.AssetExecutionContext, input_instances: pl.DataFrame,
                     bench: BenchResource) -> dg.Output[pl.DataFrame]:
    """One row per input of the task for this model: its video's URI, hash and geometry, or the error."""
    task, model = task_and_model(context)
    rows = []
    for r in input_instances.iter_rows(named=True):
        row = {"task": task, "model": model, "input_id": r["input_id"]}
        path = bench_lib.find_candidate(bench.candidates_path(), task, model, r["input_id"])
        if path is None:
            row["error"] = (f"missing: no video for input {r['input_id']!r} under "
                            f"{bench.candidates_path()}/{task}/{model}/")
        else:
            row["uri"] = str(path)
            try:
                row["sha256"] = sha256_file(str(path))
                info = probe_video(str(path))
                row.update(n_frames=info.n_frames, fps=info.fps, width=info.width, height=info.height,
                           duration=info.duration, error=None)
            except MediaError as exc:
                row["error"] = str(exc)
        if row.get("error"):
            context.log.warning(f"{task}/{model}/{r['input_id']}: {row['error']}")
        rows.append(row)
    df = frame(rows, CANDIDATE_VIDEOS)
    n_err = df.filter(pl.col("error").is_not_null()).height
    return dg.Output(df, data_version=_version(df, ["input_id", "sha256", "error"]), metadata={
        "n_videos": df.height, "n_errors": n_err,
        "errors": dg.MetadataValue.md("\n".join(f"- `{r['input_id']}`: {r['error']}" for r in df.filter(pl.col("error").is_not_null()).iter_rows(named=True)) or "none"),
    })


@dg.asset(partitions_def=task_model_partitions, code_version="2", group_name="candidates", kinds={"polars"}, pool="gpu")
def criterion_evidence(context: dg.AssetExecutionContext, candidate_videos: pl.DataFrame, rubrics: pl.DataFrame,
                       input_instances: pl.DataFrame, tools: ToolsResource, vlm: VlmResource) -> dg.Output[pl.DataFrame]:
    """One row per (input, criterion): the normalized plan, its repairs, and every tool's record."""
    task, model = task_and_model(context)
    suite = tools.suite()
    stats = CallStats()
    if vlm.configured:  # vlm_qa answers on the configured VLM; every other tool is the suite's
        suite = ToolSuite({**suite.tools, "vlm_qa": VlmQa(vlm.client(), stats=stats, parse_retries=vlm.parse_retries)})
    cache = tools.evidence_cache()
    inputs = {r["input_id"]: r for r in input_instances.iter_rows(named=True)}
    rubric_rows = {r["input_id"]: r for r in rubrics.iter_rows(named=True)}
    t0 = time.perf_counter()
    todo = [c for c in candidate_videos.filter(pl.col("error").is_null()).iter_rows(named=True)
            # a candidate whose rubric is missing or invalid: video_scores records why it has no score
            if rubric_rows.get(c["input_id"]) is not None and not rubric_rows[c["input_id"]]["error"]]

    def one(cand: dict) -> list[dict]:
        rr = rubric_rows[cand["input_id"]]
        rubric = parse_rubric(json.loads(rr["rubric_json"]))
        base = {"task": task, "model": model, "input_id": cand["input_id"], "rubric_hash": rr["rubric_hash"],
                "video_sha256": cand["sha256"]}
        try:
            ev = collect_evidence(InputInstance.from_row(inputs[cand["input_id"]]), rubric, cand["uri"], suite,
                                  web_search=tools.web_search, vlm_only=tools.vlm_only, cache=cache,
                                  video_sha256=cand["sha256"])
            return [{**base, **e} for e in ev]
        except Exception as exc:  # the candidate gets the error; the partition goes on
            context.log.warning(f"{task}/{model}/{cand['input_id']}: evidence failed: {exc}")
            return [{**base, "criterion_id": c.id, "error": f"evidence failed: {type(exc).__name__}: {exc}"}
                    for c in rubric.criteria]

    # Candidates run side by side when a VLM answers vlm_qa: its waits overlap, each video keeps its
    # own media store (decoded once per policy).
    rows: list[dict] = []
    with ThreadPoolExecutor(max_workers=min(vlm.workers(), max(1, len(todo))) if vlm.configured else 1) as pool:
        for n, (cand, got) in enumerate(zip(todo, pool.map(one, todo)), start=1):
            rows += got
            context.log.info(f"{task}/{model}: evidence {n}/{len(todo)} ({cand['input_id']})")
    df = frame(rows, CRITERION_EVIDENCE)
    statuses = df["plan_status"].value_counts().to_dicts() if df.height else []
    tool_calls = df.explode("tools", empty_as_null=True)["tools"].value_counts().to_dicts() if df.height else []
    return dg.Output(df, data_version=_version(df, ["input_id", "criterion_id", "rubric_hash", "video_sha256", "evidence"]),
                     metadata={
                         "n_rows": df.height, "seconds": round(time.perf_counter() - t0, 2),
                         "cache_hits": cache.hits, "cache_misses": cache.misses,
                         "plan_status": dg.MetadataValue.json({d["plan_status"]: d["count"] for d in statuses if d["plan_status"]}),
                         "tool_steps": dg.MetadataValue.json({d["tools"]: d["count"] for d in tool_calls if d["tools"]}),
                         "tool_versions": dg.MetadataValue.json(suite.versions()),
                         **_vlm_metadata(vlm, stats),
                     })


@dg.asset(partitions_def=task_model_partitions, code_version="2", group_name="candidates", kinds={"polars"})
def criterion_scores(context: dg.AssetExecutionContext, criterion_evidence: pl.DataFrame, rubrics: pl.DataFrame,
                     candidate_videos: pl.DataFrame, judge: JudgeResource, vlm: VlmResource) -> dg.Output[pl.DataFrame]:
    """One row per (input, criterion): the judge's integer score (null when unscored) and rationale."""
    task, model = task_and_model(context)
    stats = CallStats()
    the_judge = judge.judge(vlm, stats)
    rubric_rows = {r["input_id"]: r for r in rubrics.iter_rows(named=True) if not r["error"]}
    uris = {r["input_id"]: r["uri"] for r in candidate_videos.iter_rows(named=True)}
    groups = [(k[0], g) for k, g in criterion_evidence.group_by("input_id", maintain_order=True)]
    workers = vlm.workers() if vlm.configured else 1

    def one(item) -> list[dict]:
        input_id, ev = item
        rubric = parse_rubric(json.loads(rubric_rows[input_id]["rubric_json"]))
        frames = None
        if the_judge.needs_frames:  # decoded once per video, shared by all its criteria
            try:
                frames = MediaStore({"output_video": uris[input_id]}).frames("output_video", JUDGE_POLICY)
            except (MediaError, KeyError) as exc:
                context.log.warning(f"{task}/{model}/{input_id}: judge sees no frames: {exc}")
        return [{"task": task, "model": model, "input_id": input_id, **s}
                for s in judge_criteria(rubric, ev.to_dicts(), the_judge, frames=frames,
                                        pool=calls if workers > 1 else None)]

    # Criteria of every video go to one pool sized to the VLM's bound, so the judge stays busy.
    with ThreadPoolExecutor(max_workers=workers) as calls, \
            ThreadPoolExecutor(max_workers=min(4, max(1, len(groups)))) as videos:
        rows = [r for got in videos.map(one, groups) for r in got]
    df = frame(rows, CRITERION_SCORES)
    scored = df.filter(pl.col("score").is_not_null())
    unscored = df.filter(pl.col("score").is_null())
    reasons = (unscored.with_columns(pl.col("rationale").str.slice(0, 90)).group_by("rationale").len()
               .sort("len", descending=True).head(8).to_dicts()) if unscored.height else []
    return dg.Output(df, data_version=_version(df, ["input_id", "criterion_id", "score", "judge"]), metadata={
        "n_criteria": df.height, "n_scored": scored.height, "n_unscored": unscored.height,
        "mean_score": float(scored["score"].mean()) if scored.height else None,
        "judge": the_judge.identity,
        **_vlm_metadata(vlm, stats),
        "unscored_reasons": dg.MetadataValue.md("\n".join(f"- {d['len']} x {d['rationale']}" for d in reasons) or "none"),
        **criterion_delta_metadata(context, df),
    })


@dg.asset(partitions_def=task_model_partitions, code_version="1", group_name="candidates", kinds={"polars"},
          automation_condition=dg.AutomationCondition.eager())
def video_scores(context: dg.AssetExecutionContext, candidate_videos: pl.DataFrame, criterion_scores: pl.DataFrame,
                 scoring: ScoringResource) -> dg.Output[pl.DataFrame]:
    """One row per candidate: base and final score, alpha, caps fired, or the reason it has no score."""
    task, model = task_and_model(context)
    by_input = {k[0]: g for k, g in criterion_scores.group_by("input_id")}
    rows = []
    for cand in candidate_videos.iter_rows(named=True):
        row = {"task": task, "model": model, "input_id": cand["input_id"], "cap_alpha": scoring.cap_alpha,
               "caps_fired": [], "n_scored": 0, "n_criteria": 0}
        if cand["error"]:
            row["error"] = cand["error"]
        elif cand["input_id"] not in by_input:
            row["error"] = "no criteria: the input's rubric is missing or invalid (see rubrics)"
        else:
            row.update(score_video(by_input[cand["input_id"]].to_dicts(), scoring.cap_alpha))
            if row["final_score"] is None:
                row["error"] = "no criterion could be scored"
        rows.append(row)
    df = frame(rows, VIDEO_SCORES)
    finals = df["final_score"].drop_nulls()
    return dg.Output(df, data_version=_version(df, ["input_id", "final_score", "error"]), metadata={
        "n_videos": df.height, "n_scored": finals.len(), "n_errors": df.filter(pl.col("error").is_not_null()).height,
        "mean_final": float(finals.mean()) if finals.len() else None,
        **video_delta_metadata(context, df),
        "n_caps_fired": int(df["caps_fired"].list.len().gt(0).sum()),
        "scores": dg.MetadataValue.md("\n".join(
            f"- `{r['input_id']}`: final {_fmt(r['final_score'])}, base {_fmt(r['base_score'])}, "
            f"caps {r['caps_fired'] or 'none'}" + (f", error: {r['error']}" if r["error"] else "")
            for r in df.iter_rows(named=True))),
    })
