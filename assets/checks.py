"""Asset checks: the invariants the method relies on, per partition.

* ``rubrics_follow_the_rules``: every rubric validates, its stored hash is its content's, hard
  criteria carry a cap of 2/4/6, soft ones none, and the input-gated post-processing (method §4) has
  nothing left to change; more than two hard criteria is a warning.
* ``scores_in_range``: every criterion score is in 0-10 (a VLM judge's a whole number), or null with a reason.
* ``every_candidate_scored_or_explained``: every candidate has a final score in 0-10 or an error.
* ``leaderboard_covers_partitions``: every materialized ``video_scores`` partition with videos is on
  the leaderboard.
"""


import json
import warnings

import dagster as dg
import polars as pl

from argus_dagster.method.gather import video_label
from argus_dagster.method.rubric.postprocess import postprocess
from argus_dagster.method.rubric.schema import RubricError, parse_rubric
from argus_dagster.records.lineage import latest_record

from .candidates import criterion_scores, video_scores
from .inputs import rubrics
from .leaderboard import leaderboard
from .partitions import tables_by_partition, task_model_partitions, task_partitions

MAX_LISTED = 20
# Partitioned checks run with the assets they guard: per partition, or once over the partitions of a
# run of many (their tables come as {partition: table}); Dagster marks them preview.
warnings.filterwarnings("ignore", category=dg.PreviewWarning, message="Specifying a partitions_def on an AssetCheckSpec")


def _where(partition: str, problem: str) -> str:
    """A problem as listed: prefixed by its partition in a run of many."""
    return f"{partition}: {problem}" if partition else problem


def _listing(problems: list[str]) -> dg.MetadataValue:
    more = f"\n- … and {len(problems) - MAX_LISTED} more" if len(problems) > MAX_LISTED else ""
    return dg.MetadataValue.md("\n".join(f"- {p}" for p in problems[:MAX_LISTED]) + more if problems else "none")


def rubric_problems(row: dict, has_subject: bool, has_source: bool) -> tuple[list[str], list[str]]:
    """(errors, warnings) of one ``rubrics`` row."""
    iid = row["input_id"]
    if row["error"]:
        return [f"`{iid}`: does not validate: {row['error']}"], []
    try:
        rubric = parse_rubric(json.loads(row["rubric_json"]))
    except (RubricError, json.JSONDecodeError) as exc:
        return [f"`{iid}`: stored rubric does not validate: {exc}"], []
    errors, warnings = [], []
    if rubric.content_hash() != row["rubric_hash"]:
        errors.append(f"`{iid}`: stored hash {row['rubric_hash'][:12]} is not the content's {rubric.content_hash()[:12]}")
    for c in rubric.criteria:
        if c.type == "hard" and c.hard_cap is None:
            errors.append(f"`{iid}` criterion `{c.id}`: hard without a hard_cap (2, 4 or 6): it can never cap")
        if c.type == "soft" and c.hard_cap is not None:
            errors.append(f"`{iid}` criterion `{c.id}`: soft with hard_cap {c.hard_cap}: caps apply to hard criteria only")
    _, log = postprocess(rubric, has_subject=has_subject, has_source=has_source)
    errors += [f"`{iid}`: post-processing would still change {line}" for line in log]
    n_hard = sum(c.type == "hard" for c in rubric.criteria)
    if n_hard > 2:
        warnings.append(f"`{iid}`: {n_hard} hard criteria (the method allows one or two)")
    return errors, warnings


@dg.asset_check(asset=rubrics, partitions_def=task_partitions, additional_ins={"input_instances": dg.AssetIn()},
                description="Every rubric validates and follows the hard-criterion and cap rules (method §3-4).")
def rubrics_follow_the_rules(rubrics, input_instances) -> dg.AssetCheckResult:
    errors, warnings, n = [], [], 0
    ins = tables_by_partition(input_instances)
    for part, table in tables_by_partition(rubrics).items():
        inputs = {r["input_id"]: r for r in ins[part].iter_rows(named=True)}
        n += table.height
        for row in table.iter_rows(named=True):
            inp = inputs.get(row["input_id"]) or {}
            e, w = rubric_problems(row, has_subject=bool(inp.get("subject_images")), has_source=bool(inp.get("source_video")))
            errors += [_where(part, x) for x in e]
            warnings += [_where(part, x) for x in w]
    severity = dg.AssetCheckSeverity.ERROR if errors else dg.AssetCheckSeverity.WARN
    return dg.AssetCheckResult(passed=not errors and not warnings, severity=severity, metadata={
        "n_rubrics": n, "n_errors": len(errors), "n_warnings": len(warnings),
        "errors": _listing(errors), "warnings": _listing(warnings)})


