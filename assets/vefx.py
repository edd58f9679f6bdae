"""VEFX-Bench's edit protocol (``argus_dagster/protocols/vefx.py``) as assets: ``vefx_scores`` (task x model)
scores every edited video of TV2V and TSV2V on Instruction Following, Rendering Quality and Edit
Exclusivity (1-4) with the overall (their mean), through the judge's VLM and the content cache
(namespace ``vefx``); ``vefx_leaderboard`` ranks the models per task and dimension. They run only when
asked (``argus evaluate --protocol vefx``, or the UI): the default evaluation does not touch them.
"""

from typing import cast

import dagster as dg
import polars as pl

from argus_dagster.assets.versions import content_version, volatile_metadata
from argus_dagster.infra.media import JUDGE_POLICY, MediaError, file_digest
from argus_dagster.infra.tables import COSTS, frame
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.gather import each, video_label
from argus_dagster.method.inputs import InputInstance
from argus_dagster.protocols import vefx
from argus_dagster.resources.bench import BenchResource
from argus_dagster.resources.storage import StorageResource
from argus_dagster.resources.tools import ToolsResource
from argus_dagster.resources.vlm import VlmResource
from argus_dagster.vlm.ledger import CallStats, cost_ledger
from argus_dagster.vlm.priorities import STAGE_JUDGMENTS

from .candidates import _cache_write_errors, _vlm_metadata
from .partitions import task_and_model, task_model_partitions

S, F, I = pl.String, pl.Float64, pl.Int64
VEFX_SCORES = {"task": S, "model": S, "input_id": S, "sample": S,
               **{f"{s}_{c}": t for s in ("if", "rq", "ee") for c, t in (("score", I), ("evidence", S), ("reason", S))},
               "overall": F, "overall_reason": S, "judge": S, **COSTS}


# What each asset's data version leaves out (assets.versions): what a video's judgment cost in
# this run (the cost ledger's vefx stage); none of the leaderboard's columns.
VEFX_SCORES_VOLATILE: tuple[str, ...] = tuple(COSTS)
VEFX_LEADERBOARD_VOLATILE: tuple[str, ...] = ()


def _job(inst: InputInstance, cand: dict, storage) -> vefx.EditJob:
    """The edit's labelled frames (source video, subject image for TSV2V, output) as the judge sees them."""
    uris = {"output_video": cand["uri"], **{k: v for k, v in inst.condition_media.items()
                                            if k in ("source_video", "subject_image")}}
    digests = {"output_video": cand["sha256"], **{k: file_digest(v, storage) for k, v in uris.items() if k != "output_video"}}
    store = MediaStore(uris, digests, storage=storage)
    return vefx.EditJob(inst.id, inst.prompt, {k: store.frames(k, JUDGE_POLICY) for k in uris}, digests)


@dg.asset(partitions_def=task_model_partitions, code_version="1", group_name="vefx", kinds={"polars"},
          metadata=volatile_metadata(VEFX_SCORES_VOLATILE))
