"""Backbone robustness (method §9): this bench as scored by its evaluator profiles, compared.

Each profile is an evaluation of its own (``argus evaluate --profile ...``); this asset reads the
``video_scores`` and ``criterion_scores`` each stored, and reports per task and pair of profiles the
rank agreement of the model leaderboards, per-criterion score agreement and the models that move most
(:mod:`argus_dagster.protocols.robustness`). ``argus robustness`` prints the same.
"""

from typing import NamedTuple, cast

import dagster as dg
import polars as pl

from argus_dagster.assets.versions import content_version, volatile_metadata
from argus_dagster.protocols import robustness as rb
from argus_dagster.resources.bench import BenchResource
from argus_dagster.resources.storage import StorageResource


class RobustnessConfig(dg.Config):
    # The profiles to compare (at least two); empty: every profile of this bench with stored scores.
    profiles: list[str] = []
    # criterion (profiles that share rubrics: two judges, vlm-only) or dimension (rubrics that differ).
    key: str = "criterion"


class RobustnessTables(NamedTuple):
    """The evaluator profiles of one bench compared (:mod:`argus_dagster.protocols.robustness`)."""

    ranks: pl.DataFrame  # per task and pair of profiles: Kendall tau, Spearman, top-1 agreement
    moves: pl.DataFrame  # the models whose rank moves most between two profiles
    criteria: pl.DataFrame  # criterion (or dimension) score agreement per pair of profiles
    text: str  # all three as a person reads them
    missing: list[str]  # the profiles asked for with nothing stored, left out


def robustness_tables(bench: BenchResource, profiles: list[str], key: str = "criterion",
                      store=None) -> RobustnessTables:
    """``profiles`` of ``bench`` compared (default: all it recorded, or on S3 every one with scores
    stored), their tables read through ``store`` (the storage resource's)."""
    names = profiles or bench.profiles(store)
    videos, criteria, missing = rb.profile_tables({p: bench.profile_storage(p) for p in names}, store)
    if len(videos) < 2:
        raise ValueError(f"backbone robustness needs two profiles with stored scores; bench {bench.bench_name()!r} "
                         f"has {sorted(videos) or 'none'}" + (f" (nothing stored for {sorted(missing)})" if missing else "")
                         + ": score it with another, e.g. `argus evaluate --bench DIR --candidates DIR --profile vlm-only`")
    ranks, moves = rb.rank_agreement(videos)
    crit = rb.criterion_agreement(criteria, key=key)
    return RobustnessTables(ranks, moves, crit, rb.format_robustness(ranks, moves, crit), missing)


# What the data version leaves out (assets.versions): none of the columns of the rank agreement,
# nor of the criterion agreement the version covers with it.
BACKBONE_ROBUSTNESS_VOLATILE: tuple[str, ...] = ()


@dg.asset(code_version="2", group_name="reports", kinds={"polars"}, metadata=volatile_metadata(BACKBONE_ROBUSTNESS_VOLATILE))
def backbone_robustness(context: dg.AssetExecutionContext, config: RobustnessConfig,
                        bench: BenchResource, storage: StorageResource) -> dg.Output[pl.DataFrame]:
    """Per task and pair of evaluator profiles of this bench: Kendall tau and Spearman between their
    model leaderboards, top-1 agreement, criterion score agreement and the models that move most."""
    try:
        compared = robustness_tables(bench, list(config.profiles), config.key, storage.storage())
    except ValueError as exc:
        raise dg.Failure(str(exc)) from None
    ranks, moves, crit, text, missing = compared
    if missing:
        context.log.warning(f"no scores stored for profile(s) {missing}: left out")
    version = content_version({"ranks": ranks, "criteria": crit}, BACKBONE_ROBUSTNESS_VOLATILE)
    overall = crit.filter(pl.col("criterion") == rb.ALL)
    return dg.Output(ranks, data_version=version, metadata={
        "bench": bench.bench_name(), "profiles": dg.MetadataValue.json(sorted(set(ranks["profile_a"]) | set(ranks["profile_b"]))),
        "robustness": dg.MetadataValue.md("```\n" + text + "\n```"),
        "criterion_agreement": dg.MetadataValue.md("```\n" + str(overall) + "\n```"),
        "movers": dg.MetadataValue.md("```\n" + str(moves.head(30)) + "\n```"),
        "min_kendall_tau": (float(cast(float, ranks["kendall_tau"].drop_nans().min()))
                            if ranks["kendall_tau"].drop_nans().len() else None),
    })

