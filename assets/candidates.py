"""Candidate-side assets, partitioned by task x model: videos, evidence, criterion and video scores."""


import json
import os
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any, cast

import dagster as dg
import polars as pl

from argus_dagster.assets.versions import content_version, volatile_metadata
from argus_dagster.infra.media import MediaError, file_digest, probe_video
from argus_dagster.infra.progress import StageLog
from argus_dagster.infra.tables import CANDIDATE_VIDEOS, COSTS, CRITERION_EVIDENCE, CRITERION_SCORES, VIDEO_SCORES, frame
from argus_dagster.method import bench as bench_lib
from argus_dagster.method.evidence.tools.registry import ToolSuite
from argus_dagster.method.evidence.tools.vlm_qa import VlmQa
from argus_dagster.method.gather import JudgeAhead, Video, evidence_failed, gather_evidence, judge_each, video_label
from argus_dagster.method.inputs import InputInstance
from argus_dagster.method.leaderboard import coverage_text
from argus_dagster.method.rubric.schema import parse_rubric
from argus_dagster.method.stages import judge_video, score_video
from argus_dagster.records.automation import RETRY_ROUND
from argus_dagster.records.fingerprints import fingerprint_id
from argus_dagster.records.lineage import criterion_delta_metadata, video_delta_metadata
from argus_dagster.resources.bench import BenchResource
from argus_dagster.resources.fingerprint import FINGERPRINT_TAG, fingerprint
from argus_dagster.resources.judging import JudgeResource, ScoringResource
from argus_dagster.resources.storage import StorageResource
from argus_dagster.resources.tools import ToolsResource
from argus_dagster.resources.vlm import VlmResource
from argus_dagster.vlm.ledger import CallStats, cached_share
from argus_dagster.vlm.priorities import request_priority, video_group

from .automation import UP_TO_DATE, retry_round
from .partitions import BACKFILL, each_partition, task_and_model, task_model_partitions
from .sources import aggregation_config, candidate_files, judge_config, tool_suite_config


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _vlm_metadata(vlm: VlmResource, stats: CallStats) -> dict:
    """The VLM calls a stage made (never the endpoint's key; endpoints as ``redact_url`` shows them)."""
    if not vlm.configured:
        return {"vlm": "none"}
    meta = stats.as_metadata()
    return {"vlm": f"{vlm.backend}:{vlm.model_name()}",
            **{k: dg.MetadataValue.json(v) if isinstance(v, dict) else v for k, v in meta.items()}}


def cost_metadata(df: pl.DataFrame) -> dict:
    """What the partition's scores cost (the runs that wrote its evidence and scores): ``costs_*``."""
    sums = {k: sum(int(v) for v in df[k].drop_nulls()) if df.height else 0 for k in COSTS}  # Python ints: no wrap
    return {**{f"costs_{k}": v for k, v in sums.items()},
            "costs_cached_share": cached_share(sums["cached_tokens"], sums["prompt_tokens"])}


def _cache_write_errors(cache) -> dict:
    """Cache entries that could not be stored (a full disk): the results stand, only their reuse is lost."""
    errors = cache.write_errors
    return {"cache_write_errors": len(errors), "cache_write_error": errors[0]} if errors else {}


# What each asset's data version leaves out (assets.versions): what differs between two runs
# that wrote the same content, never what a downstream asset reads.
CANDIDATE_VIDEOS_VOLATILE: tuple[str, ...] = ()
# The evidence's timing, its cache use and what its VLM calls cost in this run.
CRITERION_EVIDENCE_VOLATILE = ("seconds", "n_cached", "cache_hit", *COSTS)
# The judgment's cache use and what its calls cost in this run.
CRITERION_SCORES_VOLATILE = ("cache_hit", *COSTS)
# What the video's calls cost in this run.
VIDEO_SCORES_VOLATILE = tuple(COSTS)


