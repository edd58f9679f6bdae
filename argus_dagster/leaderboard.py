"""Leaderboard: mean final score per task and model with a bootstrap 95% interval (method §9)."""

from __future__ import annotations

import numpy as np
import polars as pl

from .tables import LEADERBOARD, frame


def bootstrap_ci(values: np.ndarray, n_resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of the mean (seeded, so reruns print the same numbers)."""
    if len(values) == 0:
        return float("nan"), float("nan")
    if len(values) == 1:
        return float(values[0]), float(values[0])
    rng = np.random.default_rng(seed)
    means = rng.choice(values, size=(n_resamples, len(values)), replace=True).mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def build_leaderboard(video_scores: pl.DataFrame) -> pl.DataFrame:
    rows = []
    if video_scores.height:
        for (task, model), g in video_scores.group_by(["task", "model"], maintain_order=True):
            finals = g["final_score"].drop_nulls().to_numpy()
            lo, hi = bootstrap_ci(finals)
            rows.append({"task": task, "model": model,
                         "mean_final": float(finals.mean()) if len(finals) else None,
                         "ci_low": lo if len(finals) else None, "ci_high": hi if len(finals) else None,
                         "n_videos": int(len(finals)), "n_errors": int(g.height - len(finals))})
    return frame(rows, LEADERBOARD).sort(["task", "mean_final"], descending=[False, True], nulls_last=True)


def format_leaderboard(lb: pl.DataFrame) -> str:
    """Plain-text tables, one per task, best model first."""
    out = []
    for task in sorted(lb["task"].unique().to_list()):
        g = lb.filter(pl.col("task") == task)
        out.append(f"{task}")
        out.append(f"  {'rank':>4}  {'model':<18} {'final':>6}  {'95% CI':>13}  {'n':>3}  {'errors':>6}")
        for rank, r in enumerate(g.iter_rows(named=True), start=1):
            score = f"{r['mean_final']:6.2f}" if r["mean_final"] is not None else "     -"
            ci = f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}]" if r["ci_low"] is not None else "-"
            out.append(f"  {rank:>4}  {r['model']:<18} {score}  {ci:>13}  {r['n_videos']:>3}  {r['n_errors']:>6}")
        out.append("")
    return "\n".join(out)
