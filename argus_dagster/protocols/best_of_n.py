"""Best-of-N selection: the best of an input's N candidates by a chosen evaluator (FIRM-Video,
Appendix 3: "the candidate with the highest corresponding reward is selected").

Candidates are the videos of one input: N models (``candidates/<TASK>/<model>/<id>.mp4``), or N
samples of one model. Both sample layouts are read (:func:`discover_candidates`):

- ``<model>/<id>/<k>.mp4``: a folder per input, one file per sample ``k`` (digits);
- ``<model>/<id>__<k>.mp4``: the sample number after a double underscore.

A stem ``x__3`` is the sample 3 of ``x`` unless ``x__3`` is itself an input id of the bench (pass
``known_ids``), so an id that happens to contain ``__<digits>`` keeps working. With ``known_ids``, a
file or folder named by an id's :func:`~argus_dagster.infra.names.file_name` (ids that are not plain names)
is read as that id. The single-video layout is sample ``""``. A candidate is named by ``model`` and
``sample``. The graph reads a model's folder the same way (:func:`~argus_dagster.method.bench.model_samples`),
so its ``video_scores`` and ``firm_scores`` hold a row per sample with its ``sample`` column.

The evaluator is a score column (``final`` for VideoArgus, ``if``/``wc``/``pq`` for FIRM-Video
ratings, ``if_score``/``wc_score`` for FIRM-Video's continuous checklist scores) or a weighted mix of
columns; a mix puts every column on [0, 1] by its scale (:data:`SCALES`) before weighting, so a 0-10
score and a 1-5 rating weigh what their weights say. Candidates within ``tie_tolerance`` of the best
are tied, which 1-5 ratings often are. A tie is broken without regard to names: first by the
continuous score behind the rating (:data:`CONTINUOUS`: ``if`` by ``if_score``, ``wc`` by
``wc_score``, in a mix each rating replaced by its score), then by a random draw seeded by ``seed``
and the input id (the same pick on every run, uniform over the tied candidates). The row says how
the tie was broken (``tie_break``) and which candidates the draw chose among (``drawn_from``); the
margin is the best minus the runner-up (0 on a tie).

With human ratings, :func:`against_humans` reports how often the pick is a human-best candidate and
the mean human score of picks against random choice (the mean of the input's candidates: the exact
expectation of a uniform pick), with a percentile-bootstrap 95% interval over inputs, as the seed's
best-of-N experiment compares a reward model with random sampling. A pick made by the draw counts as
the expectation over the candidates drawn from, so the hit rate does not depend on the draw's luck.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Iterable, cast

import numpy as np
import polars as pl

from argus_dagster.infra.names import model_name_problem
from argus_dagster.method.bench import SAMPLE_STEM, model_samples
from argus_dagster.protocols.alignment.ratings import read_human

SCALES = {"final": (0.0, 10.0), "base": (0.0, 10.0), "if": (1.0, 5.0), "wc": (1.0, 5.0), "pq": (1.0, 5.0),
          "if_rating": (1.0, 5.0), "wc_rating": (1.0, 5.0), "pq_rating": (1.0, 5.0), "if_score": (0.0, 1.0),
          "wc_score": (0.0, 1.0)}

# The continuous score behind a rating: what breaks a tie on the rating.
CONTINUOUS = {"if": "if_score", "wc": "wc_score", "if_rating": "if_score", "wc_rating": "wc_score"}

CANDIDATE_SCHEMA = {"model": pl.String, "input_id": pl.String, "sample": pl.String, "uri": pl.String}
PICK_SCHEMA: dict[str, pl.DataType | type[pl.DataType]] = {
    "input_id": pl.String, "evaluator": pl.String, "n_candidates": pl.Int64, "n_scored": pl.Int64,
    "pick_model": pl.String, "pick_sample": pl.String, "pick_score": pl.Float64,
    "runner_up_model": pl.String, "runner_up_sample": pl.String, "runner_up_score": pl.Float64,
    "margin": pl.Float64, "n_tied": pl.Int64, "tied": pl.List(pl.String), "tie_break": pl.String,
    "drawn_from": pl.List(pl.String), "reason": pl.String}


def discover_candidates(task_dir: str | Path, known_ids: Iterable[str] | None = None) -> tuple[pl.DataFrame, list[str]]:
    """``(model, input_id, sample, uri)`` rows under ``candidates/<TASK>/``, and the entries left out
    with the reason (a file that is not a video, a sample folder entry that is not ``<digits>.<ext>``).
    Each model's folder is read as the graph's ``candidate_videos`` reads it
    (:func:`~argus_dagster.method.bench.model_samples`)."""
    root = Path(task_dir)
    known = list(known_ids) if known_ids is not None else None
    rows, problems = [], []
    if not root.is_dir():
        return pl.DataFrame(schema=CANDIDATE_SCHEMA), [f"{root}: no such folder"]
    for model_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
        bad = model_name_problem(model_dir.name)
        if bad:
            problems.append(f"{model_dir}: left out, {bad}")
            continue
        found, why = model_samples(model_dir, known)
        rows += [(model_dir.name, iid, sample, str(path)) for iid, sample, path in found]
        problems += why
    return pl.DataFrame(rows, schema=CANDIDATE_SCHEMA, orient="row"), problems


def split_samples(scores: pl.DataFrame, known_ids: Iterable[str] | None = None) -> pl.DataFrame:
    """``scores`` with a ``sample`` column: an ``input_id`` of the form ``<id>__<k>`` (the flat layout, as
    the candidate store lists it) becomes ``<id>`` and sample ``k``, unless it is itself a known id."""
    known = set(known_ids) if known_ids is not None else None

    def split(iid: str) -> tuple[str, str]:
        m = SAMPLE_STEM.fullmatch(iid)
        if m and not (known is not None and (iid in known or m.group(1) not in known)):
            return m.group(1), str(int(m.group(2)))
        return iid, ""

    pairs = [split(i) for i in scores["input_id"].cast(pl.String).to_list()]
    base = scores.drop("sample") if "sample" in scores.columns else scores
    return base.with_columns(pl.Series("input_id", [p[0] for p in pairs], dtype=pl.String),
                             pl.Series("sample", [p[1] for p in pairs], dtype=pl.String))


def selection_table(video_scores: pl.DataFrame | None = None, firm_scores: pl.DataFrame | None = None,
                    known_ids: Iterable[str] | None = None) -> pl.DataFrame:
    """``input_id, model, sample, final, if, wc, pq, if_score, wc_score``: VideoArgus finals
    (``video_scores``) and FIRM ratings and scores (``firm_scores``) of the same candidates side by side (an outer join on input, model and
    sample: a column is null where its evaluator did not score the video). The sample is the tables'
    ``sample`` column (the graph's tables have it); a table without one has its samples split from
    the ids (:func:`split_samples`)."""
    keys = ["input_id", "model", "sample"]

    def with_samples(df: pl.DataFrame) -> pl.DataFrame:
        if "sample" in df.columns:
            return df.with_columns(pl.col("sample").cast(pl.String).fill_null(""))
        return split_samples(df, known_ids)

    parts = []
    if video_scores is not None:
        parts.append(with_samples(video_scores).select(
            pl.col("input_id").cast(pl.String), pl.col("model").cast(pl.String), "sample",
            pl.col("final_score").cast(pl.Float64).alias("final")))
    if firm_scores is not None:
        fs = with_samples(firm_scores)
        parts.append(fs.select(
            pl.col("input_id").cast(pl.String), pl.col("model").cast(pl.String), "sample",
            *[pl.col(f"{d}_rating").cast(pl.Float64).alias(d) for d in ("if", "wc", "pq")],
            *[(pl.col(c) if c in fs.columns else pl.lit(None)).cast(pl.Float64).alias(c)
              for c in ("if_score", "wc_score")]))
    if not parts:
        raise ValueError("best-of-N: give video_scores, firm_scores or both")
    out = parts[0]
    for other in parts[1:]:
        out = out.join(other, on=keys, how="full", coalesce=True)
    cols = ("final", "if", "wc", "pq", "if_score", "wc_score")
    for col in cols:
        if col not in out.columns:
            out = out.with_columns(pl.lit(None, dtype=pl.Float64).alias(col))
    return out.select(*keys, *cols)


def evaluator_score(scores: pl.DataFrame, by: str | dict[str, float],
                    scales: dict[str, tuple[float, float]] | None = None) -> tuple[pl.Series, str]:
    """The selection score of every row, and the evaluator's name. A column is used as it is; a mix
    ``{column: weight}`` is ``Σ w·(x − lo)/(hi − lo) / Σ w`` and null when any of its columns is null."""
    if isinstance(by, str):
        if by not in scores.columns:
            raise ValueError(f"best-of-N: score column {by!r} is not in the table (it has {scores.columns})")
        return scores[by].cast(pl.Float64), by
    scales = {**SCALES, **(scales or {})}
    if not by or any(w < 0 for w in by.values()) or sum(by.values()) <= 0:
        raise ValueError(f"best-of-N: weights {by!r} must be non-negative with a positive sum")
    expr: pl.Expr | None = None
    for col, w in by.items():
        if col not in scores.columns:
            raise ValueError(f"best-of-N: score column {col!r} is not in the table (it has {scores.columns})")
        if col not in scales:
            raise ValueError(f"best-of-N: no scale for {col!r} (pass scales={{{col!r}: (lo, hi)}})")
        lo, hi = scales[col]
        term = (pl.col(col).cast(pl.Float64) - lo) / (hi - lo) * w
        expr = term if expr is None else expr + term
    name = "+".join(f"{w:g}*{c}" for c, w in by.items())
    assert expr is not None  # by has at least one column
    return scores.select((expr / sum(by.values())).alias("s"))["s"], name


def tie_breaker(by: str | dict[str, float], columns: Iterable[str]) -> str | dict[str, float] | None:
    """The continuous evaluator that breaks ties of ``by``: its rating's score (:data:`CONTINUOUS`), or
    the mix with each rating replaced by its score; None when ``by`` has no rating with a score here."""
    cols = set(columns)
    if isinstance(by, str):
        c = CONTINUOUS.get(by)
        return c if c in cols else None
    swapped = {(CONTINUOUS[c] if CONTINUOUS.get(c) in cols else c): w for c, w in by.items()}
    return swapped if set(swapped) != set(by) else None


def _draw_keys(seed: int, input_id: str, n: int) -> np.ndarray:
    """Uniform keys for an input's candidates (in (model, sample) order); the smallest wins a draw."""
    digest = hashlib.sha256(f"{seed}\x00{input_id}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "big")).random(n)


def select_best(scores: pl.DataFrame, by: str | dict[str, float] = "final", *, tie_tolerance: float = 1e-9,
                scales: dict[str, tuple[float, float]] | None = None, seed: int = 0) -> pl.DataFrame:
    """One row per input: the pick, its score, the runner-up, the margin, the candidates tied at the
    top and how the tie was broken (:data:`PICK_SCHEMA`; the module docstring says how). ``scores`` has
    ``input_id``, ``model``, optionally ``sample`` and the score column(s); a candidate without a score
    is not picked and an input with none says so."""
    s, name = evaluator_score(scores, by, scales)
    breaker = tie_breaker(by, scores.columns)
    c, c_name = evaluator_score(scores, breaker, scales) if breaker is not None else (None, "")
    df = scores.with_columns(s.alias("_s"), (c if c is not None else pl.lit(None, dtype=pl.Float64)).alias("_c"))
    if "sample" not in df.columns:
        df = df.with_columns(pl.lit("").alias("sample"))
    df = df.with_columns(pl.col("sample").cast(pl.String).fill_null(""), pl.col("model").cast(pl.String),
                         pl.col("input_id").cast(pl.String), pl.col("_c").fill_nan(None))
    rows = []
    for (iid,), g in df.sort("input_id", "model", "sample").group_by("input_id", maintain_order=True):
        g = g.with_columns(pl.Series("_u", _draw_keys(seed, iid, g.height)))
        scored = g.filter(pl.col("_s").is_not_null() & pl.col("_s").is_not_nan())
        row = {"input_id": iid, "evaluator": name, "n_candidates": g.height, "n_scored": scored.height,
               "pick_model": None, "pick_sample": None, "pick_score": None, "runner_up_model": None,
               "runner_up_sample": None, "runner_up_score": None, "margin": None, "n_tied": 0, "tied": [],
               "tie_break": "", "drawn_from": [], "reason": ""}
        if scored.height == 0:
            row["reason"] = f"no candidate of {g.height} has a score by {name}"
            rows.append(row)
            continue
        # best first: the evaluator's score, then the continuous score (none last), then the draw
        ranked = scored.sort(["_s", "_c", "_u"], descending=[True, True, False], nulls_last=True)
        best = cast(float, ranked["_s"][0])
        top = ranked.filter(pl.col("_s") >= best - tie_tolerance)
        pool, steps = top, []
        if top.height > 1 and breaker is not None and top["_c"].drop_nulls().len():
            best_c = cast(float, top["_c"].max())
            pool = top.filter(pl.col("_c") >= best_c - tie_tolerance)
            steps.append(f"by {c_name}")
        if pool.height > 1:
            steps.append(f"a draw of {pool.height} (seed {seed})")
        pick = pool.sort("_u").row(0, named=True)
        rest = ranked.filter(~((pl.col("model") == pick["model"]) & (pl.col("sample") == pick["sample"])))
        row.update(pick_model=pick["model"], pick_sample=pick["sample"], pick_score=float(pick["_s"]),
                   n_tied=top.height if top.height > 1 else 0,
                   tied=[_name(r["model"], r["sample"]) for r in top.sort("model", "sample").iter_rows(named=True)]
                   if top.height > 1 else [],
                   tie_break=", then ".join(steps),
                   drawn_from=[_name(r["model"], r["sample"]) for r in pool.sort("model", "sample").iter_rows(named=True)]
                   if pool.height > 1 else [])
        if rest.height:
            ru = rest.row(0, named=True)
            row.update(runner_up_model=ru["model"], runner_up_sample=ru["sample"], runner_up_score=float(ru["_s"]),
                       margin=0.0 if top.height > 1 else float(pick["_s"] - ru["_s"]))
        else:
            row["reason"] = "one scored candidate: no runner-up"
        if scored.height < g.height:
            row["reason"] = (row["reason"] + "; " if row["reason"] else "") + \
                f"{g.height - scored.height} candidate(s) without a score by {name} not considered"
        rows.append(row)
    return pl.DataFrame(rows, schema=PICK_SCHEMA, orient="row") if rows else pl.DataFrame(schema=PICK_SCHEMA)


def _name(model: str, sample: str) -> str:
    return f"{model}#{sample}" if sample else model


def against_humans(picks: pl.DataFrame, human: pl.DataFrame, *, n_boot: int = 2000, seed: int = 0) -> dict:
    """How the picks fare with people. ``human``: ``input_id, model, [sample,] score`` (raters averaged).

    Per input whose every candidate has a human score: ``hit`` (the pick has the highest human score;
    human ties at the top all count), the random hit rate (share of candidates that are human-best), the
    pick's human score and the mean over candidates (random choice). Means over inputs, and 95%
    percentile-bootstrap intervals over inputs for the pick's mean, the random mean and their difference.
    """
    if "sample" not in human.columns:
        human = human.with_columns(pl.lit("").alias("sample"))
    human = human.with_columns(pl.col("sample").cast(pl.String).fill_null(""), pl.col("score").cast(pl.Float64))
    by_input = {iid: g for (iid,), g in human.group_by("input_id", maintain_order=True)}
    hits, rand_hits, pick_h, rand_h, skipped = [], [], [], [], []
    for r in picks.filter(pl.col("pick_model").is_not_null()).iter_rows(named=True):
        g = by_input.get(r["input_id"])
        if g is None:
            skipped.append(f"{r['input_id']}: no human rating")
            continue
        hit_row = g.filter((pl.col("model") == r["pick_model"]) & (pl.col("sample") == r["pick_sample"]))
        if hit_row.height == 0 or g.height < r["n_candidates"]:
            skipped.append(f"{r['input_id']}: not every candidate has a human rating")
            continue
        h = g["score"].to_numpy()
        drawn = set(r.get("drawn_from") or [])
        if drawn:  # a drawn pick: the expectation over the candidates drawn from
            names = [_name(m, k) for m, k in zip(g["model"], g["sample"])]
            dh = np.array([x for x, nm in zip(h, names) if nm in drawn])
            ph, hit = float(dh.mean()), float((dh >= h.max()).mean())
        else:
            ph = float(hit_row["score"][0])
            hit = float(ph >= h.max())
        hits.append(hit)
        rand_hits.append(float((h >= h.max()).mean()))
        pick_h.append(ph)
        rand_h.append(float(h.mean()))
    n = len(hits)
    out = {"n_inputs": n, "hit_rate": _mean(hits), "random_hit_rate": _mean(rand_hits),
           "mean_human_pick": _mean(pick_h), "mean_human_random": _mean(rand_h),
           "gain": _mean(np.subtract(pick_h, rand_h)), "skipped": skipped}
    for key, vals in (("mean_human_pick", pick_h), ("mean_human_random", rand_h),
                      ("gain", list(np.subtract(pick_h, rand_h))), ("hit_rate", hits)):
        out[f"{key}_ci"] = _boot(np.asarray(vals, dtype=float), n_boot, seed)
    return out


def _mean(v) -> float:
    v = np.asarray(v, dtype=float)
    return float(v.mean()) if len(v) else float("nan")


def _boot(v: np.ndarray, n_boot: int, seed: int) -> tuple[float, float]:
    if len(v) < 2 or n_boot <= 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, len(v), size=(n_boot, len(v)))].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def format_best_of_n(picks: pl.DataFrame, humans: dict | None = None) -> str:
    """A plain-text table, one line per input, and the comparison with people when given."""
    if picks.height == 0:
        return "no input with candidates"
    lines = [f"best of N by {picks['evaluator'][0]}",
             f"  {'input':<20} {'n':>3} {'pick':<24} {'score':>7} {'runner-up':<24} {'margin':>7}  note"]
    for r in picks.iter_rows(named=True):
        pick = _name(r["pick_model"], r["pick_sample"]) if r["pick_model"] else "-"
        ru = _name(r["runner_up_model"], r["runner_up_sample"]) if r["runner_up_model"] else "-"
        note = f"tie of {r['n_tied']}: {', '.join(r['tied'])}" if r["n_tied"] else ""
        note += f", broken {r['tie_break']}" if note and r.get("tie_break") else ""
        note = "; ".join(x for x in (note, r["reason"]) if x)
        lines.append(f"  {r['input_id'][:20]:<20} {r['n_candidates']:>3} {pick[:24]:<24} {_f(r['pick_score'])} "
                     f"{ru[:24]:<24} {_f(r['margin'])}  {note}")
    if humans:
        lo, hi = humans["gain_ci"]
        lines += ["", f"against people ({humans['n_inputs']} inputs with every candidate rated):",
                  f"  pick is a human-best candidate: {_f(humans['hit_rate'])} "
                  f"(random: {_f(humans['random_hit_rate'])})",
                  f"  mean human score: picks {_f(humans['mean_human_pick'])}, "
                  f"random {_f(humans['mean_human_random'])},"
                  f" gain {_f(humans['gain'])} [95% CI {_f(lo)}, {_f(hi)}]"]
    return "\n".join(lines)


def _f(x) -> str:
    return "      -" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:7.3f}"


def human_scores(path: Path) -> pl.DataFrame | None:
    """``input_id, model, sample, score`` from a human ratings file: the ``overall`` dimension when
    rated, else the mean over the rated dimensions (raters averaged)."""
    avg = read_human(path).averaged()
    if avg.height == 0:
        return None
    if "overall" in avg["dimension"].to_list():
        avg = avg.filter(pl.col("dimension") == "overall")
    one = avg.group_by("input_id", "model").agg(pl.col("score").mean())
    return split_samples(one)