@dg.asset(backfill_policy=BACKFILL, partitions_def=task_model_partitions, code_version="2", group_name="candidates", kinds={"polars"},
          deps=[candidate_files], automation_condition=UP_TO_DATE, metadata=volatile_metadata(CANDIDATE_VIDEOS_VOLATILE))
@each_partition
def candidate_videos(context: dg.AssetExecutionContext, input_instances: pl.DataFrame,
                     bench: BenchResource, storage: StorageResource) -> dg.Output[pl.DataFrame]:
    """One row per video of an input of the task for this model (``sample`` ``""`` for the single
    video ``<id>.mp4``, ``k`` for ``<id>__<k>.mp4`` or ``<id>/<k>.mp4``): its URI (a path, or an
    ``s3://`` URI read through the storage's cache), sha256 and geometry, or the error; an input
    without a video has one row saying so."""
    task, model = task_and_model(context)
    found = bench_lib.find_candidates(bench.candidates_path(), task, model, input_instances["input_id"].to_list(),
                                      storage=storage.storage())
    rows = []
    for r in input_instances.iter_rows(named=True):
        base = {"task": task, "model": model, "input_id": r["input_id"], "sample": ""}
        if r["error"]:  # a bad manifest row (a duplicate id among them) is never looked up or judged
            videos: list[tuple[dict[str, Any], Path | str | None]] = [({**base, "error": f"input invalid: {r['error']}"}, None)]
        elif r["input_id"] not in found:
            videos = [({**base, "error": f"missing: no video for input {r['input_id']!r} under "
                                          f"{bench.candidates_path()}/{task}/{model}/"}, None)]
        else:
            videos = [({**base, "sample": sample, "uri": str(path)}, path) for sample, path in found[r["input_id"]]]
        for row, path in videos:
            if path is not None:
                try:
                    row["sha256"] = file_digest(str(path), storage.storage())
                    info = probe_video(str(path), storage.storage())
                    row.update(n_frames=info.n_frames, fps=info.fps, width=info.width, height=info.height,
                               duration=info.duration, error=None)
                except MediaError as exc:
                    row["error"] = str(exc)
            if row.get("error"):
                context.log.warning(f"{task}/{model}/{video_label(r['input_id'], row['sample'])}: {row['error']}")
            rows.append(row)
    df = frame(rows, CANDIDATE_VIDEOS)
    errors = df.filter(pl.col("error").is_not_null())
    return dg.Output(df, data_version=content_version(df, CANDIDATE_VIDEOS_VOLATILE), metadata={
        "n_videos": df.height, "n_errors": errors.height, "n_inputs": df["input_id"].n_unique(),
        "errors": dg.MetadataValue.md("\n".join(f"- `{video_label(r['input_id'], r['sample'])}`: {r['error']}"
                                                for r in errors.iter_rows(named=True)) or "none"),
    })


# What the evidence step (the model-backed tools) asks of the machine it runs on, in the form Dagster's
# Kubernetes executor reads: one GPU, a node that has one, and the taint GPU nodes carry tolerated.
# Only a step-per-pod executor acts on it (resources.executor_for("k8s")); the in-process and
# multiprocess executors, and run launchers, ignore op tags of this name. The `gpu` pool bounds how
# many of these steps run at once, whatever the executor.
GPU_STEP_K8S_CONFIG = {
    "container_config": {"resources": {"requests": {"cpu": "2", "memory": "6Gi"},
                                       "limits": {"memory": "12Gi", "nvidia.com/gpu": "1"}}},
    "pod_spec_config": {"node_selector": {"nvidia.com/gpu.present": "true"},
                        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]},
}


# The Celery queue of the same step (ARGUS_ENV=celery): served by the workers on GPU machines; every other
# step goes to the `default` queue (resources.CELERY_SETTINGS). Other executors ignore this tag.
GPU_QUEUE = "gpu"


