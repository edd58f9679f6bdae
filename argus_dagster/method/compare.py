"""Two candidates compared on the inputs both have: B against A, paired by input.

A is a model of one evaluation and B another model of it, or the same model scored in another
evaluation (another profile or judge). Per task and per measured dimension, on the inputs both were
scored on: the mean difference B - A with a paired bootstrap 95% interval over those inputs, a paired
permutation test (the signs of the per-input differences flipped at random; exact up to
:data:`EXACT_UP_TO` inputs), and the wins, ties and losses of B. An input's score is the mean of its
videos' (several samples of one input weigh as one input); a dimension's score for an input is the
mean of its scored criteria of that dimension.

Beside the numbers: the inputs whose final score moved most, and the criteria whose verdict flipped
(a score that crossed the criterion's fail threshold, which for a hard criterion with a cap is the cap
firing or lifting), each with both rationales. :func:`gate` says whether B is worse than A beyond a
margin, for a training pipeline to act on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from argus_dagster.method.rubric.taxonomy import DIMENSIONS

OVERALL = "overall"
# Up to this many paired inputs the permutation test enumerates every sign pattern (2^16 = 65,536);
# above, it draws MONTE_CARLO patterns (seeded) and counts the observed one among them.
EXACT_UP_TO = 16
MONTE_CARLO = 20_000
# Two per-input scores closer than this are a tie.
TIE = 1e-9

ROW = {"task": pl.String, "dimension": pl.String, "n_inputs": pl.Int64, "mean_a": pl.Float64, "mean_b": pl.Float64,
       "diff": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64, "p_value": pl.Float64, "wins": pl.Int64,
       "ties": pl.Int64, "losses": pl.Int64}


@dataclass(frozen=True)
class Comparison:
    """B against A: ``rows`` (per task and dimension, :data:`ROW`), ``movers`` (per task, the inputs
    whose final score moved most), ``flips`` (criteria whose verdict differs), and what the scores
    cover (``judges``: each side's judges; ``criteria``: each side's scored criteria)."""

    a: str
    b: str
    rows: pl.DataFrame
    movers: list[dict[str, Any]] = field(default_factory=list)
    flips: list[dict[str, Any]] = field(default_factory=list)
    judges: dict[str, list[str]] = field(default_factory=dict)
    criteria: dict[str, int] = field(default_factory=dict)


def dimension_label(dimension: str) -> str:
    """``"overall"``, or a dimension's number and name (``"4 spatial relations"``)."""
    if dimension == OVERALL:
        return OVERALL
    name = DIMENSIONS.get(int(dimension)) if dimension.isdigit() else None
    return f"{dimension} {name}" if name else dimension


def paired_bootstrap(diffs: np.ndarray, n_resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of the mean of paired differences: each resample draws the
    inputs with replacement and keeps each input's pair together (seeded: reruns print the same)."""
    n = len(diffs)
    if n == 0:
        return float("nan"), float("nan")
    if n == 1:
        return float(diffs[0]), float(diffs[0])
    rng = np.random.default_rng(seed)
    means = diffs[rng.integers(0, n, size=(n_resamples, n))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def sign_flip_p(diffs: np.ndarray, n_draws: int = MONTE_CARLO, seed: int = 0) -> float | None:
    """Two-sided p-value of the paired permutation test: under "A and B are exchangeable on each
    input" every per-input difference is as likely negated, so the observed mean is compared with the
    means of the differences under every sign pattern (exact up to :data:`EXACT_UP_TO` inputs, else
    ``n_draws`` random patterns with the observed one counted among them). None without an input."""
    n = len(diffs)
    if n == 0:
        return None
    observed = abs(float(diffs.mean()))
    if n <= EXACT_UP_TO:
        patterns = 1 - 2 * ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1)  # every sign pattern
        means = np.abs((patterns * diffs).mean(axis=1))
        return float(np.mean(means >= observed - TIE))
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(n_draws, n))
    hits = int(np.sum(np.abs((signs * diffs).mean(axis=1)) >= observed - TIE))
    return (hits + 1) / (n_draws + 1)


