"""Leaderboard: mean final score per task and model (method §9), its rank (equal means share one), and
a 95% interval of both from one bootstrap over the task's inputs; where the order of means contradicts
the pairwise comparisons, and whether the ranking rests on partial evidence."""

from __future__ import annotations

import numpy as np
import polars as pl

from argus_dagster.infra.tables import LEADERBOARD, frame
from argus_dagster.method.judge_noise import final_deviations, judge_sd, noise_sums, ranks_hold
from argus_dagster.method.rubric.taxonomy import DIMENSIONS


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


# Two means closer than this are equal: they share a rank (competition ranking, "1, 1, 3").
RANK_TIE = 1e-9
# Below this share of the rubric's importance weight scored, a ranking rests on partial evidence.
PARTIAL_WEIGHT = 0.5


def competition_ranks(means: np.ndarray) -> np.ndarray:
    """Per entry of ``means`` (models x ... along the last axis): 1 + how many others score strictly
    above it, so equal means share a rank ("1, 1, 3") and nothing breaks a tie; NaN for a NaN mean."""
    above = means[..., None, :] > means[..., :, None] + RANK_TIE
    ranks = 1.0 + above.sum(axis=-1)
    return np.where(np.isnan(means), np.nan, ranks)


def input_bootstrap(sums: np.ndarray, counts: np.ndarray, n_resamples: int = 2000,
                    seed: int = 0, pools: list[np.ndarray] | None = None) -> np.ndarray:
    """Resampled means, ``n_resamples x models``: each resample draws the task's inputs with
    replacement (the same draw for every model, so the models stay paired on their inputs) and a
    model's mean is its drawn videos' scores summed over the number of its drawn videos (the mean
    over videos, as the leaderboard's; an input with several samples weighs by its videos). NaN
    where a resample drew none of a model's inputs. ``sums``, ``counts``: models x inputs. With
    ``pools`` (per model, the judge's deviations on a video's final score), every drawn video's score
    also moves by a deviation drawn from its model's pool: inputs and repeats resampled together."""
    n_inputs = sums.shape[1]
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_inputs, size=(n_resamples, n_inputs))
    flat = (np.arange(n_resamples)[:, None] * n_inputs + draws).ravel()  # how often each resample drew each input
    times = np.bincount(flat, minlength=n_resamples * n_inputs).reshape(n_resamples, n_inputs).astype(float)
    total, videos = times @ sums.T, times @ counts.T
    if pools is not None:  # drawn after the inputs: without noise the resamples are what they were
        noise_rng = np.random.default_rng(seed + 1)
        for m, pool in enumerate(pools):
            total[:, m] += (times * noise_sums(pool, counts[m], n_resamples, noise_rng)).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(videos > 0, total / videos, np.nan)


def rank_intervals(resampled: np.ndarray) -> list[tuple[int, int] | None]:
    """Per model (a column of ``resampled``): the ranks it takes in 95% of the resamples (their 2.5th
    and 97.5th percentiles), None for a model never drawn."""
    ranks = competition_ranks(resampled)
    out = []
    for col in ranks.T:
        col = col[~np.isnan(col)]
        out.append((int(np.percentile(col, 2.5, method="lower")), int(np.percentile(col, 97.5, method="higher")))
                   if len(col) else None)
    return out


def losses_against_lower_ranks(models: list[str], ranks: list[int | None], per_input: np.ndarray,
                               has: np.ndarray) -> list[str | None]:
    """Per model: the models ranked below it that score above it on most of the inputs both have
    (``per_input``: each model's mean per input; ``has``: where it has one), e.g. ``original on 3 of
    4 inputs``; None when the order of means agrees with every pairwise comparison."""
    out = []
    for a in range(len(models)):
        notes = []
        for b in range(len(models)):
            rank_a, rank_b = ranks[a], ranks[b]
            if rank_a is None or rank_b is None or rank_b <= rank_a:
                continue
            shared = has[a] & has[b]
            n = int(shared.sum())
            wins = int((per_input[b][shared] > per_input[a][shared]).sum())
            if n and 2 * wins > n:
                notes.append(f"{models[b]} on {wins} of {n} inputs")
        out.append("; ".join(notes) or None)
    return out


