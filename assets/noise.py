"""The ``judge_noise`` asset: a sample of each partition's videos judged again K times, bypassing the
content cache (:mod:`argus_dagster.method.judge_noise`).

Run when asked (``argus evaluate --repeat K``, or materialized in the UI with its config): no automation
condition requests it. The leaderboard reads it to say how much of a difference is the judge's own
noise (``judge_sd``, ``rank_holds_under_noise``) and to resample repeats with inputs.
"""

import json
from typing import cast

import dagster as dg
import polars as pl

from argus_dagster.assets.versions import content_version, volatile_metadata
from argus_dagster.infra.tables import frame
from argus_dagster.method.gather import judge_each
from argus_dagster.method.judge_noise import JUDGE_NOISE, criterion_spread, final_deviations, judge_sd, repeat_rows, sample_videos
from argus_dagster.method.rubric.schema import parse_rubric
from argus_dagster.method.stages import judge_label, judge_video, score_video
from argus_dagster.resources.judging import JudgeResource, ScoringResource
from argus_dagster.resources.storage import StorageResource
from argus_dagster.resources.vlm import VlmResource
from argus_dagster.vlm.ledger import CallStats

from .candidates import _vlm_metadata
from .partitions import BACKFILL, each_partition, task_and_model, task_model_partitions
from .sources import aggregation_config, judge_config


class JudgeNoiseConfig(dg.Config):
    """``repeat``: how many times each sampled video's criteria are judged (at least 2); ``videos``:
    how many videos of each partition are sampled (all of them where there are fewer)."""

    repeat: int = 3
    videos: int = 8


# The repeats' data version is of their scores; nothing is left out.
JUDGE_NOISE_VOLATILE: tuple[str, ...] = ()


@dg.asset(backfill_policy=BACKFILL, partitions_def=task_model_partitions, code_version="1", group_name="candidates",
          kinds={"polars"}, deps=[judge_config, aggregation_config], metadata=volatile_metadata(JUDGE_NOISE_VOLATILE))
@each_partition
def judge_noise(context: dg.AssetExecutionContext, config: JudgeNoiseConfig, criterion_evidence: pl.DataFrame,
                rubrics: pl.DataFrame, candidate_videos: pl.DataFrame, judge: JudgeResource, vlm: VlmResource,
                scoring: ScoringResource, storage: StorageResource) -> dg.Output[pl.DataFrame]:
    """One row per (sampled video, repeat, criterion): the score of that repeat's judgment (asked
    again, never from the cache) and the video's final score from that repeat's scores."""
    if config.repeat < 2:
        raise dg.Failure(f"judge_noise: repeat must be at least 2 to measure a spread (got {config.repeat})")
    task, model = task_and_model(context)
    stats = CallStats()
    the_judge = judge.judge(vlm, stats)
    rubric_rows = {r["input_id"]: r for r in rubrics.iter_rows(named=True) if not r["error"]}
    videos = {(r["input_id"], r["sample"]): r for r in candidate_videos.iter_rows(named=True) if not r["error"]}
    evidence = {k: g for k, g in criterion_evidence.group_by("input_id", "sample")}
    keys = [k for k in videos if k in evidence and k[0] in rubric_rows]
    chosen = sample_videos(keys, config.videos, salt=f"{task}|{model}")
    workers = vlm.workers() if vlm.configured else 1
    errors: list[str] = []

    def one(key: tuple[str, str], calls) -> list[dict]:
        input_id, sample = key
        rubric = parse_rubric(json.loads(rubric_rows[input_id]["rubric_json"]))
        video = videos[key]

        def judged() -> list[dict]:
            got, _ = judge_video(rubric, evidence[key].to_dicts(), the_judge, video.get("uri"), video.get("sha256"),
                                 storage.storage(), pool=calls, cache=None)
            return [{**r, "judge": judge_label(r["judge"])} for r in got]

        try:
            return repeat_rows(task, model, input_id, sample, judged, lambda rows: score_video(rows, scoring.cap_alpha),
                               config.repeat)
        except Exception as exc:  # one video that cannot be judged again is said; the others stand
            errors.append(f"{input_id}/{sample}: {type(exc).__name__}: {exc}")
            return []

    rows = [r for got in judge_each(chosen, one, workers=workers) for r in got]
    df = frame(rows, JUDGE_NOISE)
    spread = criterion_spread(df)
    sd = judge_sd(final_deviations(df, task, model))
    widest = spread.sort("sd", descending=True).head(10)
    return dg.Output(df, data_version=content_version(df, JUDGE_NOISE_VOLATILE), metadata={
        "repeat": config.repeat, "n_videos": len(chosen), "n_videos_available": len(keys),
        "n_judgments": df.height, "judge": the_judge.identity,
        "judge_sd": None if sd is None else round(sd, 3),
        "mean_criterion_sd": (round(float(cast(float, spread["sd"].mean())), 3) if spread.height else None),
        "widest_criteria": dg.MetadataValue.md("\n".join(
            f"- `{r['criterion_id']}`: sd {r['sd']:.2f} over {r['n_videos']} videos x {r['repeats']} repeats"
            for r in widest.iter_rows(named=True)) or "none judged twice"),
        **({"errors": dg.MetadataValue.md("\n".join(f"- {e}" for e in errors))} if errors else {}),
        **_vlm_metadata(vlm, stats),
    })
