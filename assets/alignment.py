"""Human alignment: how well every evaluator present agrees with human ratings, per task and dimension.

Human ratings are read from the bench's ``$ARGUS_HOME/benches/<bench>/human/<TASK>.csv`` (``input_id, model, score[, dimension][,
rater]``); the evaluators are this project's ``video_scores`` (final and base score) and its
``criterion_scores`` (one evaluator per taxonomy dimension), and FIRM-Video's ``firm_scores`` where
they are materialized (``firm_if``, ``firm_wc``, ``firm_pq`` ratings on 1-5, each compared with the human
dimension of its name when the ratings have it, else with every dimension). The computation is the
one ``argus align`` runs (:func:`argus_dagster.protocols.alignment.ratings.alignment_report`).
"""

from typing import cast

import dagster as dg
import polars as pl

from argus_dagster.assets.versions import content_version, volatile_metadata
from argus_dagster.infra.storage import join, parent, relative
from argus_dagster.method.inputs import ALL_TASKS
from argus_dagster.protocols import vefx
from argus_dagster.protocols.alignment.metrics import ALIGNMENT_SCHEMA, format_alignment
from argus_dagster.protocols.alignment.plots import scatter_png, slug
from argus_dagster.protocols.alignment.ratings import EvaluatorScores, alignment_report, merge_scores, project_scores, read_human
from argus_dagster.protocols.firm.tables import FIRM_RANGES, firm_evaluator_scores
from argus_dagster.resources.bench import BenchResource
from argus_dagster.resources.storage import StorageResource

ALIGNMENT_TABLE = {"task": pl.String, **ALIGNMENT_SCHEMA}


class HumanAlignmentConfig(dg.Config):
    human_dir: str = ""
    """Folder of ``<TASK>.csv`` human ratings; empty means the bench's (``$ARGUS_HOME/benches/<bench>/human``)."""
    n_boot: int = 1000
    """Bootstrap resamples (over inputs) for the 95% intervals."""
    human_scale: list[float] = []
    """``[lo, hi]`` of the human rating scale; empty means the scale the ratings declare, else each
    dimension's nominal scale (``ratings.human_scales``), never the observed range."""


def _concat(parts: dict[str, pl.DataFrame] | None, task: str) -> pl.DataFrame | None:
    frames = [df.filter(pl.col("task") == task) for df in (parts or {}).values() if df is not None and df.height]
    frames = [df for df in frames if df.height]
    return pl.concat(frames, how="diagonal_relaxed") if frames else None


def firm_as_evaluators(firm_scores: pl.DataFrame | None, human_dimensions: set[str]) -> EvaluatorScores | None:
    """FIRM ratings as evaluators: each against the human dimension of its name when rated, else every one."""
    if firm_scores is None or firm_scores.height == 0:
        return None
    dims = {s: (d if d in human_dimensions else None)
            for s, d in (("if", "instruction_following"), ("wc", "world_coherence"), ("pq", "perceptual_quality"))}
    return EvaluatorScores(firm_evaluator_scores(firm_scores, dims), dict(FIRM_RANGES))


# What the data version leaves out (assets.versions): none of its columns.
HUMAN_ALIGNMENT_VOLATILE: tuple[str, ...] = ()


@dg.asset(code_version="6", group_name="reports", kinds={"polars"}, metadata=volatile_metadata(HUMAN_ALIGNMENT_VOLATILE),
          ins={"video_scores": dg.AssetIn(metadata={"allow_missing_partitions": True}),
               "criterion_scores": dg.AssetIn(metadata={"allow_missing_partitions": True}),
               "firm_scores": dg.AssetIn(metadata={"allow_missing_partitions": True}),
               "vefx_scores": dg.AssetIn(metadata={"allow_missing_partitions": True})})
