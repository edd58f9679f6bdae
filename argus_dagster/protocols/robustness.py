"""Backbone robustness (method §9): one bench scored by two or more evaluator profiles (other rubric
generators or judges, or ``vlm-only``), and how much of the verdict survives the change.

For every task and every pair of profiles:

- **rank agreement** of the model leaderboards: Kendall's tau-b and Spearman between the models' mean
  final scores, and whether both name the same best model (top-1). The means are taken over the videos
  *both* profiles scored, so a video one profile failed on does not move a model by itself.
- **criterion agreement**: for each criterion (same ``criterion_id``: profiles that share the rubric,
  such as two judges or ``vlm-only``) or each of the 22 dimensions (``key="dimension"``: the mean of a
  video's criteria of that dimension, for profiles whose rubrics differ), the mean absolute difference
  of the 0-10 scores and the share within one point, and the same over all of them (``(all)``). A
  video is an input and a sample: both comparisons pair a sample's scores with the same sample's.
- **movers**: each model's rank under both profiles and the change, largest first.

Rank correlations are :mod:`argus_dagster.protocols.alignment.metrics`'s (average ranks, tau-b).
"""

from __future__ import annotations

import math
from itertools import combinations
from pathlib import Path
from typing import cast

import polars as pl

from argus_dagster.infra.tables import stored_table
from argus_dagster.protocols.alignment.metrics import kendall_tau_b, spearman

RANK_SCHEMA = {"task": pl.String, "profile_a": pl.String, "profile_b": pl.String, "n_models": pl.Int64,
               "n_videos": pl.Int64, "kendall_tau": pl.Float64, "spearman": pl.Float64, "top1_a": pl.String,
               "top1_b": pl.String, "top1_agree": pl.Boolean}
MOVES_SCHEMA = {"task": pl.String, "profile_a": pl.String, "profile_b": pl.String, "model": pl.String,
                "mean_a": pl.Float64, "mean_b": pl.Float64, "rank_a": pl.Int64, "rank_b": pl.Int64,
                "rank_change": pl.Int64}
CRITERION_SCHEMA = {"task": pl.String, "profile_a": pl.String, "profile_b": pl.String, "key": pl.String,
                    "criterion": pl.String, "n_pairs": pl.Int64, "mean_abs_diff": pl.Float64, "within_1": pl.Float64}
ALL = "(all)"


def _ranks(means: dict[str, float]) -> dict[str, int]:
    """Ordinal ranks, 1 = best, equal means ordered by model name, so a rank change is a whole number
    of places (the correlations use average ranks and see the tie)."""
    order = sorted(means, key=lambda m: (-means[m], m))
    return {m: i + 1 for i, m in enumerate(order)}