@dg.asset(backfill_policy=BACKFILL, partitions_def=task_model_partitions, code_version="5", group_name="candidates", kinds={"polars"}, pool="gpu",
          op_tags={"dagster-k8s/config": GPU_STEP_K8S_CONFIG, "dagster-celery/queue": GPU_QUEUE}, deps=[tool_suite_config],
          automation_condition=UP_TO_DATE, metadata=volatile_metadata(CRITERION_EVIDENCE_VOLATILE))
@each_partition
def criterion_evidence(context: dg.AssetExecutionContext, candidate_videos: pl.DataFrame, rubrics: pl.DataFrame,
                       input_instances: pl.DataFrame, tools: ToolsResource, vlm: VlmResource, judge: JudgeResource,
                       storage: StorageResource) -> dg.Output[pl.DataFrame]:
    """One row per (video, criterion): the normalized plan, its repairs, and every tool's record. A
    video is an (input, sample); every sample of an input is checked against the input's rubric.

    The criteria of every video in the partition run at once, up to the VLM's bound plus one thread
    per CPU, so tools compute while ``vlm_qa`` waits; each video is decoded once per sampling policy.
    Tool steps computed before (same video, tool, version, arguments) come from the cache. Media and
    the cache on S3 are read through ``storage``.

    When the same run materializes ``criterion_scores`` (and the cache is on), each video is judged
    as soon as its evidence is in (:func:`_judges_ahead`): the judge's requests fill the VLM's slots
    while other videos' tools run, instead of waiting for the step's last video. The judgments go to
    the content cache with their cost and this run's id; ``criterion_scores`` takes them from there
    and accounts their cost on its rows. The step ends when they are all answered.
    """
    task, model = task_and_model(context)
    suite = tools.suite()
    stats = CallStats()
    if vlm.configured:  # vlm_qa answers on the configured VLM; every other tool is the suite's
        suite = ToolSuite({**suite.tools, "vlm_qa": VlmQa(vlm.client(), stats=stats, parse_retries=vlm.parse_retries)})
    cache = tools.cache("evidence", storage.storage())
    inputs = {r["input_id"]: r for r in input_instances.iter_rows(named=True)}
    rubric_rows = {r["input_id"]: r for r in rubrics.iter_rows(named=True)}
    t0 = time.perf_counter()
    todo = [c for c in candidate_videos.filter(pl.col("error").is_null()).iter_rows(named=True)
            # a candidate whose rubric is missing or invalid: video_scores records why it has no score
            if rubric_rows.get(c["input_id"]) is not None and not rubric_rows[c["input_id"]]["error"]]
    rubric_of = {iid: parse_rubric(json.loads(rubric_rows[iid]["rubric_json"])) for iid in {c["input_id"] for c in todo}}
    videos, rows = [], []
    for cand in todo:
        iid = cand["input_id"]
        row = {"task": task, "model": model, "rubric_hash": rubric_rows[iid]["rubric_hash"]}
        try:
            inst = InputInstance.from_row(inputs[iid])
        except Exception as exc:  # the same error policy as the loop's: each criterion says why
            rows += [{**row, "input_id": iid, "sample": cand["sample"], "video_sha256": cand["sha256"],
                      **evidence_failed(c.id, exc)} for c in rubric_of[iid].criteria]
            continue
        videos.append(Video(inst, rubric_of[iid], cand["uri"], cand["sha256"], cand["sample"], row))

    def said(video: Video, got: list[dict]) -> None:
        for r in got:
            if r.get("error"):
                context.log.warning(f"{task}/{model}/{video.label}/{r['criterion_id']}: {r['error']}")
        progress.video_done()  # a line in the run's log every 15 s, and the CLI's progress line

    progress = StageLog(lambda m: context.log.info(f"{task}/{model}: {m}"), "evidence", len(todo), "evidence")
    ahead = _judges_ahead(context, judge, vlm, tools, storage, len(videos))
    with ahead or nullcontext():
        rows += gather_evidence(videos, suite, web_search=tools.web_search, vlm_only=tools.vlm_only, cache=cache,
                                storage=storage.storage(), on_video=said, ahead=ahead,
                                workers=(vlm.workers() if vlm.configured else 0) + (os.cpu_count() or 1))
    df = frame(rows, CRITERION_EVIDENCE)
    statuses = df["plan_status"].value_counts().to_dicts() if df.height else []
    tool_calls = df.explode("tools", empty_as_null=True)["tools"].value_counts().to_dicts() if df.height else []
    n_steps = int(df["tools"].list.len().sum()) if df.height else 0
    n_cached = int(df["n_cached"].sum()) if df.height else 0
    n_failed = sum(r.get("n_failed", 0) for r in rows)
    return dg.Output(df, data_version=content_version(df, CRITERION_EVIDENCE_VOLATILE),
                     metadata={
                         "n_rows": df.height, "seconds": round(time.perf_counter() - t0, 2),
                         "tool_steps": n_steps, "tool_steps_run": n_steps - n_cached, "tool_steps_cached": n_cached,
                         "tool_steps_failed": n_failed,
                         RETRY_ROUND: retry_round(context, n_failed),
                         "cache_hits": cache.hits, "cache_misses": cache.misses, "cache_writes": cache.writes,
                         "cache": cache.location or "off", **_cache_write_errors(cache),
                         "plan_status": dg.MetadataValue.json({d["plan_status"]: d["count"] for d in statuses if d["plan_status"]}),
                         "tool_steps_by_tool": dg.MetadataValue.json({d["tools"]: d["count"] for d in tool_calls if d["tools"]}),
                         "tool_versions": dg.MetadataValue.json(suite.versions()),
                         **_vlm_metadata(vlm, stats),
                         **_ahead_metadata(ahead),
                     })


