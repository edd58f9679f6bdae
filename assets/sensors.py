"""The candidate-store sensor: new models become partitions, and what changed outside is observed;
and the dead-run sensor: runs whose process is gone are failed and free their pool slots.

Each tick lists ``<TASK>/<model>/<id>.<ext>`` (and samples) in the candidate store, hashing only the
entries whose change token moved since the cursor (:mod:`argus_dagster.method.candidate_store`), so an
unchanged store costs one directory walk. It then

* adds every model not yet in ``candidate_models`` as a partition, and
* records an observation (:mod:`assets.sources`) for every source whose data version differs from
  the one the instance recorded last: a partition's videos, a task's bench files and frozen rubrics,
  the evaluator's parts.

In the served code location it instead requests one run of the pass job (``evaluate``,
:mod:`argus_dagster.client.pass_job`) for what it found, and records nothing itself: the pass adds the
models and observes the sources as its first step, then brings the whole evaluation up to date in one
run worker (what those observations make stale or missing, as Dagster's automation conditions
(:mod:`assets.automation`) say, and nothing else). The automation sensor holds back while a pass is
queued or in flight, so it never races the pass stage by stage. Without the job (the command line's
definitions) the automation sensor requests the same partitions itself.
"""


import json
import time

import dagster as dg

from argus_dagster.infra.environment import DEAD_RUN_INTERVAL_S, SENSOR_INTERVAL_S
from argus_dagster.infra.processes import LAUNCHER_TAG, PROCESS_TAG, alive
from argus_dagster.method.candidate_store import open_store as open_candidate_store
from argus_dagster.method.candidate_store import scan
from argus_dagster.records.automation import passes_in_flight
from argus_dagster.resources.bench import BenchResource
from argus_dagster.resources.judging import JudgeResource, RubricGeneratorResource, ScoringResource
from argus_dagster.resources.storage import StorageResource
from argus_dagster.resources.tools import ToolsResource
from argus_dagster.resources.vlm import VlmResource

from .sources import changed_observations, source_versions

CURSOR_VERSION = 2


def open_store(location: str, storage: StorageResource):
    """The candidate store at a local folder or an ``s3://bucket/prefix``, read through ``storage``."""
    return open_candidate_store(location, storage.storage())


def store_location(bench: BenchResource) -> str:
    return str(bench.candidates_path())


def _read_cursor(cursor: str | None) -> dict | None:
    """The previous scan's entries, or None without a (current) cursor."""
    if not cursor:
        return None
    data = json.loads(cursor)
    return data["entries"] if data.get("v") == CURSOR_VERSION else None


def candidate_store_tick(context: dg.SensorEvaluationContext, bench: BenchResource,
                           rubric_generator: RubricGeneratorResource, rubric_vlm: VlmResource, tools: ToolsResource,
                           vlm: VlmResource, judge: JudgeResource, scoring: ScoringResource,
                           storage: StorageResource, pass_job: str | None = None):
    t0 = time.perf_counter()
    result = scan(open_store(store_location(bench), storage), _read_cursor(context.cursor))
    instance = context.instance
    known_models = set(instance.get_dynamic_partitions("candidate_models"))
    new_models = sorted(set(result.models) - known_models)
    partitions = [(t, m) for m, tasks in result.models.items() for t in tasks]
    resources = {"bench": bench, "storage": storage, "rubric_generator": rubric_generator, "rubric_vlm": rubric_vlm,
                 "tools": tools, "vlm": vlm, "judge": judge, "scoring": scoring}
    observed = changed_observations(instance, source_versions(resources, {t for t, _ in partitions}, partitions,
                                                               result.known))
    for problem in result.problems:
        context.log.warning(problem)
    for o in observed:
        context.log.info(f"{o.asset}{f' {o.partition}' if o.partition else ''}: new data version {o.version}")
    context.log.info(f"{result.n_entries} videos, {result.n_hashed} hashed, {len(new_models)} new models, "
                     f"{len(observed)} sources changed, {time.perf_counter() - t0:.3f}s")
    cursor = json.dumps({"v": CURSOR_VERSION, "entries": result.known}, separators=(",", ":"))
    if not observed and not new_models:
        return dg.SensorResult(skip_reason=f"no change among {result.n_entries} candidate videos and the sources",
                               cursor=cursor)
    if pass_job:
        # The pass records the change itself (it adds the models and observes the sources first): the
        # automation sensor cannot see the change before the pass's run exists, and then holds back.
        # Until a pass has recorded it, every tick finds it again; one pass at a time is asked for.
        busy = passes_in_flight(instance)
        if busy:
            return dg.SensorResult(skip_reason=f"run {busy[0][:8]} of the {pass_job} job is bringing the evaluation "
                                               "up to date", cursor=cursor)
        why = (f"new models: {', '.join(new_models)}; " if new_models else "") + f"{len(observed)} sources changed"
        return dg.SensorResult(cursor=cursor, run_requests=[dg.RunRequest(job_name=pass_job, tags={"argus/why": why})])
    return dg.SensorResult(
        cursor=cursor, asset_events=[o.event() for o in observed],
        dynamic_partitions_requests=[dg.AddDynamicPartitionsRequest("candidate_models", new_models)] if new_models else [],
    )


