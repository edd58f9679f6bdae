"""Human alignment: how well an evaluator's scores agree with human ratings of the same videos.

Three source documents define the metrics (the project's copies: ``../shared/seeds/``), and all
three are computed side by side:

- VideoArgus (arXiv 2608.05485; ``000_4e1f52f47eca7243.txt``, abstract; method doc §9):
  *within-input* Spearman and Kendall correlation, computed per input across that input's candidate
  videos and averaged over inputs.
- VEFX-Bench evaluation card (arXiv 2604.16272; ``002_9bfbab1d8353041b.txt``, "Metrics" and "Scoring
  recipe"): SRCC and KRCC on raw predictions; PLCC and RMSE after the standard four-parameter
  logistic calibration; pairwise accuracy within groups that share an input, where a tie in the human
  scores counts as correct and a tie in the prediction scores 0.5.
- FIRM-Video: Check Before You Score (``001_a78e89d3e52e635c.txt``, "Data Balance and Evaluation
  Metrics", the benchmark comparison and Table 4): MAE, the STD of the absolute errors, exact accuracy and relaxed
  accuracy (within one rating level) after the evaluator's score is put on the human rating scale,
  and SRCC; and (§4.3) preference accuracy over pairs within a prompt, ties within 0.5.

Global figures (all videos pooled) sit beside the within-input ones, and the main figures carry
percentile-bootstrap 95% intervals that resample *inputs* (a prompt's candidates stay together, since
they share a rubric and are not independent draws).

Rank correlations are implemented here (average ranks for ties, Kendall's tau-b) rather than
delegated, so that scipy is an independent reference in the tests; scipy is used for the logistic
least-squares fit, and for the bootstrap's global Kendall tau-b, whose O(n log n) the resamples need
(this module's is O(n²): 36 ms against scipy's 0.9 ms on 2,000 videos, times 1,000 resamples).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass, field
from typing import Iterable

import numpy as np
import polars as pl

# ---------------------------------------------------------------------------------------------------
# Rank correlations (VEFX card: SRCC and KRCC on raw predictions; VideoArgus: the same, within input)
# ---------------------------------------------------------------------------------------------------


def average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n, tied values sharing the mean of the ranks they span (the convention of SRCC)."""
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    starts = np.r_[0, np.flatnonzero(xs[1:] != xs[:-1]) + 1]
    ends = np.r_[starts[1:], len(xs)]
    mean_rank = (starts + ends + 1) / 2.0  # mean of the 1-based ranks starts+1 .. ends
    ranks = np.empty(len(x))
    ranks[order] = np.repeat(mean_rank, ends - starts)
    return ranks