def rank_agreement(video_scores: dict[str, pl.DataFrame]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``(rank agreement, movers)`` for every task and pair of profiles. Each table has ``task, model,
    input_id, final_score`` and, with samples, ``sample`` (a video is an input and sample); rows with
    a null score are left out."""
    if len(video_scores) < 2:
        raise ValueError(f"robustness needs at least two profiles, got {sorted(video_scores)}")
    keys = ["task", "model", "input_id", "sample"]
    clean = {p: df.with_columns(pl.col("sample").cast(pl.String).fill_null("") if "sample" in df.columns
                                else pl.lit("").alias("sample"))
             .select(*keys, pl.col("final_score").cast(pl.Float64))
             .filter(pl.col("final_score").is_not_null() & pl.col("final_score").is_not_nan())
             for p, df in video_scores.items()}
    ranks, moves = [], []
    for a, b in combinations(list(video_scores), 2):
        joined = clean[a].join(clean[b], on=keys, suffix="_b")
        for (task,), g in joined.sort("task").group_by("task", maintain_order=True):
            m = g.group_by("model").agg(pl.col("final_score").mean().alias("a"),
                                        pl.col("final_score_b").mean().alias("b")).sort("model")
            ma = dict(zip(m["model"], m["a"]))
            mb = dict(zip(m["model"], m["b"]))
            ra, rb = _ranks(ma), _ranks(mb)
            xa, xb = m["a"].to_numpy(), m["b"].to_numpy()
            top_a, top_b = min(ra, key=ra.__getitem__), min(rb, key=rb.__getitem__)
            ranks.append({"task": task, "profile_a": a, "profile_b": b, "n_models": m.height, "n_videos": g.height,
                          "kendall_tau": kendall_tau_b(xa, xb) if m.height > 1 else float("nan"),
                          "spearman": spearman(xa, xb) if m.height > 1 else float("nan"),
                          "top1_a": top_a, "top1_b": top_b, "top1_agree": top_a == top_b})
            rows = [{"task": task, "profile_a": a, "profile_b": b, "model": k, "mean_a": ma[k], "mean_b": mb[k],
                     "rank_a": ra[k], "rank_b": rb[k], "rank_change": rb[k] - ra[k]} for k in ma]
            moves += sorted(rows, key=lambda r: (-abs(r["rank_change"]), -abs(r["mean_b"] - r["mean_a"]), r["model"]))
    return (pl.DataFrame(ranks, schema=RANK_SCHEMA, orient="row"),
            pl.DataFrame(moves, schema=MOVES_SCHEMA, orient="row"))


def criterion_agreement(criterion_scores: dict[str, pl.DataFrame], key: str = "criterion") -> pl.DataFrame:
    """Per task, pair of profiles and criterion (or dimension): mean |a − b| and the share within one
    point, over the videos both scored; ``(all)`` pools every criterion. Tables have ``task, model,
    input_id, criterion_id, dimension, score`` and, with samples, ``sample``: a video is an input and
    sample, so each sample's score meets the same sample's, never another's."""
    if key not in ("criterion", "dimension"):
        raise ValueError(f"criterion agreement: key must be 'criterion' or 'dimension', got {key!r}")
    col = "criterion_id" if key == "criterion" else "dimension"
    video = ["task", "model", "input_id", "sample"]
    prepared = {}
    for p, df in criterion_scores.items():
        df = df.with_columns(pl.col("sample").cast(pl.String).fill_null("") if "sample" in df.columns
                             else pl.lit("").alias("sample"))
        d = df.select(*video, pl.col(col).cast(pl.String).alias("criterion"),
                      pl.col("score").cast(pl.Float64)).filter(pl.col("score").is_not_null())
        if key == "dimension":  # a video's criteria of one dimension: their mean
            d = d.group_by(*video, "criterion").agg(pl.col("score").mean())
        prepared[p] = d
    rows = []
    for a, b in combinations(list(criterion_scores), 2):
        j = prepared[a].join(prepared[b], on=[*video, "criterion"], suffix="_b")
        j = j.with_columns((pl.col("score") - pl.col("score_b")).abs().alias("d"))
        for (task,), g in j.sort("task").group_by("task", maintain_order=True):
            per = (g.group_by("criterion").agg(pl.len().alias("n"), pl.col("d").mean().alias("mad"),
                                               (pl.col("d") <= 1.0 + 1e-9).mean().alias("w1")).sort("criterion"))
            for r in per.iter_rows(named=True):
                rows.append({"task": task, "profile_a": a, "profile_b": b, "key": key, "criterion": r["criterion"],
                             "n_pairs": r["n"], "mean_abs_diff": r["mad"], "within_1": r["w1"]})
            rows.append({"task": task, "profile_a": a, "profile_b": b, "key": key, "criterion": ALL,
                         "n_pairs": g.height, "mean_abs_diff": float(cast(float, g["d"].mean())),
                         "within_1": float(cast(float, (g["d"] <= 1.0 + 1e-9).mean()))})
    return pl.DataFrame(rows, schema=CRITERION_SCHEMA, orient="row")


def format_robustness(ranks: pl.DataFrame, moves: pl.DataFrame, criteria: pl.DataFrame | None = None,
                      top_movers: int = 3) -> str:
    """Plain text, one block per task and pair of profiles (like ``format_leaderboard``)."""
    if ranks.height == 0:
        return "no video scored by both profiles"
    out = []
    for r in ranks.sort("task", "profile_a", "profile_b").iter_rows(named=True):
        sel = (pl.col("task") == r["task"]) & (pl.col("profile_a") == r["profile_a"]) & \
              (pl.col("profile_b") == r["profile_b"])
        out.append(f"{r['task']}: {r['profile_a']} vs {r['profile_b']} ({r['n_models']} models, "
                   f"{r['n_videos']} videos scored by both)")
        top = "same" if r["top1_agree"] else "differs"
        out.append(f"  kendall tau {_f(r['kendall_tau'])}  spearman {_f(r['spearman'])}  top-1 {top} "
                   f"({r['top1_a']} / {r['top1_b']})")
        if criteria is not None and criteria.height:
            c = criteria.filter(sel & (pl.col("criterion") == ALL))
            if c.height:
                c0 = c.row(0, named=True)
                out.append(f"  {c0['key']} scores: mean |diff| {_f(c0['mean_abs_diff'])}, within 1 point "
                           f"{_f(c0['within_1'])} over {c0['n_pairs']} pairs")
        mv = moves.filter(sel).head(top_movers)
        if mv.height:
            out.append(f"  {'model':<20} {'mean A':>7} {'mean B':>7} {'rank A':>6} {'rank B':>6} {'move':>5}")
            for m in mv.iter_rows(named=True):
                out.append(f"  {m['model'][:20]:<20} {m['mean_a']:7.2f} {m['mean_b']:7.2f} {m['rank_a']:>6} "
                           f"{m['rank_b']:>6} {m['rank_change']:>+5d}")
        out.append("")
    return "\n".join(out)


def _f(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"



def profile_tables(storage_dirs: dict[str, Path | str], store=None
                   ) -> tuple[dict[str, pl.DataFrame], dict[str, pl.DataFrame], list[str]]:
    """``(video_scores, criterion_scores, missing)`` of each profile's stored evaluation (by profile
    name), read through ``store``; ``missing`` names the profiles with no scores stored."""
    videos, criteria, missing = {}, {}, []
    for name, storage in storage_dirs.items():
        v, c = stored_table(storage, "video_scores", store), stored_table(storage, "criterion_scores", store)
        if v is None or c is None:
            missing.append(name)
            continue
        videos[name], criteria[name] = v, c
    return videos, criteria, missing