def unscored_dimensions(criteria: pl.DataFrame | None, task: str, model: str) -> list[str]:
    """The dimensions of ``model``'s rubric criteria of ``task`` that no score judged on any of its
    videos, by name (``criteria``: the criterion scores, with ``dimension`` and ``score``)."""
    if criteria is None or not criteria.height or not {"dimension", "score"} <= set(criteria.columns):
        return []
    g = criteria.filter((pl.col("task") == task) & (pl.col("model") == model))
    judged = g.group_by("dimension").agg(pl.col("score").is_not_null().any().alias("judged"))
    dims = sorted(d for d, j in judged.iter_rows() if d is not None and not j)
    return [DIMENSIONS.get(int(d), f"dimension {d}") for d in dims]


def dimension_means(criteria: pl.DataFrame | None, task: str, model: str) -> tuple[list[int], list[float]]:
    """``model``'s mean criterion score per dimension of ``task`` that some score judged (its scored
    criteria over all its videos), dimensions by number: ``([9, 12], [7.9, 0.5])``."""
    if criteria is None or not criteria.height or not {"dimension", "score"} <= set(criteria.columns):
        return [], []
    g = criteria.filter((pl.col("task") == task) & (pl.col("model") == model) & pl.col("score").is_not_null()
                        & pl.col("dimension").is_not_null())
    means = g.group_by("dimension").agg(pl.col("score").cast(pl.Float64).mean()).sort("dimension")
    return [int(d) for d in means["dimension"].to_list()], [float(m) for m in means["score"].to_list()]


def rests_on_partial_evidence(rows: list[dict]) -> bool:
    """Whether a task's ranking rests on partial evidence: some model's scored criteria cover less than
    half of the rubric weight. Then no overall leader is named; the ranking per dimension leads."""
    return any(r.get("partial_evidence") for r in rows)


def dimension_ranking(rows: list[dict]) -> list[tuple[int, str, list[tuple[str, float]]]]:
    """Per dimension some model of the task was measured on (by number): its name and the models'
    mean criterion scores, best first (ties by name), from the leaderboard rows' ``dimensions`` and
    ``dimension_means``."""
    per: dict[int, list[tuple[str, float]]] = {}
    for r in rows:
        for d, m in zip(r.get("dimensions") or [], r.get("dimension_means") or []):
            if d is not None and m is not None:
                per.setdefault(int(d), []).append((str(r["model"]), float(m)))
    return [(d, DIMENSIONS.get(d, f"dimension {d}"), sorted(per[d], key=lambda mm: (-mm[1], mm[0]))) for d in sorted(per)]


def ranking_text(ranking: list[tuple[str, float]]) -> str:
    """``faithful 9.07 > blurry 8.40 = frozen 8.40 > flicker 0.47``: best first, equal means joined by ``=``."""
    out = ""
    for k, (model, mean) in enumerate(ranking):
        if k:
            out += " = " if abs(ranking[k - 1][1] - mean) <= RANK_TIE else " > "
        out += f"{model} {mean:.2f}"
    return out


def dimension_leaders(ranking: list[tuple[str, float]]) -> list[str]:
    """The models at the best mean of one dimension's ranking."""
    return [m for m, v in ranking if ranking and v >= ranking[0][1] - RANK_TIE]