def pearson(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson's r; NaN when either side is constant (no linear relation is defined)."""
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if len(x) < 2:
        return float("nan")
    dx, dy = x - x.mean(), y - y.mean()
    den = math.sqrt(float(dx @ dx) * float(dy @ dy))
    if den == 0.0:
        return float("nan")
    return float(np.clip((dx @ dy) / den, -1.0, 1.0))


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (SRCC): Pearson's r of the average ranks.

    Source: VEFX-Bench card (SRCC, primary), FIRM-Video (SRCC), VideoArgus (within-input Spearman).
    """
    return pearson(average_ranks(x), average_ranks(y))


def kendall_tau_b(x: np.ndarray, y: np.ndarray, block: int = 512) -> float:
    """Kendall's tau-b (KRCC), tie-corrected: sum of sign(dx)·sign(dy) over pairs / sqrt of untied pairs.

    Pairs are counted in row blocks so that memory stays bounded (n ≈ 2,500 videos → ~6M pairs).
    Source: VEFX-Bench card (KRCC), VideoArgus (within-input Kendall).
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n = len(x)
    if n < 2:
        return float("nan")
    s = 0.0
    for a in range(0, n, block):
        sx = np.sign(x[a:a + block, None] - x[None, :])
        sy = np.sign(y[a:a + block, None] - y[None, :])
        s += float((sx * sy).sum())
    s /= 2.0  # every unordered pair was counted twice
    n0 = n * (n - 1) / 2.0
    n1 = _tied_pairs(x)
    n2 = _tied_pairs(y)
    den = math.sqrt((n0 - n1) * (n0 - n2))
    if den == 0.0:
        return float("nan")
    return float(np.clip(s / den, -1.0, 1.0))


def _tied_pairs(x: np.ndarray) -> float:
    _, counts = np.unique(x, return_counts=True)
    return float((counts * (counts - 1) / 2.0).sum())


# ---------------------------------------------------------------------------------------------------
# Four-parameter logistic calibration (VEFX card: PLCC and RMSE are computed after it)
# ---------------------------------------------------------------------------------------------------


def logistic4(x: np.ndarray, b1: float, b2: float, b3: float, b4: float) -> np.ndarray:
    """The standard IQA/VQA calibration curve ``(b1 - b2) / (1 + exp(-(x - b3) / |b4|)) + b2``.

    ``b1`` and ``b2`` are the upper and lower asymptotes (swapped for a decreasing fit), ``b3`` the
    midpoint and ``|b4|`` the slope scale. Source: VEFX-Bench card ("PLCC and RMSE are computed after
    the standard four-parameter logistic calibration"; the IQA/VQA convention it cites).
    """
    z = np.clip(-(np.asarray(x, dtype=float) - b3) / max(abs(b4), 1e-12), -500, 500)
    return (b1 - b2) / (1.0 + np.exp(z)) + b2


@dataclass(frozen=True)
class Calibration:
    """Predictions mapped onto the human scale, and how: ``logistic4``, ``linear`` or ``constant``."""

    fitted: np.ndarray
    method: str
    params: tuple[float, ...]


def fit_logistic4(pred: np.ndarray, human: np.ndarray,
                  starts: list[tuple[float, float, float, float]] | None = None) -> Calibration:
    """Least-squares fit of :func:`logistic4` from raw predictions to human scores.

    The sum of squares has several local optima on real ratings (a broad curve and a steep one at a
    jump in the ratings, some nearly a step), so the fit starts from each of ``starts`` (default
    :func:`logistic_starts` and the best points of :func:`profile_grid`, which are candidates
    themselves) and keeps the one with the smallest sum of squares, ties going to the smaller parameters: the
    result depends on the set of starts, never on their order. Where no start gives a finite fit, or
    the best is worse than a straight line (a handful of points), the least-squares line is used and
    the method says so; constant predictions can only be mapped to the human mean.
    """
    x = np.asarray(pred, dtype=float)
    y = np.asarray(human, dtype=float)
    if len(x) == 0:
        return Calibration(np.array([]), "constant", ())
    if np.ptp(x) == 0.0 or len(x) < 2:
        return Calibration(np.full(len(y), y.mean()), "constant", (float(y.mean()),))
    slope, intercept = np.polyfit(x, y, 1)
    linear = Calibration(slope * x + intercept, "linear", (float(slope), float(intercept)))
    if len(x) < 5:  # four parameters need more points than that to mean anything
        return linear
    from scipy.optimize import leastsq  # deferred: start-up time (half a second, measured; only this fit needs it)

    fits: list[tuple[float, tuple[float, ...], np.ndarray]] = []
    if starts is None:  # the best points of a grid over midpoint and slope scale, each fitted exactly (below)
        for _grid_sse, point in profile_grid(x, y):
            fitted = logistic4(x, *point)
            fits.append((_sse(fitted, y), point, fitted))
    grid = [(f[1][0], f[1][1], f[1][2], f[1][3]) for f in fits]
    for p0 in (logistic_starts(x, y) + grid if starts is None else starts):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:  # MINPACK's Levenberg-Marquardt, as curve_fit; at maxfev it returns where it got to
                found, _ = leastsq(lambda p: logistic4(x, *p) - y, np.asarray(p0, dtype=float), maxfev=2000)
            except (ValueError, TypeError):
                continue
        fitted = logistic4(x, *found)
        if np.all(np.isfinite(fitted)):
            fits.append((_sse(fitted, y), tuple(float(p) for p in found), fitted))
    if not fits:
        return linear
    sse, best, fitted = min(fits, key=lambda f: (f[0], f[1]))
    if sse > _sse(linear.fitted, y) + 1e-12:
        return linear
    return Calibration(fitted, "logistic4", tuple(float(p) for p in best))


def logistic_starts(pred: np.ndarray, human: np.ndarray) -> list[tuple[float, float, float, float]]:
    """Where :func:`fit_logistic4` starts: the asymptotes at the human max and min in both orders
    (an increasing and a decreasing curve), the midpoint at the predictions' quartiles and mean, the
    slope scale at a quarter, one and four times their std (the usual single start is among them)."""
    x = np.asarray(pred, dtype=float)
    y = np.asarray(human, dtype=float)
    hi, lo = float(y.max()), float(y.min())
    spread = float(x.std()) or 1.0
    mids = sorted({float(v) for v in np.quantile(x, [0.25, 0.5, 0.75])} | {float(x.mean())})
    return [(a, b, m, k * spread) for a, b in ((hi, lo), (lo, hi)) for m in mids for k in (0.25, 1.0, 4.0)]


def profile_grid(pred: np.ndarray, human: np.ndarray, keep: int = 8) -> list[tuple[float, tuple[float, float, float, float]]]:
    """The logistic curves of the ``keep`` best midpoints of a grid over midpoints and slope scales
    (each midpoint at its best scale), each with its exact least-squares asymptotes, as ``(sse, params)``.

    For a fixed midpoint ``b3`` and slope scale ``b4`` the curve is linear in its asymptotes
    (``b2 + (b1 - b2) * sigmoid``), so they are solved in closed form and only two parameters are
    searched. The midpoints are every distinct prediction, every gap between two consecutive ones
    (where a step in the ratings can sit; at most 512 in all, by quantile) and the quartiles; the slope scales run
    from an eighth of the smallest gap (a step: people's ratings often jump between two predictions)
    to four times the predictions' range, evenly in log. A gradient search from one or a few starts
    can stop on a broad curve while a steep one fits better; this grid sees both.
    """
    x = np.asarray(pred, dtype=float)
    y = np.asarray(human, dtype=float)
    distinct = np.unique(x)
    if len(distinct) < 2:
        return []
    gaps = np.diff(distinct)
    # a midpoint in a gap makes a step there; one at a prediction gives that video an intermediate value
    mids = np.concatenate([distinct[:-1] + gaps / 2.0, distinct])
    if len(mids) > 512:
        mids = np.quantile(mids, np.linspace(0.0, 1.0, 512))
    mids = np.unique(np.concatenate([mids, np.quantile(x, [0.25, 0.5, 0.75])]))
    span = float(distinct[-1] - distinct[0])
    scales = np.geomspace(float(gaps.min()) / 8.0, 4.0 * span, 48)
    yc = y - y.mean()
    best_sse = np.full(len(mids), np.inf)
    best_at: list[tuple[float, float, float, float] | None] = [None] * len(mids)
    for s in scales:  # each midpoint keeps its best slope scale
        sig = 1.0 / (1.0 + np.exp(np.clip(-(x[None, :] - mids[:, None]) / s, -500, 500)))
        sc = sig - sig.mean(axis=1, keepdims=True)
        var = (sc * sc).sum(axis=1)
        cov = sc @ yc
        ok = var > 1e-12 * len(x)
        d = np.where(ok, cov / np.where(ok, var, 1.0), 0.0)
        sse = float(yc @ yc) - d * cov
        for i in np.flatnonzero(sse < best_sse - 1e-12):
            best_sse[i] = sse[i]
            low = float(y.mean() - d[i] * sig[i].mean())
            best_at[i] = (low + float(d[i]), low, float(mids[i]), float(s))
    order = np.argsort(best_sse, kind="stable")[:keep]  # the best midpoints, each a different place
    return [(float(best_sse[i]), p) for i in order if (p := best_at[i]) is not None]


def _sse(a: np.ndarray, b: np.ndarray) -> float:
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    return float(d @ d)


def rmse(a: np.ndarray, b: np.ndarray) -> float:
    a = np.asarray(a, dtype=float)
    return float(math.sqrt(_sse(a, b) / len(a))) if len(a) else float("nan")


# ---------------------------------------------------------------------------------------------------
# Group-wise metrics (VEFX card: pairwise accuracy; VideoArgus: within-input correlation)
# ---------------------------------------------------------------------------------------------------


def _groups(groups: Iterable) -> list[np.ndarray]:
    """Index arrays of the rows sharing each group label, in order of first appearance."""
    labels = np.asarray(list(groups), dtype=object)
    index: dict = {}
    for i, g in enumerate(labels):
        index.setdefault(g, []).append(i)
    return [np.asarray(v, dtype=int) for v in index.values()]


def pair_counts(pred: np.ndarray, human: np.ndarray) -> tuple[float, int]:
    """(credit, pairs) over all unordered pairs of one group, with the VEFX card's tie rules.

    A pair tied in the human scores counts as correct (1); otherwise a prediction tie earns 0.5, an
    ordering that agrees with the humans 1, one that disagrees 0. The card's sample code tests the
    direction before the prediction tie, which would give a full point to a tied prediction whenever
    the first video is rated lower; its stated rule ("ties in prediction score 0.5") is what is used here.
    """
    p = np.asarray(pred, dtype=float)
    h = np.asarray(human, dtype=float)
    n = len(p)
    if n < 2:
        return 0.0, 0
    iu = np.triu_indices(n, k=1)
    sp = np.sign(p[:, None] - p[None, :])[iu]
    sh = np.sign(h[:, None] - h[None, :])[iu]
    credit = np.where(sh == 0, 1.0, np.where(sp == 0, 0.5, (sp == sh).astype(float)))
    return float(credit.sum()), int(len(credit))


def pairwise_accuracy(pred: np.ndarray, human: np.ndarray, groups: Iterable) -> tuple[float, int]:
    """Fraction of correctly ordered candidate pairs within groups sharing an input (VEFX card).

    Returns (accuracy, number of pairs); NaN when no group has two candidates. Pairs are pooled over
    groups (total credit / total pairs), as in the card's recipe. Source: VEFX-Bench card, "Pairwise
    Accuracy" and its scoring recipe.
    """
    p = np.asarray(pred, dtype=float)
    h = np.asarray(human, dtype=float)
    credit, total = 0.0, 0
    for idx in _groups(groups):
        c, t = pair_counts(p[idx], h[idx])
        credit += c
        total += t
    return (credit / total if total else float("nan")), total


def preference_counts(pred: np.ndarray, human: np.ndarray, tie_tolerance: float = 0.5,
                      pred_tie_tolerance: float | None = None) -> tuple[float, int]:
    """(credit, pairs) over all unordered pairs of one group, with FIRM-Video's preference rules.

    Each side's preference of a pair is "first", "second" or a tie, a tie being a difference within
    ``tie_tolerance`` (0.5 in the seed's protocol; ``pred_tie_tolerance`` for the evaluator when its
    scale differs). A correct preference earns 1; a tie that the evaluator also calls a tie earns 0.5
    (the seed: "Correct predictions receive a score of 1 for preference pairs and 0.5 for tie pairs");
    anything else 0. Source: FIRM-Video §4.3 (MJ-Bench-Video, preference accuracy with ties).
    """
    p = np.asarray(pred, dtype=float)
    h = np.asarray(human, dtype=float)
    n = len(p)
    if n < 2:
        return 0.0, 0
    pt = tie_tolerance if pred_tie_tolerance is None else pred_tie_tolerance
    iu = np.triu_indices(n, k=1)
    dp = (p[:, None] - p[None, :])[iu]
    dh = (h[:, None] - h[None, :])[iu]
    sp = np.where(np.abs(dp) <= pt + 1e-9, 0.0, np.sign(dp))
    sh = np.where(np.abs(dh) <= tie_tolerance + 1e-9, 0.0, np.sign(dh))
    credit = np.where(sh == sp, np.where(sh == 0, 0.5, 1.0), 0.0)
    return float(credit.sum()), int(len(credit))


def preference_accuracy(pred: np.ndarray, human: np.ndarray, groups: Iterable, tie_tolerance: float = 0.5,
                        pred_tie_tolerance: float | None = None) -> tuple[float, int]:
    """FIRM-Video's preference accuracy over pairs within a prompt (:func:`preference_counts`),
    pooled over groups; (accuracy, pairs), NaN when no group has two candidates."""
    p = np.asarray(pred, dtype=float)
    h = np.asarray(human, dtype=float)
    credit, total = 0.0, 0
    for idx in _groups(groups):
        c, t = preference_counts(p[idx], h[idx], tie_tolerance, pred_tie_tolerance)
        credit += c
        total += t
    return (credit / total if total else float("nan")), total


def within_input_values(pred: np.ndarray, human: np.ndarray, groups: Iterable,
                        corr=spearman) -> np.ndarray:
    """Per-input correlation across that input's candidates, for the inputs that count.

    An input counts when its candidates carry at least two distinct human scores (method doc §9);
    with fewer, there is no human ranking to agree with. An evaluator that gives all of a counted
    input's candidates the same score ranks nothing: that input contributes 0 rather than being
    dropped, so an evaluator cannot raise its average by abstaining. Source: VideoArgus (within-input
    Spearman and Kendall on its human-alignment set; method doc §9).
    """
    p = np.asarray(pred, dtype=float)
    h = np.asarray(human, dtype=float)
    vals = (_input_correlation(p[idx], h[idx], corr) for idx in _groups(groups))
    return np.asarray([v for v in vals if v is not None], dtype=float)


def _input_correlation(p: np.ndarray, h: np.ndarray, corr) -> float | None:
    """One input's correlation across its candidates; None when the input does not count."""
    if len(np.unique(h)) < 2:
        return None
    if len(np.unique(p)) < 2:
        return 0.0
    r = corr(p, h)
    return 0.0 if math.isnan(r) else r


def within_input_correlation(pred: np.ndarray, human: np.ndarray, groups: Iterable,
                             corr=spearman) -> tuple[float, int]:
    """Mean within-input correlation (VideoArgus) and the number of inputs it averages over."""
    vals = within_input_values(pred, human, groups, corr)
    return (float(vals.mean()) if len(vals) else float("nan")), int(len(vals))


# ---------------------------------------------------------------------------------------------------
# FIRM-Video: errors and accuracies on the human rating scale
# ---------------------------------------------------------------------------------------------------


def map_to_scale(pred: np.ndarray, pred_range: tuple[float, float],
                 human_range: tuple[float, float]) -> np.ndarray:
    """Linear map of the evaluator's range onto the human scale, clipped to it.

    FIRM-Video compares ratings on the humans' own 1-5 scale; an evaluator on another scale (0-10
    for VideoArgus, CLIP similarity, …) is first put on that scale by its stated or observed range.
    """
    p = np.asarray(pred, dtype=float)
    lo, hi = pred_range
    hlo, hhi = human_range
    if hi == lo:
        return np.full(len(p), (hlo + hhi) / 2.0)
    return np.clip(hlo + (p - lo) * (hhi - hlo) / (hi - lo), min(hlo, hhi), max(hlo, hhi))


@dataclass(frozen=True)
class RatingErrors:
    mae: float
    std_abs_err: float
    accuracy: float
    relaxed_accuracy: float


def rating_errors(rating: np.ndarray, human: np.ndarray) -> RatingErrors:
    """FIRM-Video's MAE, STD of the absolute errors, exact and relaxed (±1 level) accuracy.

    ``rating`` is the evaluator's score on the human scale, rounded to a rating level (FIRM-Video's
    models emit ratings). Exact accuracy compares it with the human score rounded to the nearest level
    (human scores averaged over raters are rarely whole numbers); relaxed accuracy counts predictions
    within one level of the human score. STD is the population std of |error|. Source: FIRM-Video,
    "Data Balance and Evaluation Metrics" (MAE, exact and relaxed accuracy) and Table 4 ("STD is
    computed over absolute errors; relaxed accuracy allows a one-point deviation").
    """
    r = np.asarray(rating, dtype=float)
    h = np.asarray(human, dtype=float)
    if len(r) == 0:
        nan = float("nan")
        return RatingErrors(nan, nan, nan, nan)
    ae = np.abs(r - h)
    return RatingErrors(float(ae.mean()), float(ae.std()),
                        float(np.mean(r == _round_half_up(h))), float(np.mean(ae <= 1.0 + 1e-9)))


def _round_half_up(x: np.ndarray) -> np.ndarray:
    """Rounding to the nearest level, halves upward (numpy's default rounds halves to even)."""
    return np.floor(np.asarray(x, dtype=float) + 0.5)


def to_rating(pred: np.ndarray, pred_range: tuple[float, float], human_range: tuple[float, float]) -> np.ndarray:
    """The evaluator's score as a rating level of the human scale (mapped, then rounded)."""
    return _round_half_up(map_to_scale(pred, pred_range, human_range))


# ---------------------------------------------------------------------------------------------------
# Bootstrap over inputs
# ---------------------------------------------------------------------------------------------------


def per_input_values(pred: np.ndarray, human: np.ndarray, groups: Iterable) -> dict[str, np.ndarray]:
    """Per input (in order of first appearance): its within-input SRCC and KRCC (NaN where the input
    does not count, see :func:`within_input_values`) and its pairwise credit and pair count."""
    p = np.asarray(pred, dtype=float)
    h = np.asarray(human, dtype=float)
    idx_by_group = _groups(groups)
    out = {k: np.full(len(idx_by_group), np.nan) for k in ("srcc", "krcc", "credit", "pairs")}
    for j, idx in enumerate(idx_by_group):
        out["credit"][j], out["pairs"][j] = pair_counts(p[idx], h[idx])
        for name, corr in (("srcc", spearman), ("krcc", kendall_tau_b)):
            r = _input_correlation(p[idx], h[idx], corr)
            out[name][j] = np.nan if r is None else r
    return out


def bootstrap_intervals(pred: np.ndarray, human: np.ndarray, groups: Iterable, n_boot: int = 1000,
                        seed: int = 0, fitted: np.ndarray | None = None) -> dict[str, tuple[float, float]]:
    """Percentile 95% intervals of the main figures, resampling inputs whole (with replacement).

    Every statistic is evaluated on the same resamples: global SRCC and KRCC (tau-b) on the pooled
    videos of the drawn inputs; within-input SRCC/KRCC as the mean over the drawn inputs that count;
    pairwise accuracy as the drawn inputs' total credit over their total pairs; with ``fitted`` (the
    predictions through the whole sample's logistic fit, which is held, not refitted), PLCC and RMSE
    of the drawn videos' fitted values. A resample where a statistic is undefined is left out of that
    statistic's interval; fewer than two inputs give no interval.
    """
    p = np.asarray(pred, dtype=float)
    h = np.asarray(human, dtype=float)
    f = np.asarray(fitted, dtype=float) if fitted is not None else None
    idx_by_group = _groups(groups)
    k = len(idx_by_group)
    nan = (float("nan"), float("nan"))
    if k < 2 or n_boot <= 0:
        return {name: nan for name in BOOTSTRAPPED}
    per = per_input_values(p, h, groups)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, k, size=(n_boot, k))
    stats: dict[str, list[float]] = {name: [] for name in BOOTSTRAPPED}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for pick in picks:
            idx = np.concatenate([idx_by_group[j] for j in pick])
            stats["srcc"].append(spearman(p[idx], h[idx]))
            stats["krcc"].append(_kendall_fast(p[idx], h[idx]))
            if f is not None:
                stats["plcc"].append(pearson(f[idx], h[idx]))
                stats["rmse"].append(rmse(f[idx], h[idx]))
            pairs = per["pairs"][pick].sum()
            stats["pairwise_acc"].append(per["credit"][pick].sum() / pairs if pairs else float("nan"))
            stats["within_input_srcc"].append(np.nanmean(per["srcc"][pick]))
            stats["within_input_krcc"].append(np.nanmean(per["krcc"][pick]))
    out = {}
    for name, vals in stats.items():
        v = np.asarray(vals, dtype=float)
        v = v[~np.isnan(v)]
        out[name] = (float(np.percentile(v, 2.5)), float(np.percentile(v, 97.5))) if len(v) else nan
    return out


