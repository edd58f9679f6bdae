"""Partitions: ``task`` (static, the five tasks) x ``model`` (dynamic, ``candidate_models``), and runs
that take many partitions at once.

A backfill (from the UI, or the sensor's requests) of the partitioned assets takes one run per
range of partitions (:data:`BACKFILL`), not one per partition: a run is a process that imports the
code and opens its resources (VLM client, frame pool, models) once, so a bench of a few videos per
partition no longer pays that per partition. An asset function is written for one partition;
:func:`each_partition` runs it over every partition of its run, each with its own inputs,
metadata (``add_asset_metadata`` per partition) and stored table.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import dagster as dg
import polars as pl

from argus_dagster.assets.versions import content_version
from argus_dagster.method.gather import each
from argus_dagster.method.inputs import ALL_TASKS

task_partitions = dg.StaticPartitionsDefinition(list(ALL_TASKS))
model_partitions = dg.DynamicPartitionsDefinition(name="candidate_models")
task_model_partitions = dg.MultiPartitionsDefinition({"task": task_partitions, "model": model_partitions})

# Candidate-side assets read the output-blind, task-partitioned ones of their own task: Dagster
# infers that mapping (task x model -> task) from the shared "task" dimension.

# One run per range of partitions a backfill asks for (a range holds one model or one task fixed:
# Dagster's ranges of a two-dimensional partition set); the run queue bounds how many run at once.
BACKFILL = dg.BackfillPolicy.single_run()

# How many partitions of a range one asset step works on at once.
PARTITIONS_AT_ONCE = 8

RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"


def task_and_model(context: dg.AssetExecutionContext) -> tuple[str, str]:
    keys = context.partition_key.keys_by_dimension
    return keys["task"], keys["model"]


def partition_key(partitions_def, key: str):
    """``key`` as the partitions definition names it (a ``MultiPartitionKey`` for task x model)."""
    if isinstance(partitions_def, dg.MultiPartitionsDefinition) and not isinstance(key, dg.MultiPartitionKey):
        return partitions_def.get_partition_key_from_str(key)
    return key


def tables_by_partition(value) -> dict[str, pl.DataFrame]:
    """An input of a run of one partition (a table) or of many (``{partition: table}``), as a mapping."""
    return {str(k): v for k, v in value.items()} if isinstance(value, dict) else {"": value}


class _OnePartition:
    """The run's context as one of its partitions sees it: ``partition_key`` is that partition's;
    everything else (log, instance, asset key) is the run's."""

    def __init__(self, context: dg.AssetExecutionContext, key):
        self._context, self._key = context, key

    @property
    def partition_key(self):
        return self._key

    @property
    def has_partition_key(self) -> bool:
        return True

    def __getattr__(self, name: str):
        return getattr(self._context, name)


def _table_for(value, key) -> Any:
    """The table of partition ``key`` in an input loaded for a run of many partitions: the input is
    ``{partition: table}`` (keyed like ``key``, or by its task for a task-partitioned input), or one
    table when every partition of the run reads the same one."""
    if not isinstance(value, dict):
        return value
    if str(key) in value:
        return value[str(key)]
    return value[key.keys_by_dimension["task"]]


def _combined_version(versions: dict[str, dg.DataVersion | None]) -> dg.DataVersion:
    """One data version for the partitions of a run (Dagster records one per output): it changes when
    any of theirs does (each partition's own is its table's, :func:`~assets.versions.content_version`)."""
    return content_version(versions)


def each_partition(body):
    """``body``, an asset function for one partition (it returns a ``dg.Output`` of a table), as the
    asset's function for runs of one partition or of a range. In a range each partition gets its own
    call with its own tables, its metadata is recorded on its own materialization, and the output is
    ``{partition: table}`` (the IO manager stores one file per partition); the partitions run at
    once (:data:`PARTITIONS_AT_ONCE`), their metadata recorded in order. Table inputs are typed
    ``Any`` for Dagster: a table in a run of one partition, a mapping in a range."""
    sig = inspect.signature(body)
    tables = [n for n, p in sig.parameters.items() if p.annotation in (pl.DataFrame, "pl.DataFrame")]

    @functools.wraps(body)
    def run(context: dg.AssetExecutionContext, **kwargs):
        keys = list(context.partition_keys)
        if len(keys) == 1:
            return body(context, **kwargs)
        pdef = context.assets_def.partitions_def
        parts = [partition_key(pdef, raw) for raw in keys]

        def one(key):
            args = {n: _table_for(v, key) if n in tables else v for n, v in kwargs.items()}
            return body(_OnePartition(context, key), **args)

        # The partitions of a range run at once, each in its own copy of the caller's context variables:
        # one partition's CPU tools overlap another's judge requests, under the same process-wide bounds
        # (VLM slots, tool threads, frame pool) a run of one partition has.
        outs = each(parts, one, workers=PARTITIONS_AT_ONCE, own_context=True)
        values, versions = {}, {}
        for key, out in zip(parts, outs):  # metadata recorded from the run's own thread, in order
            values[str(key)] = out.value
            versions[str(key)] = out.data_version
            context.add_asset_metadata({**out.metadata, "dagster/row_count": out.value.height},
                                       partition_key=str(key))
        return dg.Output(values, data_version=_combined_version(versions))

    params = [p.replace(annotation=Any) if p.name in tables else p for p in sig.parameters.values()]
    run.__signature__ = sig.replace(parameters=params, return_annotation=inspect.Signature.empty)
    return run