def _task_ranks(g: pl.DataFrame, models: list[str], means: list[float | None],
                noise: pl.DataFrame | None = None) -> dict[str, dict]:
    """Per model of one task: its rank, its score and rank intervals from one bootstrap over inputs,
    whether it shares the top, and the models below it that beat it on most shared inputs. With the
    judge's ``noise`` (:mod:`~argus_dagster.method.judge_noise`, measured with this judge), the bootstrap
    resamples inputs and repeats together, and each rank says whether it holds under that noise."""
    ok = g.filter(pl.col("final_score").is_not_null())
    ids = (ok["input_id"].cast(pl.String).to_list() if "input_id" in ok.columns
           else [str(k) for k in range(ok.height)])  # without input ids every video is its own input
    inputs = sorted(set(ids))
    col = {m: k for k, m in enumerate(models)}
    sums, counts = np.zeros((len(models), len(inputs))), np.zeros((len(models), len(inputs)))
    where = {i: k for k, i in enumerate(inputs)}
    for m, i, s in zip(ok["model"].to_list(), ids, ok["final_score"].to_list()):
        sums[col[m], where[i]] += s
        counts[col[m], where[i]] += 1
    point = np.array([np.nan if v is None else v for v in means], dtype=float)
    ranks = [None if np.isnan(r) else int(r) for r in competition_ranks(point)]
    task = str(g["task"][0]) if g.height and "task" in g.columns else ""
    pools = noise_pools(noise, task, models)
    resampled = (input_bootstrap(sums, counts, pools=pools) if inputs else np.full((1, len(models)), np.nan))
    holds = (ranks_hold(sums, counts, pools or [], ranks, competition_ranks) if pools and inputs
             else [None] * len(models))
    intervals = rank_intervals(resampled)
    has = counts > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        per_input = np.where(has, sums / np.where(has, counts, 1), np.nan)
    loses = losses_against_lower_ranks(models, ranks, per_input, has)
    out = {}
    for k, m in enumerate(models):
        vals = resampled[:, k][~np.isnan(resampled[:, k])]
        lo, hi = ((float(np.percentile(vals, 2.5)), float(np.percentile(vals, 97.5))) if len(vals) and ranks[k]
                  else (None, None))
        interval = intervals[k]
        rl, rh = interval if interval and ranks[k] else (None, None)
        out[m] = {"ci_low": lo, "ci_high": hi, "rank": ranks[k], "rank_low": rl, "rank_high": rh,
                  "shares_top": None if ranks[k] is None else bool(ranks[k] == 1 or rl == 1),
                  "loses_to": loses[k],
                  "judge_sd": judge_sd(pools[k]) if pools else None, "rank_holds_under_noise": holds[k]}
    return out


def noise_pools(noise: pl.DataFrame | None, task: str, models: list[str]) -> list[np.ndarray] | None:
    """Per model of ``task``: the deviations of its videos' final scores over the judge's repeats (a
    model never judged again takes the task's, the same judge's); None where the task has none."""
    if noise is None or not noise.height:
        return None
    every = final_deviations(noise, task)
    if not len(every):
        return None
    pools = []
    for m in models:
        own = final_deviations(noise, task, m)
        pools.append(own if len(own) else every)
    return pools


def build_leaderboard(video_scores: pl.DataFrame, bench: str | None = None, profile: str | None = None,
                      criteria: pl.DataFrame | None = None, noise: pl.DataFrame | None = None) -> pl.DataFrame:
    """Per task and model: the mean final score, its rank and their intervals, and what those scores
    cover (mean criteria scored of how many, share of importance weight, judges, criteria that need a
    VLM, the dimensions no score judged: from ``criteria``, the criterion scores, where given).

    A model is ranked over all its videos: with several samples of an input, every sample is one
    video of the mean (``n_videos`` counts them), as drawing N samples per prompt measures the model's
    typical video, not its best (best-of-N is :mod:`~argus_dagster.protocols.best_of_n`). The intervals come from
    one bootstrap over the task's inputs (:func:`input_bootstrap`): the inputs are what varies between
    benches, and the samples of one input are not independent of each other. Equal means share a rank
    (:func:`competition_ranks`); a model shares the top when rank 1 lies in its rank interval.

    ``noise``: the judge's repeats (``argus evaluate --repeat``); only those made by the judge that
    scored these videos count. Then ``judge_sd`` and ``rank_holds_under_noise`` are filled and the
    intervals resample the repeats with the inputs (:func:`_task_ranks`)."""
    rows = []
    if video_scores.height:
        for (task,), tg in video_scores.group_by(["task"], maintain_order=True):
            task_rows = []
            for (model,), g in tg.group_by(["model"], maintain_order=True):
                ok = g.filter(pl.col("final_score").is_not_null())
                finals = ok["final_score"].to_numpy()
                cols = set(g.columns)
                judges = sorted({j.strip() for v in (ok["judge"] if "judge" in cols else []) if v for j in v.split(",")})
                needs = sorted({c for v in (ok["needs_vlm"] if "needs_vlm" in cols else []) if v is not None for c in v})
                weight = _mean(ok["weight_scored"].to_list()) if "weight_scored" in cols else None
                unscored = unscored_dimensions(criteria, task, model)
                dims, dim_means = dimension_means(criteria, task, model)
                task_rows.append({"bench": bench, "profile": profile, "task": task, "model": model,
                                  "mean_final": float(finals.mean()) if len(finals) else None,
                                  "n_videos": int(len(finals)), "n_errors": int(g.height - len(finals)),
                                  "n_scored": _mean(ok["n_scored"].to_list()) if "n_scored" in cols else None,
                                  "n_criteria": _mean(ok["n_criteria"].to_list()) if "n_criteria" in cols else None,
                                  "weight_scored": weight,
                                  "covers": usual_coverage(ok["n_scored"].to_list(), ok["n_criteria"].to_list())
                                  if {"n_scored", "n_criteria"} <= cols else None,
                                  "judge": ", ".join(judges) or None, "needs_vlm": needs,
                                  "ci_scope": "scored criteria only" if needs or ("n_scored" in cols and any(
                                      (a or 0) < (b or 0) for a, b in zip(ok["n_scored"], ok["n_criteria"]))) else "all criteria",
                                  "partial_evidence": None if weight is None else weight < PARTIAL_WEIGHT,
                                  "not_judged": ", ".join(unscored or needs) or None,
                                  "dimensions": dims, "dimension_means": dim_means})
            ranked = _task_ranks(tg, [r["model"] for r in task_rows], [r["mean_final"] for r in task_rows],
                                 _same_judge(noise, tg))
            rows += [{**r, **ranked[r["model"]]} for r in task_rows]
    return frame(rows, LEADERBOARD).sort(["task", "rank", "model"], nulls_last=True)


