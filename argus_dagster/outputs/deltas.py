"""Score deltas between two materializations of the same partition: what moved, and by how much.

Pure functions on the ``criterion_scores`` and ``video_scores`` tables (see :mod:`tables`). A
criterion or video counts as moved when its score changed, became scored or unscored, or appeared or
disappeared (a rubric change adds and removes criteria). A video is an (input, sample); a table
stored before samples were read (no ``sample`` column) holds single videos (sample ``""``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

TOL = 1e-9

CRITERION_DELTA = {"input_id": pl.String, "sample": pl.String, "criterion_id": pl.String, "before": pl.Float64, "after": pl.Float64,
                   "delta": pl.Float64, "change": pl.String}
VIDEO_DELTA = {"input_id": pl.String, "sample": pl.String, "final_before": pl.Float64, "final_after": pl.Float64, "delta": pl.Float64,
               "caps_before": pl.String, "caps_after": pl.String, "change": pl.String}


def _with_sample(df: pl.DataFrame) -> pl.DataFrame:
    if "sample" in df.columns:
        return df.with_columns(pl.col("sample").cast(pl.String).fill_null(""))
    return df.with_columns(pl.lit("").alias("sample"))


def _change(before_present: bool, after_present: bool, before, after) -> str | None:
    if not before_present:
        return "added"
    if not after_present:
        return "removed"
    if before is None and after is None:
        return None
    if before is None:
        return "now scored"
    if after is None:
        return "now unscored"
    return "changed" if abs(after - before) > TOL else None


def criterion_deltas(before: pl.DataFrame | None, after: pl.DataFrame) -> pl.DataFrame:
    """One row per (video, criterion) whose score moved between ``before`` and ``after``."""
    if before is None:
        return pl.DataFrame(schema=CRITERION_DELTA)
    keys = ["input_id", "sample", "criterion_id"]
    before, after = _with_sample(before), _with_sample(after)
    b = before.select(*keys, pl.col("score").cast(pl.Float64).alias("before"), pl.lit(True).alias("_b"))
    a = after.select(*keys, pl.col("score").cast(pl.Float64).alias("after"), pl.lit(True).alias("_a"))
    rows = []
    for r in b.join(a, on=keys, how="full", coalesce=True).iter_rows(named=True):
        change = _change(bool(r["_b"]), bool(r["_a"]), r["before"], r["after"])
        if change is None:
            continue
        delta = r["after"] - r["before"] if r["after"] is not None and r["before"] is not None else None
        rows.append({"input_id": r["input_id"], "sample": r["sample"], "criterion_id": r["criterion_id"], "before": r["before"],
                     "after": r["after"], "delta": delta, "change": change})
    return pl.DataFrame(rows, schema=CRITERION_DELTA, orient="row").sort(keys)


def video_deltas(before: pl.DataFrame | None, after: pl.DataFrame) -> pl.DataFrame:
    """One row per video whose final score (or its presence) moved between ``before`` and ``after``."""
    if before is None:
        return pl.DataFrame(schema=VIDEO_DELTA)
    caps = pl.col("caps_fired").cast(pl.List(pl.String)).list.join(",")
    keys = ["input_id", "sample"]
    before, after = _with_sample(before), _with_sample(after)
    b = before.select(*keys, pl.col("final_score").alias("final_before"), caps.alias("caps_before"),
                      pl.lit(True).alias("_b"))
    a = after.select(*keys, pl.col("final_score").alias("final_after"), caps.alias("caps_after"),
                     pl.lit(True).alias("_a"))
    rows = []
    for r in b.join(a, on=keys, how="full", coalesce=True).iter_rows(named=True):
        change = _change(bool(r["_b"]), bool(r["_a"]), r["final_before"], r["final_after"])
        if change is None and (r["caps_before"] or "") == (r["caps_after"] or ""):
            continue
        fb, fa = r["final_before"], r["final_after"]
        rows.append({"input_id": r["input_id"], "sample": r["sample"], "final_before": fb, "final_after": fa,
                     "delta": fa - fb if fa is not None and fb is not None else None,
                     "caps_before": r["caps_before"], "caps_after": r["caps_after"], "change": change or "caps changed"})
    return pl.DataFrame(rows, schema=VIDEO_DELTA, orient="row").sort(keys)


def _num(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:g}" if float(x).is_integer() else f"{x:.2f}"


def delta_summary(deltas: pl.DataFrame, limit: int = 40) -> str:
    """Markdown, one line per video: the criteria that moved, ``id before → after (±delta)``."""
    if deltas.height == 0:
        return "no criterion score moved"
    lines = []
    deltas = _with_sample(deltas)
    n_videos = deltas.select("input_id", "sample").n_unique()
    for (input_id, sample), g in deltas.group_by("input_id", "sample", maintain_order=True):
        parts = []
        for r in g.iter_rows(named=True):
            d = f" ({r['delta']:+g})" if r["delta"] is not None else f" ({r['change']})"
            parts.append(f"{r['criterion_id']} {_num(r['before'])} → {_num(r['after'])}{d}")
        lines.append(f"- `{input_id}{'#' + sample if sample else ''}`: " + "; ".join(parts))
        if len(lines) >= limit:
            lines.append(f"- … and {n_videos - limit} more videos")
            break
    return "\n".join(lines)


@dataclass
class Diff:
    """Two passes of an asset compared (``argus diff``, the overview's "What changed": :func:`argus_dagster.records.history.diff`)."""

    asset: str
    before: str
    after: str
    before_time: str
    after_time: str
    models: pl.DataFrame  # task, model, mean_before, ci_low_before, ci_high_before, judge_before, *_after
    videos: pl.DataFrame  # task, model, input_id, sample, final_before, final_after, delta, change
    criteria: pl.DataFrame  # task, model, input_id, sample, criterion_id, before, after, delta, change
    judges: tuple[list[str], list[str]]
    rubrics_changed: list[tuple[str, str]]  # (task, input_id)
    inputs_changed: dict[str, int]  # input asset -> partitions whose recorded data version moved
    missing: list[str]  # partitions whose table is no longer kept
    code_changed: dict[str, tuple[str, str]] = field(default_factory=dict)  # asset -> (code version before, after)
    reasons: list[str] = field(default_factory=list)  # why the later pass's runs ran, as they recorded it
    # Each pass's fingerprint id (None: not recorded), and every field that differs (resources.fingerprint).
    fingerprints: tuple[str | None, str | None] = (None, None)
    fingerprint_changes: list[tuple[str, Any, Any]] = field(default_factory=list)