def _ahead_metadata(ahead: JudgeAhead | None) -> dict:
    if ahead is None:
        return {"judged_ahead": 0}
    # The judge's calls this step made, by the judge: criterion_scores' rows carry their cost.
    return {"judged_ahead": ahead.n_judgments, "judged_ahead_videos": ahead.n_videos,
            **({"judged_ahead_failed_videos": ahead.n_failed} if ahead.n_failed else {}),
            "judge_ahead": ahead.judge.identity,
            **{k: dg.MetadataValue.json(v) if isinstance(v, dict) else v
               for k, v in ahead.stats.as_metadata("judge_ahead_vlm").items()}}


CRITERION_SCORES_KEY = dg.AssetKey("criterion_scores")


def run_executes(context, key: dg.AssetKey) -> bool:
    """Whether the run of ``context`` materializes ``key``: its asset selection when it has one (a
    launched run), else its steps (an asset's step is its op, named after its key), else its job's."""
    run = context.run
    if run.asset_selection:
        return key in run.asset_selection
    op = key.to_python_identifier()
    if run.step_keys_to_execute is not None:
        return op in run.step_keys_to_execute
    return any(node.name == op for node in context.job_def.graph.nodes)


# Executors that run every step of a run in the run's one process: Dagster's in-process executor (the
# local and gpu environments') and the one of in-process execution (dg.materialize, argus evaluate).
IN_PROCESS_EXECUTORS = {dg.in_process_executor.name, "execute_in_process_executor"}


def _judges_ahead(context, judge: JudgeResource, vlm: VlmResource, tools: ToolsResource,
                  storage: StorageResource, n_videos: int) -> JudgeAhead | None:
    """A :class:`~argus_dagster.method.gather.JudgeAhead` when this run also materializes
    ``criterion_scores`` in this same process, the judge is a VLM and the content cache is on (it
    carries the judgments to that step); else None. Where each step is a process or pod of its own (the
    multiprocess, Celery and Kubernetes executors), the evidence step holds a `gpu` pool slot and the
    judging is left to its own step on a CPU worker."""
    on = (vlm.configured and n_videos > 0 and tools.cache_dir != "off" and judge.identity(vlm).startswith("vlm/")
          and context.job_def.executor_def.name in IN_PROCESS_EXECUTORS
          and run_executes(context, CRITERION_SCORES_KEY))
    if not on:
        return None
    stats = CallStats()
    where = "/".join(task_and_model(context))
    return JudgeAhead(judge.judge(vlm, stats), tools.cache("judgments", storage.storage()), workers=vlm.workers(),
                      n_videos=n_videos, run_id=context.run.run_id, storage=storage.storage(), stats=stats,
                      warn=lambda m: context.log.warning(f"{where}/{m}"))


