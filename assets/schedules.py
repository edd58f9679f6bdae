"""The nightly reconcile: a run for every task x model partition that is missing or stale.

A partition of the candidate store is

* missing when any candidate asset (``candidate_videos`` … ``diagnostic_reports``) never
  materialized for it;
* stale when its videos' content hashes differ from those its ``candidate_videos`` table recorded,
  when the task's rubrics materialized after its ``video_scores``, or when an asset's code version
  differs from the one its last materialization ran with.

Missing partitions go first, then stale ones, up to ``ARGUS_RECONCILE_MAX_PARTITIONS`` (default 100)
per night, so one night never floods the run queue (one run per partition). The candidate partitions
of a task whose rubrics never materialized wait: the candidate-store sensor requests the task's
inputs and rubrics first, then them. A partition whose previous reconcile run is still queued or
running is not requested again.
"""



import dagster as dg

from argus_dagster.candidate_store import partition_hashes, scan
from argus_dagster.settings import environment
from resources.bench import BenchResource

from . import CANDIDATE_ASSETS
from .candidates import video_scores
from .inputs import rubrics
from .lineage import latest_record
from .sensors import CANDIDATE_KEYS, JUDGE_TAGS, open_store, recorded_hashes, store_location

CODE_VERSION_TAG = "dagster/code_version"


def max_partitions() -> int:
    return int(environment().number("ARGUS_RECONCILE_MAX_PARTITIONS", 100, minimum=1))


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


IN_FLIGHT = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
             dg.DagsterRunStatus.STARTED]


def _in_flight(instance: dg.DagsterInstance) -> set[str]:
    """Partitions (task or task|model keys) of reconcile runs that are queued or running."""
    records = instance.get_run_records(filters=dg.RunsFilter(statuses=IN_FLIGHT, tags={TAG: "nightly_reconcile"}))
    return {r.dagster_run.tags.get("dagster/partition") for r in records} - {None}


@dg.schedule(cron_schedule="0 2 * * *", name="nightly_reconcile", target=CANDIDATE_KEYS,
             default_status=dg.DefaultScheduleStatus.RUNNING,
             description="Requests a run for every task x model partition that is missing or stale (bounded per night).")
def nightly_reconcile(context: dg.ScheduleEvaluationContext, bench: BenchResource):
    instance = context.instance
    result = scan(open_store(store_location(bench)), None)
    known_models = set(instance.get_dynamic_partitions("candidate_models"))
    new_models = sorted(set(result.models) - known_models)
    if new_models:
        instance.add_dynamic_partitions("candidate_models", new_models)
    rubric_tasks = set(instance.get_materialized_partitions(rubrics.key) or ())
    running = _in_flight(instance)
    missing, stale, waiting = [], [], set()
    for model, tasks in sorted(result.models.items()):
        for task in sorted(tasks):
            if task not in rubric_tasks:
                waiting.add(task)
                continue
            if str(dg.MultiPartitionKey({"task": task, "model": model})) in running:
                continue
            status = partition_status(instance, task, model, partition_hashes(result.known, task, model))
            if status == "missing":
                missing.append((task, model))
            elif status:
                stale.append((task, model, status))
    chosen = (missing + [(t, m) for t, m, _ in stale])[:max_partitions()]
    for t, m, why in stale:
        context.log.info(f"{t} x {m}: {why}")
    if waiting:  # a schedule targets one partitions definition: the sensor materializes rubrics
        context.log.info(f"tasks {sorted(waiting)} have no rubrics yet; candidate_store_sensor requests them first")
    requests = [dg.RunRequest(run_key=None, asset_selection=CANDIDATE_KEYS,
                               partition_key=dg.MultiPartitionKey({"task": t, "model": m}),
                               tags={TAG: "nightly_reconcile", **JUDGE_TAGS})
                 for t, m in chosen]
    if not requests:
        n = sum(len(t) for t in result.models.values())
        why = f"all {n} partitions are up to date" if not running else f"{len(running)} reconcile runs still in flight"
        return dg.SkipReason(why)
    context.log.info(f"{len(missing)} missing, {len(stale)} stale; {len(chosen)} partitions this night")
    return requests
