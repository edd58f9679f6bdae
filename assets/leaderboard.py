"""The leaderboard across every materialized task x model partition, with a plot per task.

It follows ``video_scores`` by declarative automation: a re-scored partition updates it.
"""


import base64
from pathlib import Path
from typing import cast

import dagster as dg
import polars as pl

from argus_dagster.assets.versions import content_version, volatile_metadata
from argus_dagster.infra.files import WriteError
from argus_dagster.infra.storage import Storage, join, parent, relative
from argus_dagster.infra.tables import VIDEO_SCORES, frame
from argus_dagster.method.leaderboard import build_leaderboard, format_leaderboard
from argus_dagster.outputs.export import write_exports
from argus_dagster.outputs.report import leaderboard_png
from argus_dagster.resources.bench import BenchResource
from argus_dagster.resources.storage import StorageResource

from .automation import FOLLOWS_PARTITIONS


def plot_metadata(lb: pl.DataFrame, reports_dir: Path | str, store: Storage) -> dict:
    """Per task: the PNG written (through ``store``) under the evaluation's ``reports/leaderboard/``
    and shown inline."""
    out_dir = join(reports_dir, "leaderboard")
    meta: dict[str, dg.MetadataValue | str] = {}
    for task in sorted(lb["task"].unique().to_list()):
        png = leaderboard_png(task, lb.filter(pl.col("task") == task).to_dicts())
        path = join(out_dir, f"{task}.png")
        meta[f"plot_{task}"] = dg.MetadataValue.md(
            f"![{task} leaderboard](data:image/png;base64,{base64.b64encode(png).decode('ascii')})")
        try:  # the table is the leaderboard; a plot that cannot be written is said, not fatal
            store.write_bytes(path, png)
            meta[f"plot_{task}_path"] = dg.MetadataValue.path(relative(path, parent(reports_dir)))  # as the evaluation names it
            meta[f"plot_{task}_url"] = dg.MetadataValue.url(store.link(path, reports_dir))
        except WriteError as exc:
            meta[f"plot_{task}_error"] = str(exc)
    return meta


def export_metadata(tables: dict[str, pl.DataFrame], bench: BenchResource, store: Storage) -> dict:
    """Tables (the leaderboard and the video scores it is made of; the cost ledger's run, the ledger) as CSV
    and JSON files under the evaluation's ``reports/exports/`` (what ``argus export`` writes, ``bench`` and
    ``profile`` on every row), each linked; a file that cannot be written is said, not fatal."""
    reports_dir = bench.reports_path()
    try:
        paths = write_exports(tables, reports_dir, store, bench.bench_name(), bench.profile_name())
    except WriteError as exc:
        return {"export_error": str(exc)}
    return {f"export_{name}": dg.MetadataValue.url(store.link(path, reports_dir)) for name, path in paths.items()}


# What the leaderboard's data version leaves out (assets.versions): none of its columns.
LEADERBOARD_VOLATILE: tuple[str, ...] = ()


@dg.asset(code_version="11", group_name="reports", kinds={"polars"}, metadata=volatile_metadata(LEADERBOARD_VOLATILE),
          automation_condition=FOLLOWS_PARTITIONS,
          ins={"video_scores": dg.AssetIn(metadata={"allow_missing_partitions": True}),
               "criterion_scores": dg.AssetIn(metadata={"allow_missing_partitions": True}),
               "judge_noise": dg.AssetIn(metadata={"allow_missing_partitions": True})})
def leaderboard(context: dg.AssetExecutionContext, video_scores: dict[str, pl.DataFrame],
                criterion_scores: dict[str, pl.DataFrame], judge_noise: dict[str, pl.DataFrame],
                bench: BenchResource, storage: StorageResource) -> dg.Output[pl.DataFrame]:
    """Mean final score per task and model, with a bootstrap 95% interval and the video count, of
    one evaluation (its ``bench`` and ``profile`` columns); its plots and the overview page are
    written through ``storage``. Where the judge's noise was measured (``judge_noise``, by the judge
    that scored the videos), the intervals resample it with the inputs and each rank says whether it
    holds under it."""
    frames = [df for df in video_scores.values() if df is not None and df.height]
    scores = pl.concat(frames, how="diagonal_relaxed") if frames else frame([], VIDEO_SCORES)
    # The criterion scores these video scores were computed from name the dimensions no score judged.
    parts = [df for df in criterion_scores.values() if df is not None and df.height]
    criteria = pl.concat(parts, how="diagonal_relaxed") if parts else None
    repeats = [df for df in judge_noise.values() if df is not None and df.height]
    noise = pl.concat(repeats, how="diagonal_relaxed") if repeats else None
    lb = build_leaderboard(scores, bench=bench.bench_name(), profile=bench.profile_name(), criteria=criteria,
                           noise=noise)
    return dg.Output(lb, data_version=content_version(lb, LEADERBOARD_VOLATILE), metadata={
        "bench": bench.bench_name(), "profile": bench.profile_name(), "bench_dir": str(bench.bench_path()),
        "n_partitions": len(frames), "n_rows": lb.height, "n_noise_partitions": len(repeats),
        "leaderboard": dg.MetadataValue.md("```\n" + format_leaderboard(lb) + "\n```"),
        "mean_final": (round(float(cast(float, lb["mean_final"].drop_nulls().mean())), 2)
                       if lb["mean_final"].drop_nulls().len() else None),
        **plot_metadata(lb, bench.reports_path(), storage.storage()),
        **export_metadata({"leaderboard": lb, "videos": scores}, bench, storage.storage()),
    })


@dg.asset_check(asset=leaderboard, description="Means lie in 0-10 and inside their intervals.")
def leaderboard_in_range(leaderboard: pl.DataFrame) -> dg.AssetCheckResult:
    lb = leaderboard.filter(pl.col("mean_final").is_not_null())
    bad = lb.filter((pl.col("mean_final") < 0) | (pl.col("mean_final") > 10)
                    | (pl.col("ci_low") > pl.col("mean_final") + 1e-9) | (pl.col("ci_high") < pl.col("mean_final") - 1e-9))
    return dg.AssetCheckResult(passed=bad.height == 0, metadata={"n_bad": bad.height, "n_rows": lb.height})