@dg.asset(backfill_policy=BACKFILL, partitions_def=task_model_partitions, code_version="6", group_name="candidates", kinds={"polars"},
          deps=[judge_config], automation_condition=UP_TO_DATE, metadata=volatile_metadata(CRITERION_SCORES_VOLATILE))
@each_partition
def criterion_scores(context: dg.AssetExecutionContext, criterion_evidence: pl.DataFrame, rubrics: pl.DataFrame,
                     candidate_videos: pl.DataFrame, judge: JudgeResource, vlm: VlmResource,
                     tools: ToolsResource, storage: StorageResource) -> dg.Output[pl.DataFrame]:
    """One row per (video, criterion): the judge's score 0-10 (null when unscored) and rationale.

    Judgments made before (same judge, criterion, evidence and video) come from the cache; the judge
    calls of every video in the partition share one pool sized to the VLM's bound.
    """
    task, model = task_and_model(context)
    stats = CallStats()
    the_judge = judge.judge(vlm, stats)
    cache = tools.cache("judgments", storage.storage())
    rubric_rows = {r["input_id"]: r for r in rubrics.iter_rows(named=True) if not r["error"]}
    videos = {(r["input_id"], r["sample"]): r for r in candidate_videos.iter_rows(named=True)}
    groups = [(k, g) for k, g in criterion_evidence.group_by("input_id", "sample", maintain_order=True)]
    workers = vlm.workers() if vlm.configured else 1
    group_of = {key: video_group() for key, _ in groups}  # the VLM queue serves videos in this order
    claimed: dict[str, object] = {}  # judgments the evidence step made ahead whose cost a row took

    def one(item, calls) -> list[dict]:
        (input_id, sample), ev = item
        rubric = parse_rubric(json.loads(rubric_rows[input_id]["rubric_json"]))  # the input's, for every sample
        video = videos.get((input_id, sample)) or {}
        # Decoded only if this step asks the judge, and then once for all criteria (the evidence
        # stage of this process has usually left the frames in the pool).
        with request_priority(group=group_of[(input_id, sample)]):  # its requests wait together, before later videos
            got, blind = judge_video(rubric, ev.to_dicts(), the_judge, video.get("uri"), video.get("sha256"),
                                     storage.storage(), pool=calls, cache=cache, run_id=context.run.run_id,
                                     claimed=claimed)
        if blind:
            context.log.warning(f"{task}/{model}/{video_label(input_id, sample)}: the judge saw no frames "
                                "(the video cannot be decoded)")
        judged.video_done()
        return [{"task": task, "model": model, "input_id": input_id, "sample": sample, **s} for s in got]

    judged = StageLog(lambda m: context.log.info(f"{task}/{model}: {m}"), "judged", len(groups), "judgments")

    rows = [r for got in judge_each(groups, one, workers=workers) for r in got]
    df = frame(rows, CRITERION_SCORES)
    scored = df.filter(pl.col("score").is_not_null())
    unscored = df.filter(pl.col("score").is_null())
    n_retry = sum(1 for r in rows if r["retry"])
    n_ahead = sum(1 for r in rows if r["judged_ahead"])
    reasons = (unscored.with_columns(pl.col("rationale").str.slice(0, 90)).group_by("rationale").len()
               .sort("len", descending=True).head(8).to_dicts()) if unscored.height else []
    # What produced these scores (resources.fingerprint), on the materialization and on its run.
    fp = fingerprint(judge, vlm, tools)
    fp_id = fingerprint_id(fp)
    context.instance.add_run_tags(context.run.run_id, {FINGERPRINT_TAG: fp_id})
    return dg.Output(df, data_version=content_version(df, CRITERION_SCORES_VOLATILE), metadata={
        "n_criteria": df.height, "n_scored": scored.height, "n_unscored": unscored.height,
        "n_unscored_retryable": n_retry, RETRY_ROUND: retry_round(context, n_retry),
        "mean_score": float(cast(float, scored["score"].mean())) if scored.height else None,
        "judge": the_judge.identity,
        "cache_hits": cache.hits - n_ahead, "cache_misses": cache.misses, "cache_writes": cache.writes,
        # Judgments this run's evidence step made (their calls are in its judge_ahead_vlm_* metadata,
        # their cost on these rows); the vlm_* figures below are this step's own calls.
        "judged_ahead": n_ahead,
        "cache": cache.location or "off", **_cache_write_errors(cache),
        **_vlm_metadata(vlm, stats),
        "unscored_reasons": dg.MetadataValue.md("\n".join(f"- {d['len']} x {d['rationale']}" for d in reasons) or "none"),
        **criterion_delta_metadata(context, df, storage.storage()),
        "fingerprint_id": fp_id, "fingerprint": dg.MetadataValue.json(fp),
    })


