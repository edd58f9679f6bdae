"""Reading human ratings and evaluator score tables, and importing the public rating sets.

Human ratings: CSV, JSON lines, JSON or parquet with ``input_id, model, score`` and optional
``dimension`` and ``rater`` (several raters are averaged per video and dimension). The two public
sets read directly: T2VScore's ``{id: {prompt, models: {model: [scores]}}}`` JSON (the dimension is
taken from the file name, ``t2vscore_alignment_score.json`` → ``alignment``) and AIGVE's
``annotations.json`` (nine aspects per clip).

Evaluator scores: this project's ``video_scores`` and ``criterion_scores`` tables (a parquet file, or
the folder the IO manager writes them to), a long table ``input_id, model, evaluator, score[,
dimension]``, or a wide one with one numeric column per evaluator (T2VScore's ``t2vscore_results.csv``).

A row that cannot be read (no id, a score that is not a number) is left out and named in
``problems``; the rest is used. A file without a required column is an error that names the column.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, cast

import polars as pl

from argus_dagster.infra.files import write_atomic
from argus_dagster.infra.names import file_name, model_name_problem
from argus_dagster.method.rubric.taxonomy import DIMENSIONS
from argus_dagster.protocols import vefx
from argus_dagster.protocols.alignment.metrics import alignment_table, inter_rater_agreement
from argus_dagster.protocols.firm import types as firm_types

DEFAULT_DIMENSION = "overall"
ARGUS_RANGE = (0.0, 10.0)  # every score this project writes is on 0-10
AIGVE_ASPECTS = ("technical_quality", "dynamic", "consistency", "physics", "element_presentence",
                 "element_quality", "action_presentence", "action_quality", "overall")

_ALIASES = {
    "input_id": ("input_id", "id", "video_id", "prompt_id", "sample_id"),
    "model": ("model", "model_name", "generator"),
    "score": ("score", "rating", "human_score", "mos"),
    "dimension": ("dimension", "aspect"),
    "rater": ("rater", "annotator", "rater_id"),
    "evaluator": ("evaluator", "metric"),
    "scale_min": ("scale_min", "scale_lo", "min_score"),
    "scale_max": ("scale_max", "scale_hi", "max_score"),
}
RATINGS_SCHEMA = {"input_id": pl.String, "model": pl.String, "dimension": pl.String, "rater": pl.String,
                  "score": pl.Float64}
HUMAN_SCHEMA = {"input_id": pl.String, "model": pl.String, "dimension": pl.String, "score": pl.Float64,
                "n_ratings": pl.Int64}
SCORES_SCHEMA = {"input_id": pl.String, "model": pl.String, "evaluator": pl.String, "dimension": pl.String,
                 "score": pl.Float64}


@dataclass
class HumanRatings:
    """Individual ratings (one row per rating) and what could not be read."""

    ratings: pl.DataFrame
    problems: list[str] = field(default_factory=list)
    scales: dict[str, tuple[float, float]] = field(default_factory=dict)
    """The rating scale each dimension declares (a file's ``scale_min``/``scale_max`` columns, or the
    published scale of an imported set); see :func:`human_scales`."""
    origins: list[str] = field(default_factory=list)
    """Where each row of ``ratings`` was read (``ratings.csv row 3``), in the same order; empty for
    ratings built in code, which are then named by their video."""

    def averaged(self) -> pl.DataFrame:
        """One row per video and dimension: the mean over raters (a rater's repeated ratings of a video
        count once, as their mean), and how many ratings it averages."""
        return average_raters(self.ratings)

    def origin(self, k: int) -> str:
        r = self.ratings.row(k, named=True)
        return self.origins[k] if len(self.origins) == self.ratings.height else f"rating of {r['input_id']}/{r['model']}"


@dataclass
class EvaluatorScores:
    """Long scores ``input_id, model, evaluator, dimension, score``, each evaluator's scale, problems."""

    scores: pl.DataFrame
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------------
# Human ratings
# ---------------------------------------------------------------------------------------------------


