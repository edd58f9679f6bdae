"""The nightly reconcile: a run for every task x model partition that is missing or stale.

Missing and stale are :mod:`assets.staleness`'s answer, the one ``argus evaluate`` and the
candidate-store sensor get too (code versions, the inputs each asset read and their data versions,
video hashes, the evaluator, work left to retry).

Missing partitions go first, then stale ones, up to ``ARGUS_RECONCILE_MAX_PARTITIONS`` (default 100)
per night, so one night never floods the run queue (a run per model and stretch of its tasks, as
the sensor asks them). The candidate partitions
of a task whose rubrics never materialized wait: the candidate-store sensor requests the task's
inputs and rubrics first, then them. A partition whose previous reconcile run is still queued or
running is not requested again.
"""



import dagster as dg

from argus_dagster.candidate_store import partition_hashes, scan
from argus_dagster.settings import environment
from resources.bench import BenchResource
from resources.judging import JudgeResource, RubricGeneratorResource, ScoringResource
from resources.storage import StorageResource
from resources.tools import ToolsResource
from resources.vlm import VlmResource

from .inputs import rubrics
from .sensors import CANDIDATE_KEYS, candidate_run_requests, open_store, store_location
from .staleness import evaluator_digests, in_flight_partitions, partition_status


def max_partitions() -> int:
    return int(environment().number("ARGUS_RECONCILE_MAX_PARTITIONS", 100, minimum=1))




@dg.schedule(cron_schedule="0 2 * * *", name="nightly_reconcile", target=CANDIDATE_KEYS,
             default_status=dg.DefaultScheduleStatus.RUNNING,
             description="Requests a run for every task x model partition that is missing or stale (bounded per night).")
def nightly_reconcile(context: dg.ScheduleEvaluationContext, bench: BenchResource,
                      rubric_generator: RubricGeneratorResource, rubric_vlm: VlmResource, tools: ToolsResource,
                      vlm: VlmResource, judge: JudgeResource, scoring: ScoringResource,
                      storage: StorageResource):
    instance = context.instance
    digests = evaluator_digests({"rubric_generator": rubric_generator, "rubric_vlm": rubric_vlm, "tools": tools,
                                 "vlm": vlm, "judge": judge, "scoring": scoring})
    result = scan(open_store(store_location(bench), storage), None)
    known_models = set(instance.get_dynamic_partitions("candidate_models"))
    new_models = sorted(set(result.models) - known_models)
    if new_models:
        instance.add_dynamic_partitions("candidate_models", new_models)
    rubric_tasks = set(instance.get_materialized_partitions(rubrics.key) or ())
    running = in_flight_partitions(instance)
    missing, stale, waiting = [], [], set()
    for model, tasks in sorted(result.models.items()):
        for task in sorted(tasks):
            if task not in rubric_tasks:
                waiting.add(task)
                continue
            if str(dg.MultiPartitionKey({"task": task, "model": model})) in running:
                continue
            status = partition_status(instance, task, model, partition_hashes(result.known, task, model), digests)
            if status == "missing":
                missing.append((task, model))
            elif status:
                stale.append((task, model, status))
    chosen = (missing + [(t, m) for t, m, _ in stale])[:max_partitions()]
    for t, m, why in stale:
        context.log.info(f"{t} x {m}: {why}")
    if waiting:  # a schedule targets one partitions definition: the sensor materializes rubrics
        context.log.info(f"tasks {sorted(waiting)} have no rubrics yet; candidate_store_sensor requests them first")
    # Missing partitions first, then stale ones; each group as runs of ranges (one per model and
    # stretch of its tasks), as the sensor and a UI backfill take them.
    first = set(missing)
    requests = [r for group in ([p for p in chosen if p in first], [p for p in chosen if p not in first])
                for r in candidate_run_requests(group, None, "nightly_reconcile")]
    if not requests:
        n = sum(len(t) for t in result.models.values())
        why = f"all {n} partitions are up to date" if not running else f"{len(running)} partition runs still in flight"
        return dg.SkipReason(why)
    context.log.info(f"{len(missing)} missing, {len(stale)} stale; {len(chosen)} partitions this night")
    return requests