def candidate_store_sensor_every(seconds: int = SENSOR_INTERVAL_S,
                                 pass_job: dg.JobDefinition | None = None) -> dg.SensorDefinition:
    """The candidate-store sensor, ticking at most every ``seconds`` (the code location reads
    ``ARGUS_SENSOR_INTERVAL_S``: :func:`~argus_dagster.infra.environment.sensor_intervals`); with
    ``pass_job``, it requests a run of it for each change it records."""
    if pass_job is None:
        return dg.sensor(name="candidate_store_sensor", minimum_interval_seconds=seconds,
                         default_status=dg.DefaultSensorStatus.RUNNING,
                         description="Adds new models as partitions and observes the sources that changed (videos, "
                                     "bench files, frozen rubrics, the evaluator); the automation sensor scores what "
                                     "became stale.")(candidate_store_tick)

    def tick(context: dg.SensorEvaluationContext, bench: BenchResource, rubric_generator: RubricGeneratorResource,
             rubric_vlm: VlmResource, tools: ToolsResource, vlm: VlmResource, judge: JudgeResource,
             scoring: ScoringResource, storage: StorageResource):
        return candidate_store_tick(context, bench, rubric_generator, rubric_vlm, tools, vlm, judge, scoring, storage,
                                    pass_job=pass_job.name)

    return dg.sensor(name="candidate_store_sensor", minimum_interval_seconds=seconds, jobs=[pass_job],
                     default_status=dg.DefaultSensorStatus.RUNNING,
                     description="Adds new models as partitions, observes the sources that changed (videos, bench "
                                 "files, frozen rubrics, the evaluator) and requests one run of the evaluate job, "
                                 "which brings the evaluation up to date.")(tick)


candidate_store_sensor = candidate_store_sensor_every()


def dead_run_tick(context: dg.SensorEvaluationContext) -> dg.SkipReason:
    """Runs left started by a process of this machine that is gone (a killed ``argus evaluate``) are
    marked failed and give back their concurrency-pool slots (:func:`fail_dead_runs`; which process runs what: :mod:`argus_dagster.infra.processes`). It
    requests nothing: what those runs left undone is missing or stale, and the automation sensor asks
    for it again."""
    lines = fail_dead_runs(context.instance)
    for line in lines:
        context.log.warning(line)
    return dg.SkipReason("\n".join(lines) if lines else "no run was left started by a process that is gone")


def dead_run_sensor_every(seconds: int = DEAD_RUN_INTERVAL_S) -> dg.SensorDefinition:
    """The dead-run sensor, ticking at most every ``seconds`` (``ARGUS_DEAD_RUN_INTERVAL_S``); ``argus
    evaluate`` asks it once before its runs."""
    return dg.sensor(name="dead_run_sensor", minimum_interval_seconds=seconds,
                     default_status=dg.DefaultSensorStatus.RUNNING,
                     description="Marks failed the runs whose process is gone (a killed argus evaluate) and frees "
                                 "the concurrency-pool slots they held.")(dead_run_tick)


dead_run_sensor = dead_run_sensor_every()


IN_PROGRESS = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.NOT_STARTED]


def dead_runs(instance: dg.DagsterInstance) -> list[dg.DagsterRun]:
    """The in-progress runs whose :data:`PROCESS_TAG` names a process of this machine that is gone."""
    out = []
    for record in instance.get_run_records(dg.RunsFilter(statuses=IN_PROGRESS, tags={LAUNCHER_TAG: ["cli", "pass"]})):
        process = record.dagster_run.tags.get(PROCESS_TAG)
        if process is not None and not alive(process):
            out.append(record.dagster_run)
    return out


def fail_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Mark every run of :func:`dead_runs` failed and free the pool slots it held; a line for each."""
    lines = []
    for run in dead_runs(instance):
        process = run.tags[PROCESS_TAG]
        instance.report_run_failed(run, message=f"the process that ran it ({process}) is gone; marked failed and "
                                                "its pool slots freed")
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        lines.append(f"run {run.run_id[:8]} was left started by a process that is gone: marked failed, pool slots freed")
    return lines