@dg.asset(backfill_policy=BACKFILL, partitions_def=task_model_partitions, code_version="4", group_name="candidates", kinds={"polars"},
          deps=[aggregation_config], automation_condition=UP_TO_DATE, metadata=volatile_metadata(VIDEO_SCORES_VOLATILE))
@each_partition
def video_scores(context: dg.AssetExecutionContext, candidate_videos: pl.DataFrame, criterion_scores: pl.DataFrame,
                 scoring: ScoringResource, storage: StorageResource) -> dg.Output[pl.DataFrame]:
    """One row per candidate video (every sample of an input its own): base and final score, alpha,
    caps fired, or the reason it has no score."""
    task, model = task_and_model(context)
    by_video = {k: g for k, g in criterion_scores.group_by("input_id", "sample")}
    rows = []
    for cand in candidate_videos.iter_rows(named=True):
        key = (cand["input_id"], cand["sample"])
        row = {"task": task, "model": model, "input_id": cand["input_id"], "sample": cand["sample"],
               "cap_alpha": scoring.cap_alpha, "caps_fired": [], "n_scored": 0, "n_criteria": 0}
        if cand["error"]:
            row["error"] = cand["error"]
        elif key not in by_video:
            row["error"] = "no criteria: the input's rubric is missing or invalid (see rubrics)"
        else:
            row.update(score_video(by_video[key].to_dicts(), scoring.cap_alpha))
            if row["final_score"] is None:
                row["error"] = "no criterion could be scored"
        rows.append(row)
    df = frame(rows, VIDEO_SCORES)
    finals = df["final_score"].drop_nulls()
    return dg.Output(df, data_version=content_version(df, VIDEO_SCORES_VOLATILE), metadata={
        "n_videos": df.height, "n_scored": finals.len(), "n_errors": df.filter(pl.col("error").is_not_null()).height,
        "mean_final": round(float(cast(float, finals.mean())), 2) if finals.len() else None,  # as a person reads it
        **video_delta_metadata(context, df, storage.storage()),
        "n_caps_fired": int(df["caps_fired"].list.len().gt(0).sum()),
        **cost_metadata(df),
        "scores": dg.MetadataValue.md("\n".join(
            f"- `{video_label(r['input_id'], r['sample'])}`: final {_fmt(r['final_score'])} · {coverage_text(r['n_scored'], r['n_criteria'], r['judge'])}"
            f", base {_fmt(r['base_score'])}, caps {r['caps_fired'] or 'none'}"
            + (f", needs a VLM: {', '.join(r['needs_vlm'])}" if r["needs_vlm"] else "")
            + (f", error: {r['error']}" if r["error"] else "")
            for r in df.iter_rows(named=True))),
    })
