"""Controls (:mod:`argus_dagster.method.controls`): the ``control_scores`` asset scores control candidates
made from a sample of each task x model partition's videos (played backwards, frozen, shuffled, another
input's video, an edit's unedited source) like any candidate; the ``controls`` asset sums them per task
and kind, and one asset check per task says what this evaluator cannot tell apart.

Run when asked (``argus evaluate --controls N``, the demo, or the UI with its config): no automation
condition requests them. The overview shows the table beside the leaderboard.
"""

import json
import os
import tempfile
from typing import Any

import dagster as dg
import polars as pl

from argus_dagster.assets.versions import content_version, volatile_metadata
from argus_dagster.infra.media import VideoReader, file_digest, write_video
from argus_dagster.infra.names import file_name, sample_file_name
from argus_dagster.infra.storage import join
from argus_dagster.infra.tables import frame
from argus_dagster.method.controls import (
    CAUGHT_BY,
    CONTROL_SCORES,
    MAX_FRAMES,
    caught_criteria,
    control_frames,
    controls_sentence,
    kinds_for,
    same_frames,
    seed_of,
    summarize,
    swap_partner,
)
from argus_dagster.method.evidence.tools.registry import ToolSuite
from argus_dagster.method.evidence.tools.vlm_qa import VlmQa
from argus_dagster.method.gather import Video, each, gather_evidence, judge_each
from argus_dagster.method.inputs import ALL_TASKS, InputInstance
from argus_dagster.method.judge_noise import sample_videos
from argus_dagster.method.rubric.schema import parse_rubric
from argus_dagster.method.stages import judge_label, judge_video, score_video
from argus_dagster.resources.bench import BenchResource
from argus_dagster.resources.judging import JudgeResource, ScoringResource
from argus_dagster.resources.storage import StorageResource
from argus_dagster.resources.tools import ToolsResource
from argus_dagster.resources.vlm import VlmResource
from argus_dagster.vlm.ledger import CallStats

from .candidates import _vlm_metadata
from .partitions import BACKFILL, each_partition, task_and_model, task_model_partitions
from .sources import aggregation_config, judge_config, tool_suite_config


class NotAControl(ValueError):
    """A control that would be its original again (a frozen video frozen, an edit that is its source)."""


class ControlsConfig(dg.Config):
    """``videos``: how many scored videos of each partition get controls (all where there are fewer)."""

    videos: int = 2


# The control files' paths move with where the evaluation lives; what was scored (their content,
# ``sha256``) does not, and counts.
CONTROL_SCORES_VOLATILE = ("uri",)
CONTROLS_VOLATILE: tuple[str, ...] = ()


def _frames_of(uri: str, store) -> tuple:
    reader = VideoReader(uri, storage=store)
    try:
        n = min(reader.info.n_frames, MAX_FRAMES)
        return reader.get(list(range(n))), reader.info.fps
    finally:
        reader.close()


@dg.asset(backfill_policy=BACKFILL, partitions_def=task_model_partitions, code_version="2", group_name="controls",
          kinds={"polars"}, deps=[tool_suite_config, judge_config, aggregation_config],
          metadata=volatile_metadata(CONTROL_SCORES_VOLATILE))