def _same_judge(noise: pl.DataFrame | None, scores: pl.DataFrame) -> pl.DataFrame | None:
    """The repeats of ``noise`` made by a judge that scored ``scores`` (a stale measurement of another
    judge says nothing of this one's noise)."""
    if noise is None or not noise.height or "judge" not in scores.columns:
        return None
    judges = {j.strip() for v in scores["judge"].drop_nulls().to_list() for j in str(v).split(",")}
    kept = noise.filter(pl.col("judge").is_in(sorted(judges)))
    return kept if kept.height else None


def usual_coverage(n_scored: list, n_criteria: list, unit: str = "videos") -> str:
    """What scores cover in whole criteria: the commonest (scored, of) pair of the scored videos given,
    ``3 of 8 criteria on most videos``, or ``on 4 of 9 videos`` where that count is not most of them
    (the larger pair first on a tie); empty without a video."""
    pairs = [(int(a), int(b)) for a, b in zip(n_scored, n_criteria) if a is not None and b is not None]
    if not pairs:
        return ""
    counts: dict[tuple[int, int], int] = {}
    for pair in pairs:
        counts[pair] = counts.get(pair, 0) + 1
    (scored, of), n = max(counts.items(), key=lambda kv: (kv[1], kv[0][1], kv[0][0]))
    where = (f"on every {unit[:-1]}" if len(pairs) == 1 else f"on all {len(pairs)} {unit}") if n == len(pairs) else (
        f"on most {unit}" if n * 2 > len(pairs) else f"on {n} of {len(pairs)} {unit}")
    return f"{scored} of {of} criteria {where}"


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


def rank_text(r: dict) -> str:
    """``1-3``: the ranks a model takes in 95% of the resamples (``1`` when it is one)."""
    lo, hi = r.get("rank_low"), r.get("rank_high")
    if lo is None or hi is None:
        return "-"
    return f"{lo}" if lo == hi else f"{lo}-{hi}"


def top_models(rows: list[dict]) -> list[str]:
    """The models of one task that share the top: rank 1, or rank 1 within their rank interval; in a
    table without rank columns, every model at the best mean."""
    scored = [r for r in rows if r.get("mean_final") is not None]
    if not scored:
        return []
    if all(r.get("shares_top") is not None for r in scored):
        return [str(r["model"]) for r in scored if r["shares_top"]]
    best = max(r["mean_final"] for r in scored)
    return [str(r["model"]) for r in scored if r["mean_final"] >= best - RANK_TIE]