def read_human(path: str | Path, dimension: str | None = None, source: str | None = None) -> HumanRatings:
    """Human ratings from ``path`` in any supported layout; ``dimension`` names a file that has none.
    ``source``: the name its messages give the file (default ``path``; a local copy of an object on S3
    is named by its URI)."""
    p = Path(path)
    name = source or str(p)
    if not p.is_file():
        raise FileNotFoundError(f"human ratings {name}: no such file")
    suffix = p.suffix.lower()
    if suffix == ".json":
        data = json.loads(p.read_text(encoding="utf-8-sig"))  # a byte-order mark is not content
        if isinstance(data, dict) and "data_list" in data:
            return aigve_ratings(data, source=name)
        if isinstance(data, dict) and data and all(isinstance(v, dict) and "models" in v for v in data.values()):
            return t2vscore_ratings(data, dimension or _t2vscore_dimension(p), source=name)
        if isinstance(data, list):
            return ratings_from_records(data, name, dimension)
        raise ValueError(f"human ratings {name}: unknown JSON layout; expected a list of "
                         "{input_id, model, score} records, T2VScore's or AIGVE's annotation file")
    return ratings_from_records(_read_records(p, name), name, dimension)


def _read_records(p: Path, name: str) -> list[dict[str, Any]]:
    suffix = p.suffix.lower()
    if suffix == ".csv":
        with p.open(newline="", encoding="utf-8-sig") as fh:  # a spreadsheet's byte-order mark is not a column name
            return list(csv.DictReader(fh))
    if suffix in (".jsonl", ".ndjson"):
        out = []
        for n, line in enumerate(p.read_text(encoding="utf-8-sig").splitlines(), start=1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    out.append({"__error__": f"{name} line {n}: not valid JSON ({exc.msg})"})
        return out
    if suffix == ".parquet":
        return pl.read_parquet(p).to_dicts()
    raise ValueError(f"{name}: unsupported file type {suffix!r}; use .csv, .jsonl, .json or .parquet")


def _resolve_columns(columns: Iterable[str], source: str, required: tuple[str, ...],
                     optional: tuple[str, ...]) -> dict[str, str]:
    cols = list(columns)
    found = {}
    for name in required + optional:
        match = next((c for c in _ALIASES[name] if c in cols), None)
        if match is None and name in required:
            raise ValueError(f"{source}: missing column {name!r} (accepted spellings: {', '.join(_ALIASES[name])}); "
                             f"the file has {cols}")
        if match is not None:
            found[name] = match
    return found


def _number(value: Any) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def ratings_from_records(records: list[dict[str, Any]], source: str, dimension: str | None = None) -> HumanRatings:
    """Validated rating rows; a row without an id or with a non-numeric score is named and skipped."""
    problems = [r["__error__"] for r in records if "__error__" in r]
    records = [r for r in records if "__error__" not in r]
    if not records:
        return HumanRatings(pl.DataFrame(schema=RATINGS_SCHEMA), problems or [f"{source}: no ratings"])
    cols = _resolve_columns({k for r in records for k in r}, source, ("input_id", "model", "score"),
                            ("dimension", "rater", "scale_min", "scale_max"))
    rows, origins = [], []
    declared: dict[str, set[tuple[float, float]]] = {}
    for n, r in enumerate(records, start=1):
        where = f"{source} row {n}"
        iid, model = r.get(cols["input_id"]), r.get(cols["model"])
        if iid in (None, "") or model in (None, ""):
            problems.append(f"{where}: empty {'input_id' if iid in (None, '') else 'model'}; row skipped")
            continue
        score = _number(r.get(cols["score"]))
        if score is None:
            problems.append(f"{where} ({iid}/{model}): score {r.get(cols['score'])!r} is not a number; row skipped")
            continue
        dim = r.get(cols["dimension"]) if "dimension" in cols else None
        rater = r.get(cols["rater"]) if "rater" in cols else None
        dim_name = str(dim) if dim not in (None, "") else (dimension or DEFAULT_DIMENSION)
        rows.append({"input_id": _id(iid), "model": str(model), "dimension": dim_name,
                     "rater": str(rater) if rater not in (None, "") else None, "score": score})
        origins.append(where)
        if "scale_min" in cols and "scale_max" in cols:
            lo, hi = _number(r.get(cols["scale_min"])), _number(r.get(cols["scale_max"]))
            if lo is not None and hi is not None:
                declared.setdefault(dim_name, set()).add((lo, hi))
    scales = {}
    for dim_name, found in declared.items():
        lo, hi = min(found)
        if len(found) > 1 or not lo < hi:
            problems.append(f"{source}: dimension {dim_name!r} declares the scale(s) {sorted(found)}; one scale "
                            "with scale_min < scale_max is needed, so none is taken from the file")
            continue
        scales[dim_name] = (lo, hi)
    return HumanRatings(pl.DataFrame(rows, schema=RATINGS_SCHEMA, orient="row"), problems, scales, origins)


def _id(value: Any) -> str:
    """Ids as text; a whole float (``3.0`` from a spreadsheet) reads as ``3``."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def average_raters(ratings: pl.DataFrame) -> pl.DataFrame:
    if ratings.height == 0:
        return pl.DataFrame(schema=HUMAN_SCHEMA)
    per_rater = (ratings.group_by(["input_id", "model", "dimension", "rater"])
                 .agg(pl.col("score").mean(), pl.len().cast(pl.Int64).alias("n_ratings")))
    return (per_rater.group_by(["input_id", "model", "dimension"])
            .agg(pl.col("score").mean(), pl.col("n_ratings").sum().cast(pl.Int64))
            .select(list(HUMAN_SCHEMA)).sort(["dimension", "input_id", "model"]))


def write_human_csv(ratings: pl.DataFrame, path: str | Path) -> Path:
    """Ratings in the storage layout's ``human/<TASK>.csv`` form (``input_id, model, dimension, score[, rater]``)."""
    cols = ["input_id", "model", "dimension", "score"] + (
        ["rater"] if "rater" in ratings.columns and ratings["rater"].drop_nulls().len() else [])
    return write_atomic(path, ratings.select(cols).write_csv())


# ---------------------------------------------------------------------------------------------------
# The two public rating sets in ../shared/data
# ---------------------------------------------------------------------------------------------------


def _t2vscore_dimension(p: Path) -> str:
    stem = p.stem
    for prefix in ("t2vscore_",):
        stem = stem[len(prefix):] if stem.startswith(prefix) else stem
    return stem[: -len("_score")] if stem.endswith("_score") else stem


def t2vscore_ratings(data: dict, dimension: str, source: str = "t2vscore") -> HumanRatings:
    """T2VScore's human ratings: per prompt id, per model, a list of scores (usually one rater mean).

    Where a list holds several scores they are kept as separate ratings, ``rater`` being the position
    in the list.
    """
    rows, problems = [], []
    for iid, entry in data.items():
        for model, values in (entry.get("models") or {}).items():
            values = values if isinstance(values, list) else [values]
            for k, v in enumerate(values):
                x = _number(v)
                if x is None:
                    problems.append(f"{source} prompt {iid} model {model}: score {v!r} is not a number; skipped")
                    continue
                rows.append({"input_id": _id(iid), "model": str(model), "dimension": dimension,
                             "rater": str(k) if len(values) > 1 else None, "score": x})
    # T2VScore's published ratings are on 1-5 (means of raters)
    return HumanRatings(pl.DataFrame(rows, schema=RATINGS_SCHEMA, orient="row"), problems, {dimension: (1.0, 5.0)})


def aigve_ratings(data: dict, source: str = "aigve") -> HumanRatings:
    """AIGVE's annotations: one record per clip with its ``id``, ``model`` and the nine aspect ratings."""
    rows, problems = [], []
    for n, rec in enumerate(data.get("data_list") or [], start=1):
        if rec.get("id") is None:
            problems.append(f"{source} record {n}: no 'id'; skipped")
            continue
        for aspect in AIGVE_ASPECTS:
            x = _number(rec.get(aspect))
            if x is None:
                problems.append(f"{source} clip {rec['id']}: aspect {aspect!r} missing or not a number")
                continue
            rows.append({"input_id": _id(rec["id"]), "model": str(rec.get("model") or "unknown"),
                         "dimension": aspect, "rater": None, "score": x})
    return HumanRatings(pl.DataFrame(rows, schema=RATINGS_SCHEMA, orient="row"), problems)


def aigve_bench(src: str | Path, bench_dir: str | Path, candidates_dir: str | Path) -> HumanRatings:
    """A T2V bench from AIGVE's clips: the prompts as inputs, each clip as its model's candidate.

    Writes ``<bench>/T2V/manifest.jsonl`` (``id``, ``prompt`` from ``prompt_gt``) and
    ``<candidates>/T2V/<model>/<id>.mp4`` (symbolic links, copies where links are not possible), and
    returns the human ratings of those clips.
    """
    src = Path(src)
    data = json.loads((src / "annotations.json").read_text(encoding="utf-8"))
    task_bench = Path(bench_dir) / "T2V"
    task_bench.mkdir(parents=True, exist_ok=True)
    lines = []
    for rec in data.get("data_list") or []:
        iid, model = _id(rec["id"]), str(rec.get("model") or "unknown")
        video = src / "videos_5frame" / rec["video_path_pd"]
        if not video.is_file():
            raise FileNotFoundError(f"AIGVE clip {iid}: {video} not found")
        problem = model_name_problem(model)
        if problem:
            raise ValueError(f"AIGVE clip {iid} field 'model': {problem}")
        lines.append(json.dumps({"id": iid, "prompt": rec["prompt_gt"]}))
        dest = Path(candidates_dir) / "T2V" / model / f"{file_name(iid)}{video.suffix}"
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.exists():
            try:
                os.symlink(video.resolve(), dest)
            except OSError:
                shutil.copyfile(video, dest)
    write_atomic(task_bench / "manifest.jsonl", "\n".join(lines) + "\n")
    return aigve_ratings(data, source=str(src / "annotations.json"))


# ---------------------------------------------------------------------------------------------------
# Evaluator scores
# ---------------------------------------------------------------------------------------------------


def dimension_evaluator(dimension: int) -> str:
    return f"argus:d{int(dimension):02d} {DIMENSIONS.get(int(dimension), 'unknown')}"


def project_scores(video_scores: pl.DataFrame | None = None, criterion_scores: pl.DataFrame | None = None,
                   task: str | None = None) -> EvaluatorScores:
    """This project's own scores as evaluators on 0-10.

    ``argus:final`` and ``argus:base`` come from ``video_scores``; from ``criterion_scores``, one
    evaluator per taxonomy dimension (``argus:d13 visual/frame quality``): the mean score of that
    video's criteria of the dimension, criteria without a score left out.
    """
    frames, ranges = [], {}
    for name, df in (("video_scores", video_scores), ("criterion_scores", criterion_scores)):
        if df is None or df.height == 0:
            continue
        if "task" in df.columns:
            tasks = sorted(df["task"].drop_nulls().unique().to_list())
            if task is not None:
                df = df.filter(pl.col("task") == task)
            elif len(tasks) > 1:
                raise ValueError(f"{name} holds tasks {tasks}; choose one (--task)")
        if name == "video_scores":
            for col, ev in (("final_score", "argus:final"), ("base_score", "argus:base")):
                frames.append(df.select(pl.col("input_id").cast(pl.String), pl.col("model").cast(pl.String),
                                        pl.lit(ev).alias("evaluator"), pl.lit(None, pl.String).alias("dimension"),
                                        pl.col(col).cast(pl.Float64).alias("score")))
                ranges[ev] = ARGUS_RANGE
        else:
            per_dim = (df.filter(pl.col("score").is_not_null())
                       .group_by("input_id", "model", "dimension")
                       .agg(pl.col("score").cast(pl.Float64).mean()))
            for (dim,), g in per_dim.group_by(["dimension"]):
                ev = dimension_evaluator(dim)
                frames.append(g.select(pl.col("input_id").cast(pl.String), pl.col("model").cast(pl.String),
                                       pl.lit(ev).alias("evaluator"), pl.lit(None, pl.String).alias("dimension"),
                                       pl.col("score")))
                ranges[ev] = ARGUS_RANGE
    scores = pl.concat(frames) if frames else pl.DataFrame(schema=SCORES_SCHEMA)
    return EvaluatorScores(scores.sort(["evaluator", "input_id", "model"]), ranges)


def _read_table(p: Path) -> pl.DataFrame:
    if p.is_dir():
        files = sorted(p.rglob("*.parquet"))
        if not files:
            raise ValueError(f"scores folder {p}: no parquet files in it")
        return pl.concat([pl.read_parquet(f) for f in files], how="diagonal_relaxed")
    suffix = p.suffix.lower()
    if suffix == ".parquet":
        return pl.read_parquet(p)
    if suffix == ".csv":
        return pl.read_csv(p, infer_schema_length=None)
    if suffix in (".jsonl", ".ndjson"):
        return pl.read_ndjson(p)
    if suffix == ".json":
        return pl.DataFrame(json.loads(p.read_text(encoding="utf-8")))
    raise ValueError(f"scores {p}: unsupported file type {suffix!r}; use .parquet, .csv, .jsonl, .json or a folder")


def read_scores(path: str | Path, task: str | None = None) -> EvaluatorScores:
    """Evaluator scores from a file or a folder of parquet files, in any supported layout."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"scores {p}: no such file or folder")
    df = _read_table(p)
    cols = set(df.columns)
    if {"final_score", "base_score", "input_id", "model"} <= cols:
        return project_scores(video_scores=df, task=task)
    if {"criterion_id", "dimension", "score", "input_id", "model"} <= cols:
        return project_scores(criterion_scores=df, task=task)
    if {"if_score", "rq_score", "ee_score", "overall", "input_id", "model"} <= cols:  # vefx_scores
        if "task" in cols:
            tasks = sorted(df["task"].drop_nulls().unique().to_list())
            if task is not None:
                df = df.filter(pl.col("task") == task)
            elif len(tasks) > 1:
                raise ValueError(f"vefx_scores {p} holds tasks {tasks}; choose one (--task)")
        return EvaluatorScores(vefx.evaluator_scores(df).sort(["evaluator", "input_id", "model"]), dict(vefx.RANGES))
    if "task" in cols and task is not None:
        df = df.filter(pl.col("task") == task)
    names = _resolve_columns(cols, f"scores {p}", ("input_id", "model"), ("evaluator", "score", "dimension"))
    if "evaluator" in names:
        if "score" not in names:
            raise ValueError(f"scores {p}: an 'evaluator' column needs a 'score' column beside it")
        keep = [pl.col(names["input_id"]).cast(pl.String).alias("input_id"),
                pl.col(names["model"]).cast(pl.String).alias("model"),
                pl.col(names["evaluator"]).cast(pl.String).alias("evaluator"),
                (pl.col(names["dimension"]).cast(pl.String) if "dimension" in names
                 else pl.lit(None, pl.String)).alias("dimension"),
                pl.col(names["score"]).cast(pl.Float64, strict=False).alias("score")]
        long = df.select(keep)
    else:  # wide: every other numeric column is one evaluator
        ids = {names["input_id"], names["model"], "task"}
        metric_cols = [c for c in df.columns if c not in ids and df[c].dtype.is_numeric()]
        if not metric_cols:
            raise ValueError(f"scores {p}: no 'evaluator'/'score' columns and no numeric metric columns; "
                             "expected input_id, model, evaluator, score")
        long = pl.concat([df.select(pl.col(names["input_id"]).cast(pl.String).alias("input_id"),
                                    pl.col(names["model"]).cast(pl.String).alias("model"),
                                    pl.lit(c).alias("evaluator"), pl.lit(None, pl.String).alias("dimension"),
                                    pl.col(c).cast(pl.Float64).alias("score")) for c in metric_cols])
    long = long.with_columns(pl.col("input_id").map_elements(_id_text, return_dtype=pl.String))
    bad = long.filter(pl.col("score").is_null() | pl.col("score").is_nan())
    problems = [f"scores {p}: {r['evaluator']} on {r['input_id']}/{r['model']}: no numeric score; left out"
                for r in bad.head(20).iter_rows(named=True)]
    if bad.height > 20:
        problems.append(f"scores {p}: {bad.height - 20} more rows without a numeric score")
    return EvaluatorScores(long.sort(["evaluator", "input_id", "model"]), {}, problems)


def _id_text(value: str) -> str:
    try:
        f = float(value)
    except (TypeError, ValueError):
        return value.strip()
    return str(int(f)) if f.is_integer() and "." in value else value.strip()


# ---------------------------------------------------------------------------------------------------
# The one entry point the CLI and the asset share
# ---------------------------------------------------------------------------------------------------


def nominal_scales() -> dict[str, tuple[float, float]]:
    """The scale each protocol's dimensions are rated on, by their names: VEFX-Bench's IF, RQ, EE and
    overall on 1-4 (seed 002), FIRM-Video's IF, WC and PQ on 1-5 (seed 001)."""
    return {**{d: (1.0, 5.0) for d in firm_types.DIMENSIONS}, **vefx.NOMINAL_SCALES}


def human_scales(human: HumanRatings, dimensions: Iterable[str],
                 human_scale: tuple[float, float] | None = None) -> tuple[dict[str, tuple[float, float]], list[str]]:
    """The rating scale of each human dimension: ``human_scale`` when given (``--human-scale``), else the
    scale the ratings declare, else the dimension's nominal scale (:func:`nominal_scales`). Never the
    observed range: ratings spanning 2-4 on a 1-4 scale are on 1-4. A dimension with none of these has
    no scale, and the second value says so (its MAE and accuracies are left out)."""
    nominal = nominal_scales()
    out, unknown = {}, []
    for d in sorted(set(dimensions)):
        scale = human_scale or human.scales.get(d) or nominal.get(d)
        if scale is None:
            unknown.append(d)
        else:
            out[d] = (float(scale[0]), float(scale[1]))
    problems = [f"human dimension {d!r}: no rating scale declared (scale_min/scale_max columns) or known for its "
                "name, so MAE, STD and the accuracies are left out; give --human-scale LO HI" for d in unknown]
    return out, problems


def _rows(origins: list[str]) -> str:
    """``h.csv rows 1, 2`` for rows of one file, else the origins listed."""
    parts = [o.rpartition(" row ") for o in origins]
    if all(sep and num.isdigit() for _, sep, num in parts) and len({src for src, _, _ in parts}) == 1:
        return f"{parts[0][0]} rows {', '.join(num for _, _, num in parts)}"
    return "; ".join(origins)


def screen_ratings(human: HumanRatings, scales: dict[str, tuple[float, float]], *, given: bool = False,
                   limit: int = 20) -> None:
    """Refuses the ratings outside their dimension's scale and reports the videos rated more than once.

    A rating off its scale (a 9 on a 1-4 scale: the wrong column, or a file on another scale) is left
    out of ``human.ratings``, its row named in ``human.problems`` with the scale and where it comes
    from; the rest is used. A video rated more than once in a dimension by one rater, or several times
    with no rater named, is kept and reported with how its ratings combine (:func:`average_raters`).
    """
    r = human.ratings
    if r.height == 0:
        return
    origins = [human.origin(k) for k in range(r.height)]
    keep, problems = [], []
    for k, row in enumerate(r.iter_rows(named=True)):
        scale = scales.get(row["dimension"])
        if scale is not None and not (scale[0] - 1e-9 <= row["score"] <= scale[1] + 1e-9):
            whose = ("the scale given for the run" if given else "the scale the file declares"
                     if row["dimension"] in human.scales else "the dimension's nominal scale")
            problems.append(f"{origins[k]} ({row['input_id']}/{row['model']}, {row['dimension']}): rating "
                            f"{row['score']:g} is outside {row['dimension']}'s scale {scale[0]:g}-{scale[1]:g} "
                            f"({whose}); rating refused")
            continue
        keep.append(k)
    groups: dict[tuple, list[int]] = {}
    for k in keep:
        row = r.row(k, named=True)
        groups.setdefault((row["input_id"], row["model"], row["dimension"], row["rater"]), []).append(k)
    repeated = [(key, ks) for key, ks in groups.items() if len(ks) > 1]
    for (iid, model, dim, rater), ks in repeated[:limit]:
        scores = [r["score"][k] for k in ks]
        listed, mean = ", ".join(f"{x:g}" for x in scores), sum(scores) / len(scores)
        where = _rows([origins[k] for k in ks])
        if rater is None:
            problems.append(f"{where}: {iid}/{model} {dim}: {len(ks)} ratings and no rater named ({listed}); "
                            f"averaged to {mean:g}")
        else:
            problems.append(f"{where}: {iid}/{model} {dim}: rated {len(ks)} times by rater {rater!r} ({listed}); "
                            f"those count once, averaged to {mean:g}, before the mean over raters")
    if len(repeated) > limit:
        problems.append(f"{len(repeated) - limit} more videos rated more than once by one rater (or with no rater "
                        "named); each averaged the same way")
    if len(keep) < r.height:
        human.ratings = r[keep]
        human.origins = [origins[k] for k in keep] if len(human.origins) == r.height else []
    human.problems.extend(p for p in problems if p not in human.problems)


SCALE_METRICS = ("mae", "std_abs_err", "accuracy", "relaxed_accuracy", "preference_acc")


def alignment_report(human: HumanRatings, scores: EvaluatorScores, *, dimensions: list[str] | None = None,
                     human_scale: tuple[float, float] | None = None, n_boot: int = 1000,
                     seed: int = 0) -> pl.DataFrame:
    """Every evaluator against every human dimension (raters averaged, their agreement reported).

    The human scale of each dimension is :func:`human_scales`' (given, declared, nominal; never the
    observed range); the metrics read on that scale are left out (NaN) for a dimension without one,
    and ``human.problems`` says so. Each evaluator's scale is its declared one (0-10 for this project's
    scores, 1-4 for VEFX's, 1-5 for FIRM-Video's), else its observed range. Where the ratings hold
    VEFX's IF, RQ and EE but no overall, the human overall is their mean (the card's definition).
    """
    held, problems = human_scales(human, human.ratings["dimension"].unique().to_list(), human_scale)
    human.problems.extend(p for p in problems if p not in human.problems)
    screen_ratings(human, held, given=human_scale is not None)
    averaged = vefx.human_overall(human.averaged())
    dims = averaged["dimension"].unique().to_list()
    ranges = dict(held)
    if vefx.OVERALL in held:  # an annotated overall is read on the scale its file gives it
        ranges[vefx.OVERALL_ANNOTATED] = ranges.pop(vefx.OVERALL)
    if vefx.OVERALL in dims:  # the card's overall, the mean of the three, is on their scale
        three = {held.get(d) for d in vefx.DIMENSIONS}
        ranges[vefx.OVERALL] = cast(tuple[float, float], three.pop()) if len(three) == 1 and None not in three else vefx.SCALE
    table = alignment_table(averaged, scores.scores, dimensions=dimensions, evaluator_ranges=scores.ranges,
                            human_ranges=ranges, rater_agreement=inter_rater_agreement(human.ratings),
                            n_boot=n_boot, seed=seed)
    unknown = [d for d in dims if d not in ranges]
    if unknown and table.height:
        table = table.with_columns([pl.when(pl.col("dimension").is_in(unknown)).then(pl.lit(float("nan")))
                                    .otherwise(pl.col(c)).alias(c) for c in SCALE_METRICS])
    return table


def merge_human(parts: list[HumanRatings]) -> HumanRatings:
    frames = [h.ratings for h in parts if h.ratings.height]
    scales: dict[str, tuple[float, float]] = {}
    for h in parts:
        scales.update(h.scales)
    origins = [o for h in parts if h.ratings.height for o in
               (h.origins if len(h.origins) == h.ratings.height else
                [f"rating of {i}/{m}" for i, m in h.ratings.select("input_id", "model").iter_rows()])]
    return HumanRatings(pl.concat(frames) if frames else pl.DataFrame(schema=RATINGS_SCHEMA),
                        [p for h in parts for p in h.problems], scales, origins)


def merge_scores(parts: list[EvaluatorScores]) -> EvaluatorScores:
    frames = [s.scores for s in parts if s.scores.height]
    ranges: dict[str, tuple[float, float]] = {}
    for s in parts:
        ranges.update(s.ranges)
    return EvaluatorScores(pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame(schema=SCORES_SCHEMA),
                           ranges, [p for s in parts for p in s.problems])
