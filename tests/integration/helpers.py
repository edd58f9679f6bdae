"""Materializing the graph against a bench folder with an explicit instance and storage folder."""

from pathlib import Path

import dagster as dg
import polars as pl
from dagster_polars import PolarsParquetIOManager

from assets import ALL_ASSETS, ALL_CHECKS, CANDIDATE_ASSETS, TASK_ASSETS
from resources import BenchResource, JudgeResource, RubricGeneratorResource, ScoringResource, ToolsResource, VlmResource


def graph_resources(bench: Path, candidates: Path, home: Path, vlm: VlmResource | None = None,
                    rubric_vlm: VlmResource | None = None) -> dict:
    """The embedded default (no VLM) unless VLM resources are given."""
    return {
        "vlm": vlm or VlmResource(),
        "rubric_vlm": rubric_vlm or vlm or VlmResource(),
        "bench": BenchResource(bench_dir=str(bench), candidates_dir=str(candidates),
                               frozen_rubrics_dir=str(home / "rubrics")),
        "tools": ToolsResource(cache_dir=str(home / "cache")),
        "rubric_generator": RubricGeneratorResource(),
        "judge": JudgeResource(),
        "scoring": ScoringResource(),
        "io_manager": PolarsParquetIOManager(base_dir=str(home / "storage")),
    }


def materialize_task(task: str, models: list[str], resources: dict, instance: dg.DagsterInstance) -> None:
    instance.add_dynamic_partitions("candidate_models", models)
    assert dg.materialize(TASK_ASSETS, partition_key=task, instance=instance, resources=resources).success
    for model in models:
        key = dg.MultiPartitionKey({"task": task, "model": model})
        res = dg.materialize(CANDIDATE_ASSETS + TASK_ASSETS, selection=CANDIDATE_ASSETS, partition_key=key,
                             instance=instance, resources=resources)
        assert res.success


def load(asset: str, resources: dict, instance: dg.DagsterInstance, partition_key=None) -> pl.DataFrame:
    defs = dg.Definitions(assets=ALL_ASSETS, asset_checks=ALL_CHECKS, resources=resources)
    return defs.load_asset_value(asset, instance=instance, partition_key=partition_key)