def partial_evidence_text(rows: list[dict]) -> str | None:
    """``the ranking rests on partial evidence: the scored criteria cover 39% of the rubric weight
    (not judged: physical plausibility, ...)`` when some model's scores cover less than half of the
    weight; None otherwise."""
    partial = [r for r in rows if r.get("partial_evidence")]
    if not partial:
        return None
    weights = [r["weight_scored"] for r in partial if r.get("weight_scored") is not None]
    share = (f"{min(weights):.0%}" if min(weights) == max(weights) or len(weights) == 1
             else f"{min(weights):.0%}-{max(weights):.0%}") if weights else "less than half"
    missing: list[str] = []
    for r in partial:
        for name in (r.get("not_judged") or "").split(", "):
            if name and name not in missing:
                missing.append(name)
    return (f"the ranking rests on partial evidence: the scored criteria cover {share} of the rubric weight"
            + (f" (not judged: {', '.join(missing)})" if missing else ""))


def noise_text(rows: list[dict]) -> str | None:
    """What the judge's own noise (``argus evaluate --repeat``) means for a task's ranks, in one line;
    None where it was never measured."""
    measured = [r for r in rows if r.get("judge_sd") is not None]
    if not measured:
        return None
    if all(r["judge_sd"] == 0 for r in measured):
        return ("the judge's noise: none, a band of zero (a deterministic judge: the same evidence always gets "
                "the same score), so every rank holds under it")
    sds = [float(r["judge_sd"]) for r in measured]
    spread = f"{min(sds):.2f}" if max(sds) - min(sds) < 0.005 else f"{min(sds):.2f}-{max(sds):.2f}"
    loose = [str(r["model"]) for r in measured if r.get("rank_holds_under_noise") is False]
    return (f"the judge's noise: sd {spread} on a video's final score (judged again, --repeat); "
            + (f"the ranks of {', '.join(loose)} do not hold under it" if loose else "every rank holds under it"))


def format_leaderboard(lb: pl.DataFrame) -> str:
    """Plain-text tables, one per task, best model first: equal scores share a rank, each rank with
    the ranks the model takes in 95% of the bootstrap's resamples; then which models share the top,
    where the order of means contradicts a pairwise comparison, and whether the ranking rests on
    partial evidence."""
    out = []
    for task in sorted(lb["task"].unique().to_list()):
        g = lb.filter(pl.col("task") == task)
        rows = g.to_dicts()
        has_ranks = "rank" in g.columns and g["rank"].drop_nulls().len() > 0
        out.append(f"{task}")
        partial_task = rests_on_partial_evidence(rows)
        if partial_task:  # no crowned leader: the ranking per measured dimension leads, the overall rank is marked
            out.append(f"  no overall leader: {partial_evidence_text(rows)}")
            ranking = dimension_ranking(rows)
            if ranking:
                out.append("  per measured dimension (mean criterion score, best first):")
                out += [f"    {d} {name}: {ranking_text(r)}" for d, name, r in ranking]
        width = max([41] + [len(f"{r['covers']} · {r.get('judge') or 'no judge'}") for r in rows if r.get("covers")])
        out.append(f"  {'rank':>4}  {'95% rank':>8}  {'model':<18} {'final':>6}  {'covers':<{width}} {'95% CI*':>13}  {'n':>3}  {'errors':>6}")
        needs: set[str] = set()
        partial = False
        means = np.array([np.nan if r["mean_final"] is None else r["mean_final"] for r in rows], dtype=float)
        fallback = competition_ranks(means)
        for k, r in enumerate(rows):
            rank = r.get("rank") if has_ranks else (None if np.isnan(fallback[k]) else int(fallback[k]))
            score = f"{r['mean_final']:6.2f}" if r["mean_final"] is not None else "     -"
            ci = f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}]" if r["ci_low"] is not None else "-"
            covers = (f"{r['covers']} · {r.get('judge') or 'no judge'}" if r.get("covers")
                      else coverage_text(r.get("n_scored"), r.get("n_criteria"), r.get("judge")))
            shown = "-" if rank is None else (f"({rank})" if partial_task else str(rank))
            out.append(f"  {shown:>4}  {rank_text(r):>8}  {r['model']:<18} {score}  "
                       f"{covers:<{width}} {ci:>13}  {r['n_videos']:>3}  {r['n_errors']:>6}")
            needs |= set(r.get("needs_vlm") or [])
            partial |= r.get("ci_scope") == "scored criteria only"
        out.append("  * the interval covers " + ("the scored criteria only" if partial else "all criteria"))
        top = top_models(rows)
        if partial_task:
            out.append("  (rank): the overall rank, on partial evidence: not a verdict")
        elif len(top) > 1:
            out.append(f"  no single leader: {', '.join(top)} share the top (rank 1 within their 95% rank interval)")
        for r in rows:
            if r.get("loses_to"):
                out.append(f"  {r['model']} is ranked above, but loses to {r['loses_to']}")
        if needs:
            out.append(f"  needs a VLM (not scored): {', '.join(sorted(needs))}")
        noise = noise_text(rows)
        if noise:
            out.append(f"  {noise}")
        out.append("")
    return "\n".join(out)