def _per_input(scores: pl.DataFrame, column: str) -> pl.DataFrame:
    """``task``, ``input_id``, ``score``: the mean of ``column`` over each input's videos that have one."""
    return (scores.filter(pl.col(column).is_not_null() & pl.col(column).is_not_nan())
            .group_by("task", "input_id").agg(pl.col(column).cast(pl.Float64).mean().alias("score")))


def _per_dimension(criteria: pl.DataFrame) -> pl.DataFrame:
    """``task``, ``dimension`` (its number as text), ``input_id``, ``score``: the mean of each input's
    scored criteria of that dimension, over its videos."""
    scored = criteria.filter(pl.col("score").is_not_null() & pl.col("dimension").is_not_null())
    return (scored.group_by("task", "dimension", "input_id").agg(pl.col("score").cast(pl.Float64).mean())
            .with_columns(pl.col("dimension").cast(pl.String)))


def _row(task: str, dimension: str, a: np.ndarray, b: np.ndarray, n_resamples: int, seed: int) -> dict[str, Any]:
    diffs = b - a
    low, high = paired_bootstrap(diffs, n_resamples, seed)
    return {"task": task, "dimension": dimension, "n_inputs": len(diffs), "mean_a": float(a.mean()),
            "mean_b": float(b.mean()), "diff": float(diffs.mean()), "ci_low": low, "ci_high": high,
            "p_value": sign_flip_p(diffs, seed=seed), "wins": int(np.sum(diffs > TIE)),
            "ties": int(np.sum(np.abs(diffs) <= TIE)), "losses": int(np.sum(diffs < -TIE))}


