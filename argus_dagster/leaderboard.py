"""Leaderboard: mean final score per task and model with a bootstrap 95% interval (method §9)."""

from __future__ import annotations

import numpy as np
import polars as pl

from .tables import COSTS, LEADERBOARD, frame


def bootstrap_ci(values: np.ndarray, n_resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of the mean (seeded, so reruns print the same numbers)."""
    if len(values) == 0:
        return float("nan"), float("nan")
    if len(values) == 1:
        return float(values[0]), float(values[0])
    rng = np.random.default_rng(seed)
    means = rng.choice(values, size=(n_resamples, len(values)), replace=True).mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def _mean(values: list) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return float(np.mean(vals)) if vals else None


def build_leaderboard(video_scores: pl.DataFrame, bench: str | None = None, profile: str | None = None) -> pl.DataFrame:
    """Per task and model: the mean final score and its interval, and what those scores cover (mean
    criteria scored of how many, share of importance weight, judges, criteria that need a VLM).

    A model is ranked over all its videos: with several samples of an input, every sample is one
    video of the mean and of the bootstrap (``n_videos`` counts them), as drawing N samples per prompt
    measures the model's typical video, not its best (best-of-N is :mod:`~argus_dagster.best_of_n`)."""
    rows = []
    if video_scores.height:
        for (task, model), g in video_scores.group_by(["task", "model"], maintain_order=True):
            ok = g.filter(pl.col("final_score").is_not_null())
            finals = ok["final_score"].to_numpy()
            lo, hi = bootstrap_ci(finals)
            cols = set(g.columns)
            judges = sorted({j.strip() for v in (ok["judge"] if "judge" in cols else []) if v for j in v.split(",")})
            needs = sorted({c for v in (ok["needs_vlm"] if "needs_vlm" in cols else []) if v is not None for c in v})
            rows.append({"bench": bench, "profile": profile, "task": task, "model": model,
                         "mean_final": float(finals.mean()) if len(finals) else None,
                         "ci_low": lo if len(finals) else None, "ci_high": hi if len(finals) else None,
                         "n_videos": int(len(finals)), "n_errors": int(g.height - len(finals)),
                         "n_scored": _mean(ok["n_scored"].to_list()) if "n_scored" in cols else None,
                         "n_criteria": _mean(ok["n_criteria"].to_list()) if "n_criteria" in cols else None,
                         "weight_scored": _mean(ok["weight_scored"].to_list()) if "weight_scored" in cols else None,
                         "judge": ", ".join(judges) or None, "needs_vlm": needs,
                         "ci_scope": "scored criteria only" if needs or ("n_scored" in cols and any(
                             (a or 0) < (b or 0) for a, b in zip(ok["n_scored"], ok["n_criteria"]))) else "all criteria"})
    return frame(rows, LEADERBOARD).sort(["task", "mean_final"], descending=[False, True], nulls_last=True)


def coverage_text(n_scored: float | None, n_criteria: float | None, judge: str | None) -> str:
    """``3 of 6 criteria · evidence-only``: what a score covers, shown beside it everywhere. A model's
    row averages its videos, whose rubrics may differ in size: ``mean 5 of 8.3 criteria``."""
    if not n_criteria:
        return "no criteria"

    def whole(x: float) -> bool:
        return abs(x - round(x)) < 0.05

    def num(x: float) -> str:
        return f"{x:.0f}" if whole(x) else f"{x:.1f}"

    mean = "" if whole(n_scored or 0) and whole(n_criteria) else "mean "
    return f"{mean}{num(n_scored or 0)} of {num(n_criteria)} criteria · {judge or 'no judge'}"


def cost_table(video_scores: pl.DataFrame | None) -> pl.DataFrame:
    """What an evaluation's scores cost, per task and model (the ``COSTS`` columns of its videos
    summed: the VLM calls of the runs that wrote its evidence and scores), with the prompt tokens
    per video and the share of them the server had cached. Empty without videos."""
    schema = {"task": pl.String, "model": pl.String, "n_videos": pl.Int64, **COSTS,
              "prompt_tokens_per_video": pl.Float64, "cached_share": pl.Float64}
    if video_scores is None or not video_scores.height:
        return pl.DataFrame(schema=schema)
    present = [k for k in COSTS if k in video_scores.columns]  # tables written before the ledger have none
    out = (video_scores.group_by("task", "model")
           .agg(pl.len().alias("n_videos"), *[pl.col(k).fill_null(0).sum().cast(pl.Int64) for k in present])
           .with_columns(*[pl.lit(0, pl.Int64).alias(k) for k in COSTS if k not in present]))
    out = out.with_columns(
        (pl.col("prompt_tokens") / pl.col("n_videos")).alias("prompt_tokens_per_video"),
        pl.when(pl.col("prompt_tokens") > 0).then(pl.col("cached_tokens") / pl.col("prompt_tokens"))
        .otherwise(None).alias("cached_share"))
    return out.select(list(schema)).sort("task", "model")


def cost_summary(costs: pl.DataFrame) -> dict:
    """One evaluation's totals: videos, tokens, prompt tokens per video and the share cached."""
    n = int(costs["n_videos"].sum()) if costs.height else 0
    prompt = int(costs["prompt_tokens"].sum()) if costs.height else 0
    cached = int(costs["cached_tokens"].sum()) if costs.height else 0
    return {"n_videos": n, "prompt_tokens": prompt, "cached_tokens": cached,
            "completion_tokens": int(costs["completion_tokens"].sum()) if costs.height else 0,
            "images_sent": int(costs["images_sent"].sum()) if costs.height else 0,
            "prompt_tokens_per_video": prompt / n if n else None,
            "cached_share": cached / prompt if prompt else None}


def format_costs(costs: pl.DataFrame) -> str:
    """The cost table as plain text, one line per task and model, and the evaluation's total."""
    lines = [f"{'task':<6} {'model':<18} {'videos':>6} {'requests':>8} {'retries':>7} {'parse':>5} "
             f"{'prompt tok':>11} {'cached':>7} {'compl tok':>9} {'images':>7} {'image MB':>8} {'prompt tok/video':>16}"]
    for r in costs.iter_rows(named=True):
        share = "-" if r["cached_share"] is None else f"{r['cached_share']:.0%}"
        lines.append(f"{r['task']:<6} {r['model']:<18} {r['n_videos']:>6} {r['vlm_requests']:>8} {r['vlm_retries']:>7} "
                     f"{r['vlm_parse_retries']:>5} {r['prompt_tokens']:>11} {share:>7} {r['completion_tokens']:>9} "
                     f"{r['images_sent']:>7} {r['image_bytes_sent'] / 1e6:>8.1f} {r['prompt_tokens_per_video']:>16.0f}")
    total = cost_summary(costs)
    if total["prompt_tokens"]:
        lines.append(f"total: {total['prompt_tokens']} prompt tokens ({total['cached_share']:.0%} cached), "
                     f"{total['prompt_tokens_per_video']:.0f} per video; {total['completion_tokens']} completion tokens")
    else:
        lines.append("total: no VLM tokens reported")
    return "\n".join(lines)


def format_leaderboard(lb: pl.DataFrame) -> str:
    """Plain-text tables, one per task, best model first."""
    out = []
    for task in sorted(lb["task"].unique().to_list()):
        g = lb.filter(pl.col("task") == task)
        out.append(f"{task}")
        out.append(f"  {'rank':>4}  {'model':<18} {'final':>6}  {'covers':<41} {'95% CI*':>13}  {'n':>3}  {'errors':>6}")
        needs: set[str] = set()
        partial = False
        for rank, r in enumerate(g.iter_rows(named=True), start=1):
            score = f"{r['mean_final']:6.2f}" if r["mean_final"] is not None else "     -"
            ci = f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}]" if r["ci_low"] is not None else "-"
            covers = coverage_text(r.get("n_scored"), r.get("n_criteria"), r.get("judge"))
            out.append(f"  {rank:>4}  {r['model']:<18} {score}  {covers:<41} {ci:>13}  {r['n_videos']:>3}  {r['n_errors']:>6}")
            needs |= set(r.get("needs_vlm") or [])
            partial |= r.get("ci_scope") == "scored criteria only"
        out.append("  * the interval covers " + ("the scored criteria only" if partial else "all criteria"))
        if needs:
            out.append(f"  needs a VLM (not scored): {', '.join(sorted(needs))}")
        out.append("")
    return "\n".join(out)