@each_partition
def control_scores(context: dg.AssetExecutionContext, config: ControlsConfig, video_scores: pl.DataFrame,
                   criterion_scores: pl.DataFrame, candidate_videos: pl.DataFrame, rubrics: pl.DataFrame,
                   input_instances: pl.DataFrame, tools: ToolsResource, judge: JudgeResource, vlm: VlmResource,
                   scoring: ScoringResource, bench: BenchResource, storage: StorageResource) -> dg.Output[pl.DataFrame]:
    """One row per control of a sampled video: the original's final score and the control's, scored
    like any candidate against the input's frozen rubric (evidence, judge, aggregation; the content
    cache answers what was computed before), whether it scored lower and which criteria fell."""
    task, model = task_and_model(context)
    store = storage.storage()
    suite, stats = tools.suite(), CallStats()
    if vlm.configured:  # vlm_qa answers on the configured VLM, as for any candidate
        suite = ToolSuite({**suite.tools, "vlm_qa": VlmQa(vlm.client(), stats=stats, parse_retries=vlm.parse_retries)})
    the_judge = judge.judge(vlm, stats)
    evidence_cache, judgment_cache = tools.cache("evidence", store), tools.cache("judgments", store)
    inputs = {r["input_id"]: InputInstance.from_row(r) for r in input_instances.iter_rows(named=True) if not r["error"]}
    rubric_rows = {r["input_id"]: r for r in rubrics.iter_rows(named=True) if not r["error"]}
    videos = {(r["input_id"], r["sample"]): r for r in candidate_videos.iter_rows(named=True) if not r["error"]}
    finals = {(r["input_id"], r["sample"]): r["final_score"] for r in video_scores.iter_rows(named=True)
              if r["final_score"] is not None}
    crit = {k: g.to_dicts() for k, g in criterion_scores.group_by("input_id", "sample")}
    keys = [k for k in finals if k in videos and k[0] in rubric_rows and k[0] in inputs]
    chosen = sample_videos(keys, config.videos, salt=f"{task}|{model}|controls")
    root = str(bench.reports_path()).rstrip("/").rsplit("/", 1)[0]  # the evaluation's folder
    kinds = kinds_for(task)

    def made(key: tuple[str, str], kind: str) -> str:
        """The control's video: a file made from the original's frames, or one that already exists."""
        input_id, sample = key
        if kind == "prompt_swap":
            partner = swap_partner([k[0] for k in videos], input_id)
            if partner is None:
                raise ValueError("the model has one input: no other input's video to swap in")
            other = next(v for k, v in sorted(videos.items()) if k[0] == partner)
            if other["sha256"] == videos[key]["sha256"]:
                raise NotAControl(f"input {partner}'s video is the same file")
            return other["uri"]
        if kind == "source":
            if not inputs[input_id].source_video:
                raise ValueError(f"{task} input {input_id} has no source video")
            source = str(inputs[input_id].source_video)
            if file_digest(source, store) == videos[key]["sha256"]:
                raise NotAControl("the video is its source, unedited")
            return source
        frames, fps = _frames_of(videos[key]["uri"], store)
        out = control_frames(kind, frames, seed_of(task, model, input_id, sample))
        if same_frames(out, frames):  # a frozen video frozen, a still one shuffled: nothing to tell apart
            raise NotAControl(f"{kind}, its frames are the original's")
        dest = join(root, "controls", task, file_name(model), kind, sample_file_name(input_id, sample) + ".mp4")
        fd, tmp = tempfile.mkstemp(suffix=".mp4")
        os.close(fd)
        try:
            write_video(tmp, out, fps)
            with open(tmp, "rb") as f:
                store.write_bytes(dest, f.read())
        finally:
            os.unlink(tmp)
        return str(dest)

    work = [(key, kind) for key in chosen for kind in kinds]
    by_item = {item: {"task": task, "model": model, "input_id": item[0][0], "sample": item[0][1], "control": item[1],
                   "original_score": finals[item[0]], "criteria": []} for item in work}

    def failed(item: tuple[tuple[str, str], str], exc: Exception) -> None:
        if isinstance(exc, NotAControl):  # the same video again: not counted
            by_item[item]["error"] = f"not a control: {exc}"
            return
        by_item[item]["error"] = f"{type(exc).__name__}: {exc}"  # one control that cannot be made or scored is said
        context.log.warning(f"{task}/{model}/{item[0][0]}: control {item[1]}: {by_item[item]['error']}")

    def make(item: tuple[tuple[str, str], str]) -> Video | None:
        key, kind = item
        try:
            uri = made(key, kind)
            by_item[item]["uri"] = uri
            by_item[item]["sha256"] = sha = file_digest(uri, store)
            rubric = parse_rubric(json.loads(rubric_rows[key[0]]["rubric_json"]))
        except Exception as exc:
            failed(item, exc)
            return None
        return Video(inputs[key[0]], rubric, uri, sha, key[1], row={"control": kind})

    def item_of(video: Video) -> Any:
        return (video.inst.id, video.sample), video.row["control"]  # the (key, kind) it was made for

    # The domain's loops, as for any candidate: the controls made, their evidence, their judgments.
    cpus, slots = os.cpu_count() or 1, (vlm.workers() if vlm.configured else 0)
    controls_made = [v for v in each(work, make, workers=cpus + slots) if v is not None]
    evidence: dict[tuple[tuple[str, str], str], list[dict]] = {}
    gather_evidence(controls_made, suite, web_search=tools.web_search, vlm_only=tools.vlm_only, cache=evidence_cache,
                    storage=store, workers=cpus + slots,
                    on_video=lambda v, got: evidence.__setitem__(item_of(v), got))

    def judged(video: Video, calls) -> None:
        item = item_of(video)
        row = by_item[item]
        try:
            got, _ = judge_video(video.rubric, evidence[item], the_judge, video.uri, video.sha256, store,
                                 pool=calls, cache=judgment_cache)
            score = score_video(got, scoring.cap_alpha)
        except Exception as exc:
            failed(item, exc)
            return
        row["judge"] = score.get("judge")
        row["control_score"] = score["final_score"]
        if score["final_score"] is None:
            row["error"] = "no criterion of the control could be scored"
        else:
            row["caught"] = score["final_score"] <= finals[item[0]] - CAUGHT_BY
            row["criteria"] = caught_criteria(crit.get(item[0], []), got)

    judge_each(controls_made, judged, workers=max(1, slots))
    rows = [by_item[item] for item in work]
    df = frame(rows, CONTROL_SCORES)
    table = summarize(df)
    return dg.Output(df, data_version=content_version(df, CONTROL_SCORES_VOLATILE), metadata={
        "n_videos": len(chosen), "n_controls": df.height,
        "n_errors": df.filter(pl.col("error").is_not_null() & ~pl.col("error").str.starts_with("not a control")).height,
        "n_not_controls": df.filter(pl.col("error").str.starts_with("not a control")).height,
        "judge": judge_label(the_judge.identity),
        "caught": dg.MetadataValue.md("\n".join(
            f"- {r['control']}: {r['caught_share']:.0%} of {r['n']}" + (f" (by {r['criteria']})" if r["criteria"] else "")
            for r in table.iter_rows(named=True)) or "none scored"),
        **_vlm_metadata(vlm, stats),
    })