def vefx_scores(context: dg.AssetExecutionContext, candidate_videos: pl.DataFrame, input_instances: pl.DataFrame,
                vlm: VlmResource, tools: ToolsResource, storage: StorageResource) -> dg.Output[pl.DataFrame]:
    """One row per edited video: IF, RQ and EE on VEFX's 1-4 rubrics with the judge's evidence, the
    overall (their mean), or per dimension the reason it has no score. A video that fails (its media,
    a call) gets the reason on its row and the rest proceed; tasks other than TV2V and TSV2V have no
    source video to judge an edit against, and their rows say so."""
    task, model = task_and_model(context)
    inputs = {r["input_id"]: r for r in input_instances.iter_rows(named=True)}
    stats, cache = CallStats(), tools.cache("vefx", storage.storage())
    judge = vefx.VefxJudge(vlm.client(), cache=cache, stats=stats, parse_retries=vlm.parse_retries) \
        if vlm.configured else None
    todo, rows = [], []
    for cand in candidate_videos.iter_rows(named=True):
        base = {"task": task, "model": model, "sample": cand["sample"]}
        inp = inputs.get(cand["input_id"])
        why = (cand["error"] or (f"input invalid: {inp['error']}" if inp and inp["error"] else None)
               or ("input invalid: not in the task" if inp is None else None))
        if why is None and task not in vefx.TASKS:
            why = f"VEFX-Bench's protocol judges edits against their source video (TV2V, TSV2V); {task} has none"
        if why is None and judge is None:
            why = "VEFX's rubric judgments need a VLM (ARGUS_VLM_BASE_URL and ARGUS_VLM_MODEL); none is configured"
        if why is not None:
            rows.append({**base, **vefx.unscored_row(cand["input_id"], why)})
        else:
            assert inp is not None  # else why says "not in the task"
            todo.append((base, InputInstance.from_row(inp), cand))

    def one(item):
        base, inst, cand = item
        try:
            job = _job(inst, cand, storage.storage())
        except (MediaError, OSError) as exc:
            return {**base, **vefx.unscored_row(inst.id, f"media: {exc} (fix the file)")}
        with cost_ledger() as spent:  # the video's judgments (none taken from the cache): its row's cost
            judged = judge.evaluate(job)
        return {**base, **vefx.score_row(inst.id, judged), **spent.costs(), "judge": f"{judge.client.backend}:"
                f"{judge.client.model} ({vefx.PROMPT_VERSION})"}

    if todo:
        rows += each(todo, one, workers=max(1, vlm.workers()), stage=STAGE_JUDGMENTS)
    df = frame(rows, VEFX_SCORES).sort("input_id", "sample")
    for r in df.filter(pl.col("overall").is_null()).head(5).iter_rows(named=True):
        context.log.warning(f"{task}/{model}/{video_label(r['input_id'], r['sample'])}: {r['overall_reason']}: "
                            f"{r['if_reason'] or r['rq_reason'] or r['ee_reason']}")
    means = {f"mean_{s}": (float(cast(float, df[f"{s}_score"].mean())) if df[f"{s}_score"].drop_nulls().len() else None)
             for s in ("if", "rq", "ee")}
    return dg.Output(df, data_version=content_version(df, VEFX_SCORES_VOLATILE), metadata={
        "n_videos": df.height, "n_scored": df["overall"].drop_nulls().len(), **means,
        "mean_overall": float(cast(float, df["overall"].mean())) if df["overall"].drop_nulls().len() else None,
        "cache_hits": cache.hits, "cache_misses": cache.misses, **_cache_write_errors(cache),
        **_vlm_metadata(vlm, stats)})


@dg.asset_check(asset=vefx_scores, partitions_def=task_model_partitions,
                description="Every score is an integer 1-4 or null with a reason; the overall is the mean of "
                            "IF, RQ and EE, null unless all three are scored.")
def vefx_scores_valid(vefx_scores: pl.DataFrame) -> dg.AssetCheckResult:
    problems = [f"`{video_label(r['input_id'], r['sample'])}` {p}" for r in vefx_scores.iter_rows(named=True)
                for p in vefx.row_problems(r)]
    return dg.AssetCheckResult(passed=not problems, metadata={
        "n_videos": vefx_scores.height, "n_problems": len(problems),
        "problems": dg.MetadataValue.md("\n".join(f"- {p}" for p in problems[:20]) or "none")})


@dg.asset(code_version="1", group_name="vefx", kinds={"polars"}, metadata=volatile_metadata(VEFX_LEADERBOARD_VOLATILE),
          ins={"vefx_scores": dg.AssetIn(metadata={"allow_missing_partitions": True})})
def vefx_leaderboard(context: dg.AssetExecutionContext, vefx_scores: dict[str, pl.DataFrame], bench: BenchResource,
                     storage: StorageResource) -> dg.Output[pl.DataFrame]:
    """Per task, model and dimension (IF, RQ, EE, overall): the mean 1-4 score with a bootstrap 95%
    interval and how many videos it covers, best first (the site shows it in the overview's VEFX-Bench section)."""
    parts = [df for df in vefx_scores.values() if df is not None and df.height]
    scores = pl.concat(parts, how="diagonal_relaxed") if parts else frame([], VEFX_SCORES)
    lb = vefx.leaderboard(scores.filter(pl.col("task").is_in(list(vefx.TASKS))))
    return dg.Output(lb, data_version=content_version(lb, VEFX_LEADERBOARD_VOLATILE), metadata={
        "n_partitions": len(parts), "n_rows": lb.height,
        "leaderboard": dg.MetadataValue.md("```\n" + vefx.format_leaderboard(lb) + "\n```")})


VEFX_CANDIDATE_ASSETS = [vefx_scores]
VEFX_CHECKS = [vefx_scores_valid]