def pairwise_win_rates(video_scores: pl.DataFrame, task: str, models: list[str], n_resamples: int = 1000,
                       seed: int = 0) -> dict[tuple[str, str], dict]:
    """Per ordered pair of ``models`` of ``task``: how often the first's video scores above the
    second's on the inputs both have a final score for (a tie counts half; an input with several
    samples compares their means), with a percentile bootstrap 95% interval over those inputs
    (seeded). ``{(a, b): {"rate", "low", "high", "n"}}``; a pair without a shared input is left out."""
    if video_scores is None or not video_scores.height:
        return {}
    per_input = (video_scores.filter((pl.col("task") == task) & pl.col("final_score").is_not_null())
                 .group_by("model", "input_id").agg(pl.col("final_score").mean()))
    scores = {m: dict(zip(g["input_id"].to_list(), g["final_score"].to_list()))
              for (m,), g in per_input.group_by("model")}
    rng = np.random.default_rng(seed)
    out = {}
    for a in models:
        for b in models:
            if a == b or a not in scores or b not in scores:
                continue
            shared = sorted(set(scores[a]) & set(scores[b]))
            if not shared:
                continue
            outcome = np.array([1.0 if scores[a][i] > scores[b][i] else 0.5 if scores[a][i] == scores[b][i] else 0.0
                                for i in shared])
            if len(outcome) > 1:
                means = rng.choice(outcome, size=(n_resamples, len(outcome)), replace=True).mean(axis=1)
                lo, hi = float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))
            else:
                lo = hi = float(outcome[0])
            out[(a, b)] = {"rate": float(outcome.mean()), "low": lo, "high": hi, "n": len(shared)}
    return out
