"""Partitions: ``task`` (static, the five tasks) x ``model`` (dynamic, ``candidate_models``)."""

import dagster as dg

from argus_dagster.instances import ALL_TASKS

task_partitions = dg.StaticPartitionsDefinition(list(ALL_TASKS))
model_partitions = dg.DynamicPartitionsDefinition(name="candidate_models")
task_model_partitions = dg.MultiPartitionsDefinition({"task": task_partitions, "model": model_partitions})

# Candidate-side assets read the output-blind, task-partitioned ones of their own task: Dagster
# infers that mapping (task x model -> task) from the shared "task" dimension.


def task_and_model(context: dg.AssetExecutionContext) -> tuple[str, str]:
    keys = context.partition_key.keys_by_dimension
    return keys["task"], keys["model"]