@dg.asset_check(asset=criterion_scores, partitions_def=task_model_partitions,
                description="Every criterion score is in 0-10 (a VLM judge's a whole number), or null with a reason.")
def scores_in_range(criterion_scores) -> dg.AssetCheckResult:
    problems, n, n_out, n_no_reason = [], 0, 0, 0
    for part, df in tables_by_partition(criterion_scores).items():
        out_of_range = df.filter(pl.col("score").is_not_null() & ~pl.col("score").is_between(0, 10))
        fractional_vlm = df.filter(pl.col("judge").str.starts_with("vlm/") & (pl.col("score") != pl.col("score").round(0)))
        problems += [_where(part, f"`{video_label(r['input_id'], r['sample'])}` `{r['criterion_id']}`: the VLM judge's "
                                  f"score {r['score']} is not a whole number")
                     for r in fractional_vlm.iter_rows(named=True)]
        n_out += fractional_vlm.height
        no_reason = df.filter(pl.col("score").is_null()
                              & (pl.col("rationale").is_null() | (pl.col("rationale").str.strip_chars() == "")))
        problems += [_where(part, f"`{video_label(r['input_id'], r['sample'])}` `{r['criterion_id']}`: score {r['score']} outside 0-10")
                     for r in out_of_range.iter_rows(named=True)]
        problems += [_where(part, f"`{video_label(r['input_id'], r['sample'])}` `{r['criterion_id']}`: unscored without a reason")
                     for r in no_reason.iter_rows(named=True)]
        n, n_out, n_no_reason = n + df.height, n_out + out_of_range.height, n_no_reason + no_reason.height
    return dg.AssetCheckResult(passed=not problems, metadata={
        "n_criteria": n, "n_out_of_range": n_out, "n_unscored_without_reason": n_no_reason,
        "problems": _listing(problems)})


@dg.asset_check(asset=video_scores, partitions_def=task_model_partitions,
                additional_ins={"candidate_videos": dg.AssetIn()},
                description="Every candidate video (each sample) has a final score in 0-10 or a recorded error.")
def every_candidate_scored_or_explained(video_scores, candidate_videos) -> dg.AssetCheckResult:
    problems, n = [], 0
    cands = tables_by_partition(candidate_videos)
    for part, table in tables_by_partition(video_scores).items():
        scored = {(r["input_id"], r["sample"]): r for r in table.iter_rows(named=True)}
        n += cands[part].height
        for cand in cands[part].iter_rows(named=True):
            r = scored.get((cand["input_id"], cand["sample"]))
            name = video_label(cand["input_id"], cand["sample"])
            if r is None:
                problems.append(_where(part, f"`{name}`: no row in video_scores"))
            elif r["final_score"] is None and not (r["error"] or "").strip():
                problems.append(_where(part, f"`{name}`: neither a final score nor an error"))
            elif r["final_score"] is not None and not 0.0 <= r["final_score"] <= 10.0:
                problems.append(_where(part, f"`{name}`: final score {r['final_score']:.3f} outside 0-10"))
    return dg.AssetCheckResult(passed=not problems, metadata={
        "n_candidates": n, "n_problems": len(problems), "problems": _listing(problems)})


@dg.asset_check(asset=leaderboard, description="Every materialized video_scores partition with videos is ranked.")
def leaderboard_covers_partitions(context: dg.AssetCheckExecutionContext, leaderboard: pl.DataFrame) -> dg.AssetCheckResult:
    instance = context.instance
    ranked = {(r["task"], r["model"]) for r in leaderboard.iter_rows(named=True)}
    missing = []
    materialized = sorted(instance.get_materialized_partitions(video_scores.key) or ())
    for key in materialized:
        mk = task_model_partitions.get_partition_key_from_str(key)
        task, model = mk.keys_by_dimension["task"], mk.keys_by_dimension["model"]
        if (task, model) in ranked:
            continue
        record = latest_record(instance, "video_scores", key)
        n = record.asset_materialization.metadata.get("n_videos") if record else None
        if n is None or n.value:  # an empty partition (a task without inputs) has nothing to rank
            missing.append(f"{task} x {model}")
    return dg.AssetCheckResult(passed=not missing, metadata={
        "n_partitions": len(materialized), "n_ranked": len(ranked), "missing": _listing(missing)})


ALL_CHECKS = [rubrics_follow_the_rules, scores_in_range, every_candidate_scored_or_explained,
              leaderboard_covers_partitions]
