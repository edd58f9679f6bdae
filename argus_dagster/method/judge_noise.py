"""The judge's own noise: a sample of videos judged again K times, and what that spread means for ranks.

``argus evaluate --repeat K`` re-judges every criterion of a sample of each partition's videos K times
(the content cache bypassed, the judge as the profile configures it), and stores each repeat's
criterion scores and the video's final score computed from them (:data:`JUDGE_NOISE`). From that:

- per criterion, the spread of its scores over the repeats (:func:`criterion_spread`);
- per task and model, ``judge_sd``: the pooled within-video standard deviation of the final score over
  the repeats (:func:`final_deviations`); a deterministic judge measures 0.

The leaderboard's bootstrap then resamples inputs and repeats together (each drawn video's score moves
by one of its model's measured deviations, :func:`noise_sums`), and each rank says whether it holds
under the judge's noise alone: the inputs held, the rank of the model's mean stays the same in at
least :data:`HOLDS_SHARE` of draws of the noise (:func:`ranks_hold`).
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable

import numpy as np
import polars as pl

# One row per (video judged again, repeat, criterion); ``final_score``: the video's, from that repeat's rows;
# ``judge``: as ``video_scores`` names it (``vlm <model>``, ``evidence-only``).
JUDGE_NOISE = {"task": pl.String, "model": pl.String, "input_id": pl.String, "sample": pl.String, "repeat": pl.Int64,
               "criterion_id": pl.String, "score": pl.Float64, "judge": pl.String, "final_score": pl.Float64}
# Of the draws of the judge's noise, the share in which a model must keep its rank for it to hold.
HOLDS_SHARE = 0.95
# Draws of the noise for the ranks' check (seeded: reruns say the same).
NOISE_DRAWS = 2000


def sample_videos(keys: list[tuple[str, str]], n: int, salt: str = "") -> list[tuple[str, str]]:
    """``n`` of the videos ``keys`` (``(input_id, sample)``), chosen by a hash of each key (with
    ``salt``, the partition): the same videos on every run, spread over the inputs, in key order."""
    ranked = sorted(keys, key=lambda k: hashlib.sha256(f"{salt}\0{k[0]}\0{k[1]}".encode()).hexdigest())
    chosen = set(ranked[:max(0, n)])
    return [k for k in sorted(keys) if k in chosen]


def repeat_rows(task: str, model: str, input_id: str, sample: str, judge_rows: Callable[[], list[dict[str, Any]]],
                score: Callable[[list[dict[str, Any]]], dict[str, Any]], repeats: int) -> list[dict[str, Any]]:
    """The rows of one video judged ``repeats`` times: ``judge_rows()`` judges every criterion once
    (no cache), ``score`` aggregates one repeat's rows into the video's final score."""
    out = []
    for k in range(repeats):
        rows = judge_rows()
        final = score(rows).get("final_score")
        out += [{"task": task, "model": model, "input_id": input_id, "sample": sample, "repeat": k,
                 "criterion_id": r["criterion_id"], "score": r["score"], "judge": r["judge"],
                 "final_score": final} for r in rows]
    return out


def criterion_spread(noise: pl.DataFrame) -> pl.DataFrame:
    """Per task, model and criterion: ``n_videos`` judged again, ``repeats`` (the largest count) and
    ``sd``, the pooled within-video standard deviation of its score over the repeats."""
    scored = noise.filter(pl.col("score").is_not_null())
    per_video = scored.group_by("task", "model", "criterion_id", "input_id", "sample").agg(
        pl.len().alias("k"), pl.when(pl.col("score").max() == pl.col("score").min()).then(0.0)
        .otherwise(((pl.col("score") - pl.col("score").mean()) ** 2).sum()).alias("ss"))
    return (per_video.filter(pl.col("k") > 1).group_by("task", "model", "criterion_id")
            .agg(pl.len().alias("n_videos"), pl.col("k").max().alias("repeats"),
                 (pl.col("ss").sum() / (pl.col("k") - 1).sum()).sqrt().alias("sd"))
            .sort("task", "model", "criterion_id"))


def final_deviations(noise: pl.DataFrame, task: str, model: str | None = None) -> np.ndarray:
    """The deviations of each re-judged video's final score from its mean over the repeats (scaled by
    sqrt(K / (K - 1)), so that their mean square is the unbiased variance), of ``model`` (every model
    of the task with None); empty where nothing was judged twice."""
    g = noise.filter((pl.col("task") == task) & pl.col("final_score").is_not_null())
    if model is not None:
        g = g.filter(pl.col("model") == model)
    finals = g.unique(["model", "input_id", "sample", "repeat"]).select("model", "input_id", "sample", "final_score")
    out: list[float] = []
    for _, v in finals.group_by("model", "input_id", "sample"):
        x = v["final_score"].to_numpy().astype(float)
        if len(x) > 1:  # the same score every time is no deviation at all (not a rounding error's)
            out += [0.0] * len(x) if np.ptp(x) == 0 else list((x - x.mean()) * np.sqrt(len(x) / (len(x) - 1)))
    return np.asarray(out, dtype=float)


def judge_sd(deviations: np.ndarray) -> float | None:
    """The judge's standard deviation on a video's final score, from :func:`final_deviations`."""
    return float(np.sqrt(np.mean(deviations ** 2))) if len(deviations) else None


def noise_sums(pool: np.ndarray, counts: np.ndarray, draws: int, rng: np.random.Generator) -> np.ndarray:
    """``draws x inputs``: per draw, the sum over each input's ``counts`` videos of one deviation each,
    drawn from ``pool`` (zeros without a pool: no noise measured)."""
    n_inputs = len(counts)
    most = int(counts.max()) if n_inputs else 0
    if not len(pool) or most == 0:
        return np.zeros((draws, n_inputs))
    picked = pool[rng.integers(0, len(pool), size=(draws, n_inputs, most))]
    used = np.arange(most)[None, None, :] < counts[None, :, None]
    return (picked * used).sum(axis=2)


def ranks_hold(sums: np.ndarray, counts: np.ndarray, pools: list[np.ndarray], point_ranks: list[int | None],
               rank_of: Callable[[np.ndarray], np.ndarray], draws: int = NOISE_DRAWS,
               seed: int = 1) -> list[bool | None]:
    """Per model (a row of ``sums``/``counts``, models x inputs): whether its rank holds under the
    judge's noise alone (the inputs as they are, each video's score moved by a deviation from the
    model's ``pools`` entry), i.e. ``rank_of`` the noisy means gives its point rank in at least
    :data:`HOLDS_SHARE` of ``draws``. None for a model without a rank."""
    rng = np.random.default_rng(seed)
    videos = counts.sum(axis=1).astype(int)
    totals = np.empty((draws, sums.shape[0]))  # draws x models: each model's total over all its videos
    for m, pool in enumerate(pools):  # one deviation per video, summed: memory in draws x videos of one model
        moved = pool[rng.integers(0, len(pool), size=(draws, videos[m]))].sum(axis=1) if len(pool) else 0.0
        totals[:, m] = sums[m].sum() + moved
    with np.errstate(invalid="ignore", divide="ignore"):
        means = np.where(videos > 0, totals / np.where(videos > 0, videos, 1), np.nan)
    ranks = rank_of(means)  # draws x models
    out: list[bool | None] = []
    for m, r in enumerate(point_ranks):
        out.append(None if r is None else bool(np.mean(ranks[:, m] == r) >= HOLDS_SHARE))
    return out
