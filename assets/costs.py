"""The cost ledger as an asset of its own: what every VLM request of the evaluation cost, one row per
stage, task and model and a total (:func:`argus_dagster.method.ledger.cost_table`), from the stage
tables it declares as inputs: the rubrics, VideoArgus's video scores, FIRM-Video's checklists and
scores, VEFX-Bench's scores. A protocol that never ran is a missing input: its stage has no rows.

It follows those tables by declarative automation; the site shows it, ``argus evaluations`` and
``argus export costs`` read it, and its run writes it beside the pages (``reports/exports/costs.*``).
"""

import dagster as dg
import polars as pl

from argus_dagster.method.ledger import LEDGER_STAGES, cost_summary, cost_table, format_costs
from argus_dagster.resources.bench import BenchResource
from argus_dagster.resources.storage import StorageResource

from .automation import FOLLOWS_PARTITIONS
from .leaderboard import export_metadata
from .versions import content_version, volatile_metadata

# What the ledger's data version leaves out (assets.versions): none of its columns.
COSTS_VOLATILE: tuple[str, ...] = ()
COST_INPUTS = tuple(LEDGER_STAGES.values())


def _concat(tables: dict[str, pl.DataFrame] | None) -> pl.DataFrame | None:
    frames = [df for df in (tables or {}).values() if df is not None and df.height]
    return pl.concat(frames, how="diagonal_relaxed") if frames else None


def cost_metadata(costs: pl.DataFrame) -> dict:
    """The ledger for a person: its totals first (requests, request-seconds, tokens, the share cached),
    then the table per stage, task and model."""
    total = cost_summary(costs)
    share = total["cached_share"]
    per_video = total["prompt_tokens_per_video"]
    return {"costs_vlm_requests": total["vlm_requests"], "costs_request_seconds": round(total["request_seconds"], 3),
            "costs_prompt_tokens": total["prompt_tokens"], "costs_cached_tokens": total["cached_tokens"],
            "costs_completion_tokens": total["completion_tokens"], "costs_images_sent": total["images_sent"],
            "costs_cached_share": None if share is None else round(share, 4),
            "costs_prompt_tokens_per_video": None if per_video is None else round(per_video, 1),
            "costs": dg.MetadataValue.md("```\n" + format_costs(costs) + "\n```")}


@dg.asset(code_version="1", group_name="reports", kinds={"polars"}, metadata=volatile_metadata(COSTS_VOLATILE),
          automation_condition=FOLLOWS_PARTITIONS,
          ins={name: dg.AssetIn(metadata={"allow_missing_partitions": True}) for name in COST_INPUTS})
def costs(rubrics: dict[str, pl.DataFrame], video_scores: dict[str, pl.DataFrame],
          firm_checklists: dict[str, pl.DataFrame], firm_scores: dict[str, pl.DataFrame],
          vefx_scores: dict[str, pl.DataFrame], bench: BenchResource,
          storage: StorageResource) -> dg.Output[pl.DataFrame]:
    """The evaluation's cost ledger, per stage, task and model, and its total."""
    tables = {"rubrics": rubrics, "video_scores": video_scores, "firm_checklists": firm_checklists,
              "firm_scores": firm_scores, "vefx_scores": vefx_scores}
    ledger = cost_table(stages={stage: _concat(tables[asset]) for stage, asset in LEDGER_STAGES.items()})
    return dg.Output(ledger, data_version=content_version(ledger, COSTS_VOLATILE), metadata={
        **cost_metadata(ledger), **export_metadata({"costs": ledger}, bench, storage.storage())})