def human_alignment(context: dg.AssetExecutionContext, config: HumanAlignmentConfig,
                    video_scores: dict[str, pl.DataFrame],
                    criterion_scores: dict[str, pl.DataFrame],
                    firm_scores: dict[str, pl.DataFrame], vefx_scores: dict[str, pl.DataFrame],
                    bench: BenchResource, storage: StorageResource) -> dg.Output[pl.DataFrame]:
    """SRCC, KRCC, PLCC, RMSE, pairwise accuracy, within-input SRCC/KRCC, MAE and accuracies per
    task, human dimension and evaluator (VideoArgus's, and FIRM-Video's and VEFX-Bench's where they
    are materialized), with a scatter plot per evaluator."""
    human_dir = config.human_dir or bench.human_path()
    if config.human_scale and len(config.human_scale) != 2:
        raise dg.Failure(f"human_alignment config human_scale={config.human_scale}: give [lo, hi] or leave it empty")
    scale = cast(tuple[float, float], tuple(config.human_scale)) if config.human_scale else None  # [lo, hi]: checked above
    store = storage.storage()
    metadata: dict[str, dg.MetadataValue]
    tables, metadata, problems, found = [], {}, [], []
    files = bench.human_files(store, human_dir)
    for task in ALL_TASKS:
        if task not in files:
            continue
        found.append(task)
        path = join(human_dir, f"{task}.csv")  # named as the user put it (a local copy is read)
        human = read_human(files[task], source=path)
        scores = project_scores(_concat(video_scores, task), _concat(criterion_scores, task), task=task)
        firm = firm_as_evaluators(_concat(firm_scores, task), set(human.averaged()["dimension"].to_list()))
        if firm is not None:
            scores = merge_scores([scores, firm])
        edits = _concat(vefx_scores, task)
        if edits is not None:
            scores = merge_scores([scores, EvaluatorScores(vefx.evaluator_scores(edits), dict(vefx.RANGES))])
        table = alignment_report(human, scores, human_scale=scale, n_boot=config.n_boot)
        problems += human.problems  # what reading said, and the ratings refused off their scale
        if table.height == 0:
            problems.append(f"{task}: no video has both a human rating in {path} and a score "
                            "(are its models materialized, and do the input ids and model names match?)")
            continue
        tables.append(table.with_columns(pl.lit(task).alias("task")).select(list(ALIGNMENT_TABLE)))
        metadata[f"{task} alignment"] = dg.MetadataValue.md("```\n" + format_alignment(table) + "\n```")
        averaged = vefx.human_overall(human.averaged())  # the card's overall, as the table compares it
        for evaluator in table["evaluator"].unique(maintain_order=True).to_list():
            png = join(bench.reports_path(), "alignment", task, f"{slug(evaluator)}.png")
            scatter_png(png, averaged, scores.scores, evaluator, table, title=f"{task} · {evaluator}", storage=store)
            metadata[f"{task} scatter {evaluator}"] = dg.MetadataValue.path(relative(png, parent(bench.reports_path())))
            metadata[f"{task} scatter {evaluator} url"] = dg.MetadataValue.url(store.link(png, bench.reports_path()))
    out = pl.concat(tables) if tables else pl.DataFrame(schema=ALIGNMENT_TABLE)
    if not found:
        context.log.warning(f"no human ratings under {human_dir}: add <TASK>.csv with "
                            "input_id, model, score[, dimension][, rater]")
    for p in problems[:20]:
        context.log.warning(p)
    return dg.Output(out, data_version=content_version(out, HUMAN_ALIGNMENT_VOLATILE), metadata={
        "n_rows": out.height, "tasks": ", ".join(found) or "none", "human_dir": str(human_dir),
        "skipped": dg.MetadataValue.md("\n".join(f"- {p}" for p in problems[:20]) or "none"),
        **metadata,
    })


@dg.asset_check(asset=human_alignment, description="Correlations lie in [-1, 1], accuracies in [0, 1], "
                "errors are non-negative and every interval is ordered.")
def human_alignment_in_range(human_alignment: pl.DataFrame) -> dg.AssetCheckResult:
    t = human_alignment

    def v(c: str) -> pl.Expr:  # undefined figures (NaN) are allowed; polars would order NaN above 1
        return pl.col(c).fill_nan(None)

    bad = pl.lit(False)
    for c in ("srcc", "krcc", "plcc", "within_input_srcc", "within_input_krcc"):
        bad = bad | (v(c).abs() > 1 + 1e-9)
    for c in ("pairwise_acc", "accuracy", "relaxed_accuracy"):
        bad = bad | (v(c) < 0) | (v(c) > 1)
    for c in ("rmse", "mae", "std_abs_err"):
        bad = bad | (v(c) < 0)
    for c in ("srcc", "krcc", "plcc", "rmse", "pairwise_acc", "within_input_srcc", "within_input_krcc"):
        bad = bad | (v(f"{c}_lo") > v(f"{c}_hi"))
    n_bad = t.filter(bad.fill_null(False)).height if t.height else 0
    return dg.AssetCheckResult(passed=n_bad == 0, metadata={"n_bad": n_bad, "n_rows": t.height})