@dg.asset(code_version="1", group_name="controls", kinds={"polars"}, metadata=volatile_metadata(CONTROLS_VOLATILE),
          ins={"control_scores": dg.AssetIn(metadata={"allow_missing_partitions": True})})
def controls(context: dg.AssetExecutionContext, control_scores: dict[str, pl.DataFrame]) -> dg.Output[pl.DataFrame]:
    """Per task and control kind: how many controls were scored, the share that scored below their
    original, and the criteria that caught them most often (``argus export controls``)."""
    frames = [df for df in control_scores.values() if df is not None and df.height]
    rows = pl.concat(frames, how="diagonal_relaxed") if frames else frame([], CONTROL_SCORES)
    table = summarize(rows)
    return dg.Output(table, data_version=content_version(table, CONTROLS_VOLATILE), metadata={
        "n_partitions": len(frames), "n_rows": table.height,
        **{f"sentence_{task}": s for task in sorted(set(table["task"].to_list()))
           if (s := controls_sentence(table.filter(pl.col("task") == task)))},
    })


def _task_check(task: str) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=controls, name=f"tells_controls_apart_{task}",
                    description=f"{task}: per control kind, how often the control scored below its original; "
                                "a kind caught on fewer than half of its controls is one this evaluator cannot see.")
    def check(controls: pl.DataFrame) -> dg.AssetCheckResult:
        rows = controls.filter(pl.col("task") == task)
        missed = [r["control"] for r in rows.iter_rows(named=True) if r["caught_share"] < 0.5]
        sentence = controls_sentence(rows)
        return dg.AssetCheckResult(passed=not missed, severity=dg.AssetCheckSeverity.WARN, metadata={
            "n_kinds": rows.height, "not_caught": ", ".join(missed) or "none",
            "sentence": sentence or f"no control of {task} scored",
            "table": dg.MetadataValue.md("| control | n | caught | criteria |\n|---|---|---|---|\n" + "\n".join(
                f"| {r['control']} | {r['n']} | {r['caught_share']:.0%} | {r['criteria'] or '-'} |"
                for r in rows.iter_rows(named=True)))})

    return check


CONTROL_CHECKS = [_task_check(task) for task in ALL_TASKS]
