"""The nightly reconcile: one backfill of every task x model partition that is missing or stale.

A partition of the candidate store is

* missing when any candidate asset (``candidate_videos`` … ``diagnostic_reports``) never
  materialized for it;
* stale when its videos' content hashes differ from those its ``candidate_videos`` table recorded,
  when the task's rubrics materialized after its ``video_scores``, or when an asset's code version
  differs from the one its last materialization ran with.

Missing partitions go first, then stale ones, up to ``ARGUS_RECONCILE_MAX_PARTITIONS`` (default 100)
per night, so one night never floods the run queue (one run per partition). A task whose rubrics
never materialized joins the backfill, which orders it before its candidates.

Dagster's scheduler launches runs, not backfills (only sensors may return one), so the schedule
submits the backfill itself, exactly as the sensor daemon does, and its tick says which. While the
previous night's backfill still runs, nothing new is submitted.
"""


import os

import dagster as dg
from dagster._core.definitions.assets.graph.asset_graph_subset import AssetGraphSubset
from dagster._core.definitions.events import AssetKeyPartitionKey
from dagster._core.execution.backfill import BulkActionStatus, PartitionBackfill
from dagster._core.utils import make_new_backfill_id
from dagster._time import get_current_timestamp

from argus_dagster.candidate_store import partition_hashes, scan
from resources.bench import BenchResource

from . import CANDIDATE_ASSETS
from .candidates import video_scores
from .inputs import input_instances, rubrics
from .lineage import latest_record
from .sensors import CANDIDATE_KEYS, open_store, recorded_hashes, store_location

CODE_VERSION_TAG = "dagster/code_version"


def max_partitions() -> int:
    raw = os.environ.get("ARGUS_RECONCILE_MAX_PARTITIONS", "100")
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"ARGUS_RECONCILE_MAX_PARTITIONS={raw!r}: expected a whole number of partitions") from None
    if value < 1:
        raise ValueError(f"ARGUS_RECONCILE_MAX_PARTITIONS={value}: must be at least 1")
    return value


def partition_status(instance: dg.DagsterInstance, task: str, model: str, hashes: dict[str, str]) -> str | None:
    """``"missing"``, ``"stale: <why>"`` or None (up to date)."""
    key = str(dg.MultiPartitionKey({"task": task, "model": model}))
    records = {a.key: latest_record(instance, a.key.to_user_string(), key) for a in CANDIDATE_ASSETS}
    absent = [k.to_user_string() for k, r in records.items() if r is None]
    if absent:
        return "missing"
    if recorded_hashes(instance, task, model) != hashes:
        return "stale: candidate videos changed"
    rubric = latest_record(instance, "rubrics", task)
    if rubric is not None and rubric.storage_id > records[video_scores.key].storage_id:
        return "stale: rubrics re-materialized"
    for a in CANDIDATE_ASSETS:
        ran_with = records[a.key].asset_materialization.tags.get(CODE_VERSION_TAG)
        if ran_with != a.code_versions_by_key[a.key]:
            return f"stale: {a.key.to_user_string()} code version {ran_with} -> {a.code_versions_by_key[a.key]}"
    return None


TAG = "argus/launcher"


@dg.schedule(cron_schedule="0 2 * * *", name="nightly_reconcile", target=CANDIDATE_KEYS,
             default_status=dg.DefaultScheduleStatus.RUNNING,
             description="Backfills every task x model partition that is missing or stale (bounded per night).")
def nightly_reconcile(context: dg.ScheduleEvaluationContext, bench: BenchResource):
    instance = context.instance
    running = [b for b in instance.get_backfills(status=BulkActionStatus.REQUESTED)
               if b.tags.get(TAG) == "nightly_reconcile"]
    if running:
        return dg.SkipReason(f"backfill {running[0].backfill_id} of a previous reconcile is still running")
    result = scan(open_store(store_location(bench)), None)
    known_models = set(instance.get_dynamic_partitions("candidate_models"))
    new_models = sorted(set(result.models) - known_models)
    if new_models:
        instance.add_dynamic_partitions("candidate_models", new_models)
    missing, stale = [], []
    for model, tasks in sorted(result.models.items()):
        for task in sorted(tasks):
            status = partition_status(instance, task, model, partition_hashes(result.known, task, model))
            if status == "missing":
                missing.append((task, model))
            elif status:
                stale.append((task, model, status))
    chosen = (missing + [(t, m) for t, m, _ in stale])[:max_partitions()]
    for t, m, why in stale:
        context.log.info(f"{t} x {m}: {why}")
    if not chosen:
        return dg.SkipReason(f"all {sum(len(t) for t in result.models.values())} partitions are up to date")
    rubric_tasks = set(instance.get_materialized_partitions(rubrics.key) or ())
    wanted = {AssetKeyPartitionKey(k, str(dg.MultiPartitionKey({"task": t, "model": m})))
              for t, m in chosen for k in CANDIDATE_KEYS}
    wanted |= {AssetKeyPartitionKey(k, t) for t in {t for t, _ in chosen} - rubric_tasks
               for k in (input_instances.key, rubrics.key)}
    subset = AssetGraphSubset.from_asset_partition_set(wanted, context.repository_def.asset_graph)
    backfill_id = make_new_backfill_id()
    instance.add_backfill(PartitionBackfill.from_asset_graph_subset(
        backfill_id=backfill_id, dynamic_partitions_store=instance, backfill_timestamp=get_current_timestamp(),
        asset_graph_subset=subset, tags={TAG: "nightly_reconcile"}, title="nightly reconcile",
        description=f"{len(missing)} missing, {len(stale)} stale; {len(chosen)} partitions this night",
        run_config=None))
    return dg.SkipReason(f"submitted backfill {backfill_id}: {len(chosen)} partitions "
                         f"({len(missing)} missing, {len(stale)} stale, bound {max_partitions()})")