def pairwise_win_rates(video_scores: pl.DataFrame, task: str, models: list[str], n_resamples: int = 1000,
                       seed: int = 0) -> dict[tuple[str, str], dict]:
    """Per ordered pair of ``models`` of ``task``: how often the first's video scores above the
    second's on the inputs both have a final score for (a tie counts half; an input with several
    samples compares their means), with a percentile bootstrap 95% interval over those inputs
    (seeded). ``{(a, b): {"rate", "low", "high", "n"}}``; a pair without a shared input is left out,
    and a score that is not a number is no score.

    A pair's outcomes are wins, ties and losses, so a resample of its ``n`` shared inputs is one
    multinomial draw of those three counts: the same resampled rates as drawing the inputs one by one,
    in time that does not grow with the inputs (the matrix has models squared cells; each costs the
    resamples, not resamples times inputs). ``(b, a)`` reads the same draws from the other side, so
    its interval mirrors ``(a, b)``'s."""
    if video_scores is None or not video_scores.height:
        return {}
    per_input = (video_scores.filter((pl.col("task") == task) & pl.col("final_score").is_not_null()
                                     & pl.col("final_score").is_not_nan())
                 .group_by("model", "input_id").agg(pl.col("final_score").mean()))
    stored = set(per_input["model"].to_list())
    names = list(dict.fromkeys(m for m in models if m in stored))
    if not names:
        return {}
    row = {m: k for k, m in enumerate(names)}
    per_input = per_input.filter(pl.col("model").is_in(names))
    column = {i: k for k, i in enumerate(per_input["input_id"].unique().to_list())}
    score = np.zeros((len(names), len(column)))  # models x inputs
    has = np.zeros(score.shape, dtype=bool)
    at = ([row[m] for m in per_input["model"].to_list()], [column[i] for i in per_input["input_id"].to_list()])
    score[at], has[at] = per_input["final_score"].to_numpy(), True
    rng = np.random.default_rng(seed)
    out = {}
    for a in range(len(names)):
        later = slice(a + 1, None)  # every pair once: a against each model after it
        both = has[a] & has[later]
        shared = both.sum(axis=1)
        others = np.flatnonzero(shared)
        if not others.size:
            continue
        n = shared[others]
        wins = ((score[a] > score[later]) & both).sum(axis=1)[others]
        ties = ((score[a] == score[later]) & both).sum(axis=1)[others]
        counts = np.stack([wins, ties, n - wins - ties], axis=1)  # per other model: a's wins, ties, a's losses
        draws = rng.multinomial(n, counts / n[:, None], size=(n_resamples, len(others)))
        for won, a_first in ((0, True), (2, False)):  # a's rate over each, then each one's over a
            rates = (counts[:, won] + 0.5 * counts[:, 1]) / n
            lows, highs = np.percentile((draws[..., won] + 0.5 * draws[..., 1]) / n, [2.5, 97.5], axis=0)
            for k, b in enumerate(a + 1 + others):
                pair = (names[a], names[b]) if a_first else (names[b], names[a])
                out[pair] = {"rate": float(rates[k]), "low": float(lows[k]), "high": float(highs[k]), "n": int(n[k])}
    return out