BOOTSTRAPPED = ("srcc", "krcc", "plcc", "rmse", "pairwise_acc", "within_input_srcc", "within_input_krcc")


def _kendall_fast(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-b in O(n log n) (scipy's), for the resamples; undefined (constant side) is NaN."""
    from scipy.stats import kendalltau  # deferred: start-up time and memory (scipy.stats: ~70 MB, measured)

    if len(x) < 2 or np.all(x == x[0]) or np.all(y == y[0]):
        return float("nan")
    return float(kendalltau(x, y).statistic)


# ---------------------------------------------------------------------------------------------------
# One evaluator against one human dimension, and the whole table
# ---------------------------------------------------------------------------------------------------


@dataclass
class AlignmentResult:
    evaluator: str
    dimension: str
    n_videos: int
    n_inputs: int
    srcc: float
    krcc: float
    plcc: float
    rmse: float
    pairwise_acc: float
    within_input_srcc: float
    within_input_krcc: float
    mae: float
    std_abs_err: float
    accuracy: float
    relaxed_accuracy: float
    n_within_inputs: int
    n_pairs: int
    calibration: str
    preference_acc: float = float("nan")
    intervals: dict[str, tuple[float, float]] = field(default_factory=dict)

    def row(self) -> dict:
        d = asdict(self)
        intervals = d.pop("intervals")
        for name in BOOTSTRAPPED:
            lo, hi = intervals.get(name, (float("nan"), float("nan")))
            d[f"{name}_lo"], d[f"{name}_hi"] = lo, hi
        return d


def align(pred: np.ndarray, human: np.ndarray, groups: Iterable, *, evaluator: str = "", dimension: str = "",
          pred_range: tuple[float, float] | None = None, human_range: tuple[float, float] | None = None,
          n_boot: int = 1000, seed: int = 0) -> AlignmentResult:
    """Every metric of the three source documents for one evaluator on one human dimension.

    ``pred_range`` is the evaluator's scale (observed min/max when not given); ``human_range`` the
    human rating scale (observed min/max when not given).
    """
    p = np.asarray(pred, dtype=float)
    h = np.asarray(human, dtype=float)
    g = list(groups)
    if not (len(p) == len(h) == len(g)):
        raise ValueError(f"align: {len(p)} predictions, {len(h)} human scores and {len(g)} input ids must match")
    nan = float("nan")
    n = len(p)
    if n == 0:
        return AlignmentResult(evaluator, dimension, 0, 0, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan,
                               0, 0, "none", nan)
    cal = fit_logistic4(p, h)
    pair_acc, n_pairs = pairwise_accuracy(p, h, g)
    wi_s, n_wi = within_input_correlation(p, h, g, spearman)
    wi_k, _ = within_input_correlation(p, h, g, kendall_tau_b)
    pr = pred_range or (float(p.min()), float(p.max()))
    hr = human_range or (float(h.min()), float(h.max()))
    errs = rating_errors(to_rating(p, pr, hr), h)
    # Preferences are read on the human scale, so the 0.5 tie tolerance means the same on both sides.
    pref_acc, _ = preference_accuracy(map_to_scale(p, pr, hr), h, g)
    intervals = bootstrap_intervals(p, h, g, n_boot=n_boot, seed=seed,
                                    fitted=cal.fitted if cal.method != "constant" else None)
    return AlignmentResult(
        evaluator=evaluator, dimension=dimension, n_videos=n, n_inputs=len(set(g)),
        srcc=spearman(p, h), krcc=kendall_tau_b(p, h),
        plcc=pearson(cal.fitted, h) if cal.method != "constant" else nan, rmse=rmse(cal.fitted, h),
        pairwise_acc=pair_acc, within_input_srcc=wi_s, within_input_krcc=wi_k,
        mae=errs.mae, std_abs_err=errs.std_abs_err, accuracy=errs.accuracy, relaxed_accuracy=errs.relaxed_accuracy,
        n_within_inputs=n_wi, n_pairs=n_pairs, calibration=cal.method, preference_acc=pref_acc,
        intervals=intervals)


ALIGNMENT_COLUMNS = ["evaluator", "dimension", "n_videos", "n_inputs", "srcc", "krcc", "plcc", "rmse", "pairwise_acc",
                     "within_input_srcc", "within_input_krcc", "mae", "std_abs_err", "accuracy", "relaxed_accuracy",
                     "n_within_inputs", "n_pairs", "srcc_lo", "srcc_hi", "krcc_lo", "krcc_hi", "plcc_lo", "plcc_hi",
                     "rmse_lo", "rmse_hi", "pairwise_acc_lo", "pairwise_acc_hi",
                     "within_input_srcc_lo", "within_input_srcc_hi", "within_input_krcc_lo", "within_input_krcc_hi",
                     "calibration", "preference_acc", "n_raters", "inter_rater_srcc"]
_INT_COLS = {"n_videos", "n_inputs", "n_within_inputs", "n_pairs", "n_raters"}
_STR_COLS = {"evaluator", "dimension", "calibration"}
ALIGNMENT_SCHEMA = {c: (pl.String if c in _STR_COLS else pl.Int64 if c in _INT_COLS else pl.Float64)
                    for c in ALIGNMENT_COLUMNS}


def alignment_table(human: pl.DataFrame, scores: pl.DataFrame, *, dimensions: list[str] | None = None,
                    evaluator_ranges: dict[str, tuple[float, float]] | None = None,
                    human_ranges: dict[str, tuple[float, float]] | None = None,
                    rater_agreement: pl.DataFrame | None = None, n_boot: int = 1000, seed: int = 0) -> pl.DataFrame:
    """One row per (evaluator, human dimension): every metric, on the videos both sides scored.

    ``human``: ``input_id, model, dimension, score`` (one row per video and dimension, raters already
    averaged). ``scores``: ``input_id, model, evaluator, score`` and optionally ``dimension``; an
    evaluator with a dimension column is compared only with the human dimension of the same name,
    one without it with every human dimension. Videos missing on either side, or with a null score,
    are left out; ``n_videos`` says how many were compared.
    """
    evaluator_ranges = evaluator_ranges or {}
    human_ranges = human_ranges or {}
    agreement = {}
    if rater_agreement is not None:
        agreement = {r["dimension"]: r for r in rater_agreement.iter_rows(named=True)}
    dims = sorted(human["dimension"].unique().to_list())
    if dimensions:
        unknown = sorted(set(dimensions) - set(dims))
        if unknown:
            raise ValueError(f"dimension(s) {unknown} not in the human ratings (they have {dims})")
        dims = [d for d in dims if d in dimensions]
    human = human.with_columns(pl.col("score").cast(pl.Float64))
    scores = scores.with_columns(pl.col("score").cast(pl.Float64))
    scores = scores.filter(pl.col("score").is_not_null() & pl.col("score").is_not_nan())
    has_dim = "dimension" in scores.columns
    rows = []
    for evaluator in sorted(scores["evaluator"].unique().to_list()):
        ev = scores.filter(pl.col("evaluator") == evaluator)
        for dim in dims:
            sel = ev
            if has_dim:
                sel = ev.filter(pl.col("dimension").is_null() | (pl.col("dimension") == dim))
                if sel.height == 0:
                    continue
            joined = _pair(human, sel, dim)
            if joined.height == 0:
                continue  # nothing in common: no row rather than a row of undefined figures
            res = align(joined["score"].to_numpy(), joined["human"].to_numpy(), joined["input_id"].to_list(),
                        evaluator=evaluator, dimension=dim, pred_range=evaluator_ranges.get(evaluator),
                        human_range=human_ranges.get(dim), n_boot=n_boot, seed=seed)
            row = res.row()
            a = agreement.get(dim, {})
            row["n_raters"] = a.get("n_raters", 1)
            row["inter_rater_srcc"] = a.get("inter_rater_srcc", float("nan"))
            rows.append(row)
    return pl.DataFrame(rows, schema=ALIGNMENT_SCHEMA, orient="row") if rows else pl.DataFrame(schema=ALIGNMENT_SCHEMA)


def _pair(human: pl.DataFrame, evaluator_scores: pl.DataFrame, dimension: str) -> pl.DataFrame:
    hum = human.filter(pl.col("dimension") == dimension).select("input_id", "model", pl.col("score").alias("human"))
    return (evaluator_scores.select("input_id", "model", "score").join(hum, on=["input_id", "model"], how="inner")
            .sort(["input_id", "model"]))


def paired_scores(human: pl.DataFrame, scores: pl.DataFrame, evaluator: str, dimension: str) -> pl.DataFrame:
    """``input_id, model, score, human``: the videos one evaluator and one human dimension both scored
    (the pairs :func:`alignment_table` computes on; plots draw them)."""
    human = human.with_columns(pl.col("score").cast(pl.Float64))
    ev = scores.with_columns(pl.col("score").cast(pl.Float64))
    ev = ev.filter((pl.col("evaluator") == evaluator) & pl.col("score").is_not_null() & pl.col("score").is_not_nan())
    if "dimension" in ev.columns:
        ev = ev.filter(pl.col("dimension").is_null() | (pl.col("dimension") == dimension))
    return _pair(human, ev, dimension)


def inter_rater_agreement(ratings: pl.DataFrame) -> pl.DataFrame:
    """Per dimension: how many raters, and their mean pairwise SRCC on the videos both rated.

    ``ratings``: ``input_id, model, dimension, rater, score`` (one row per rating). With one rater
    the agreement is undefined (NaN).
    """
    rows = []
    for (dim,), g in ratings.group_by(["dimension"], maintain_order=True):
        raters = sorted(g["rater"].drop_nulls().unique().to_list())
        vals = []
        for i, a in enumerate(raters):
            for b in raters[i + 1:]:
                ja = g.filter(pl.col("rater") == a).group_by("input_id", "model").agg(pl.col("score").mean().alias("a"))
                jb = g.filter(pl.col("rater") == b).group_by("input_id", "model").agg(pl.col("score").mean().alias("b"))
                j = ja.join(jb, on=["input_id", "model"])
                if j.height >= 2:
                    r = spearman(j["a"].to_numpy(), j["b"].to_numpy())
                    if not math.isnan(r):
                        vals.append(r)
        rows.append({"dimension": dim, "n_raters": max(len(raters), 1),
                     "inter_rater_srcc": float(np.mean(vals)) if vals else float("nan")})
    return pl.DataFrame(rows, schema={"dimension": pl.String, "n_raters": pl.Int64, "inter_rater_srcc": pl.Float64},
                        orient="row")


def _f(x, width: int = 6, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-".rjust(width)
    return f"{x:{width}.{digits}f}"


def _ci(lo, hi) -> str:
    if lo is None or hi is None or math.isnan(lo) or math.isnan(hi):
        return "-".rjust(15)
    return f"[{lo:6.3f},{hi:6.3f}]"


ALIGNMENT_LEGEND = """\
columns:
  videos          videos rated by people and scored by the evaluator (the figures use these)
  inputs          inputs (prompts) those videos belong to
  srcc, krcc      Spearman and Kendall rank correlation over all videos (raw scores)
  srcc 95% CI     bootstrap interval of srcc, resampling whole inputs (the stored table and the overview
                  carry those of krcc, plcc, rmse and pair too)
  plcc, rmse      Pearson correlation and root-mean-square error after the four-parameter logistic fit
  pair            pairwise accuracy: share of video pairs of one input ordered as people ordered them
                  (VEFX-Bench tie rules)
  wi_n            inputs with at least two distinct human scores (the within-input figures use these)
  wi_srcc/krcc    within-input Spearman / Kendall, averaged over those inputs (VideoArgus), with interval
  mae, std        mean and standard deviation of the absolute error on the human scale (FIRM-Video)
  acc, acc±1      share of videos whose rounded score equals the human one, or is within one point
  pref            FIRM-Video preference accuracy: pairs of one input, ties within 0.5 on the human scale,
                  1 for a correct preference, 0.5 for a tie called a tie
  -               undefined (too few videos, or no spread)"""


def format_alignment(table: pl.DataFrame) -> str:
    """A plain-text table: one line per evaluator and dimension, the main figures with their 95% intervals."""
    if table.height == 0:
        return "no videos scored by both the evaluator(s) and the human raters"
    ew = max(9, min(40, max(len(e) for e in table["evaluator"].to_list())))
    dw = max(9, min(24, max(len(d) for d in table["dimension"].to_list())))
    head = (f"{'evaluator':<{ew}} {'dimension':<{dw}} {'videos':>6} {'inputs':>6} {'srcc':>6} {'srcc 95% CI':>15} "
            f"{'krcc':>6} {'plcc':>6} {'rmse':>6} {'pair':>6} {'wi_n':>5} {'wi_srcc':>7} {'wi_srcc 95% CI':>15} "
            f"{'wi_krcc':>7} {'mae':>6} {'std':>6} {'acc':>6} {'acc±1':>6} {'pref':>6}")
    lines = [head, "-" * len(head)]
    for r in table.iter_rows(named=True):
        lines.append(
            f"{r['evaluator'][:ew]:<{ew}} {r['dimension'][:dw]:<{dw}} {r['n_videos']:>6} {r['n_inputs']:>6} "
            f"{_f(r['srcc'])} {_ci(r['srcc_lo'], r['srcc_hi'])} {_f(r['krcc'])} {_f(r['plcc'])} {_f(r['rmse'])} "
            f"{_f(r['pairwise_acc'])} {r['n_within_inputs']:>5} {_f(r['within_input_srcc'], 7)} "
            f"{_ci(r['within_input_srcc_lo'], r['within_input_srcc_hi'])} {_f(r['within_input_krcc'], 7)} "
            f"{_f(r['mae'])} {_f(r['std_abs_err'])} {_f(r['accuracy'])} {_f(r['relaxed_accuracy'])} "
            f"{_f(r.get('preference_acc'))}")
    return "\n".join(lines)