def _paired(a: pl.DataFrame, b: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    return a.join(b, on=keys, how="inner", suffix="_b").rename({"score": "score_a"}).sort(keys)


def _verdicts(criteria: pl.DataFrame) -> pl.DataFrame:
    """Per task, input and criterion: its mean score over the input's videos, its fail threshold,
    type and cap, and the first video's rationale."""
    # a verdict needs a score and the threshold it is read against (a table stored without thresholds has none)
    scored = criteria.filter(pl.col("score").is_not_null() & pl.col("fail_threshold").is_not_null()).sort(
        "task", "input_id", "sample", "criterion_id")
    return scored.group_by("task", "input_id", "criterion_id", maintain_order=True).agg(
        pl.col("score").cast(pl.Float64).mean(), pl.col("fail_threshold").first(), pl.col("type").first(),
        pl.col("hard_cap").first(), pl.col("dimension").first(), pl.col("rationale").first(),
        pl.col("sample").first())


def compare(scores_a: pl.DataFrame, scores_b: pl.DataFrame, criteria_a: pl.DataFrame | None = None,
            criteria_b: pl.DataFrame | None = None, *, a: str = "A", b: str = "B", n_resamples: int = 2000,
            seed: int = 0, top: int = 5) -> Comparison:
    """B against A from their ``video_scores`` rows (and their ``criterion_scores`` rows, for the
    dimensions and the flipped verdicts); see the module's docstring. ``top``: the movers per task."""
    rows: list[dict[str, Any]] = []
    movers: list[dict[str, Any]] = []
    finals = _paired(_per_input(scores_a, "final_score"), _per_input(scores_b, "final_score"), ["task", "input_id"])
    for (task,), g in finals.group_by("task", maintain_order=True):
        rows.append(_row(str(task), OVERALL, g["score_a"].to_numpy(), g["score_b"].to_numpy(), n_resamples, seed))
        moved = g.with_columns((pl.col("score_b") - pl.col("score_a")).alias("diff"))
        moved = moved.sort(pl.col("diff").abs(), "input_id", descending=[True, False]).head(top)
        movers += [{"task": str(task), "input_id": r["input_id"], "score_a": r["score_a"], "score_b": r["score_b"],
                    "diff": r["diff"]} for r in moved.iter_rows(named=True) if abs(r["diff"]) > TIE]
    flips: list[dict[str, Any]] = []
    if criteria_a is not None and criteria_b is not None and criteria_a.height and criteria_b.height:
        dims = _paired(_per_dimension(criteria_a), _per_dimension(criteria_b), ["task", "dimension", "input_id"])
        for (task, dimension), g in dims.group_by("task", "dimension", maintain_order=True):
            rows.append(_row(str(task), str(dimension), g["score_a"].to_numpy(), g["score_b"].to_numpy(),
                             n_resamples, seed))
        both = _verdicts(criteria_a).join(_verdicts(criteria_b), on=["task", "input_id", "criterion_id"], how="inner",
                                          suffix="_b")
        for r in both.iter_rows(named=True):
            fail_a = r["score"] < r["fail_threshold"]
            fail_b = r["score_b"] < r["fail_threshold_b"]
            if fail_a == fail_b:
                continue
            capped = r["type"] == "hard" and r["hard_cap"] is not None
            flips.append({"task": r["task"], "input_id": r["input_id"], "criterion_id": r["criterion_id"],
                          "dimension": dimension_label(str(r["dimension"])), "type": r["type"],
                          "fail_threshold": r["fail_threshold"], "hard_cap": r["hard_cap"] if capped else None,
                          "score_a": r["score"], "score_b": r["score_b"],
                          "verdict_a": "fail" if fail_a else "pass", "verdict_b": "fail" if fail_b else "pass",
                          "sample_a": r["sample"], "sample_b": r["sample_b"],
                          "rationale_a": r["rationale"], "rationale_b": r["rationale_b"]})
        flips.sort(key=lambda f: (f["task"], f["hard_cap"] is None, -abs(f["score_b"] - f["score_a"]), f["input_id"],
                                  f["criterion_id"]))
    order = {OVERALL: -1}
    table = pl.DataFrame(rows, schema=ROW, orient="row") if rows else pl.DataFrame(schema=ROW)
    table = table.sort("task", pl.col("dimension").map_elements(lambda d: order.get(d, int(d) if d.isdigit() else 99),
                                                               return_dtype=pl.Int64))
    judges = {side: sorted({str(j) for j in s["judge"].drop_nulls().to_list()}) if "judge" in s.columns else []
              for side, s in (("a", scores_a), ("b", scores_b))}
    counts = {side: int(c.filter(pl.col("score").is_not_null()).height) if c is not None else 0
              for side, c in (("a", criteria_a), ("b", criteria_b))}
    return Comparison(a, b, table, movers, flips, judges, counts)


def smallest_p(n: int) -> float:
    """The smallest p-value the paired permutation test can give on ``n`` inputs (2 / 2^n exactly)."""
    return 2.0 / 2 ** n if n <= EXACT_UP_TO else 1.0 / (MONTE_CARLO + 1)


# The gate's level: B fails only where the permutation test too says the difference is not chance.
GATE_LEVEL = 0.05


def gate(comparison: Comparison, margin: float = 0.0, level: float = GATE_LEVEL) -> tuple[list[str], list[str]]:
    """``(failed, untold)``: why B fails the gate against A, one line per task (none: it passes), and
    the tasks too small to tell. B fails a task when its overall mean is below A's by more than
    ``margin``, the paired bootstrap interval of the difference lies wholly below zero, and the paired
    permutation test's p is below ``level`` (a bootstrap over a handful of inputs is too narrow to
    trust alone). A task with so few inputs that no p can reach ``level`` (fewer than 6 at 0.05) cannot
    fail; it is named in ``untold``. Dimensions do not gate (testing many at once finds noise); they
    are shown."""
    failed, untold = [], []
    for r in comparison.rows.filter(pl.col("dimension") == OVERALL).iter_rows(named=True):
        if smallest_p(r["n_inputs"]) >= level:
            untold.append(f"{r['task']}: {r['n_inputs']} shared input{'s' if r['n_inputs'] != 1 else ''} cannot show a "
                          f"difference at p < {level:g} (the smallest p on {r['n_inputs']} is "
                          f"{smallest_p(r['n_inputs']):.3g}); B - A = {r['diff']:+.2f}")
        elif r["diff"] < -margin and r["ci_high"] < 0 and r["p_value"] < level:
            failed.append(f"{r['task']}: {comparison.b} is worse than {comparison.a} by {-r['diff']:.2f} "
                          f"(95% interval {r['ci_low']:+.2f} to {r['ci_high']:+.2f} on {r['n_inputs']} inputs, "
                          f"p = {r['p_value']:.3g}), beyond the margin {margin:g}")
    return failed, untold
