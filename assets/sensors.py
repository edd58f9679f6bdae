"""The candidate-store sensor: a new model is scored, a changed video re-scored, nothing else.

Each tick lists ``<TASK>/<model>/<id>.<ext>`` (and samples) in the candidate store and compares it with the
cursor (JSON: per entry the change token and content hash, see :mod:`argus_dagster.candidate_store`).
Only entries whose token moved are hashed, so an unchanged store costs one directory walk.

* a model not yet in ``candidate_models`` is added as a partition;
* every (task, model) with a new, changed or removed video gets one run request for the candidate
  assets of that partition (run key: the partition's content hashes and the cursor's sequence
  number, so a retried tick never doubles a run, and a video changed back is still re-scored);
* a task whose inputs and rubrics were never materialized gets that run first; its candidate
  partitions wait (they stay out of the cursor) until the rubrics exist.

Without a cursor (first tick, or a reset) a partition that was materialized before is compared with
the video hashes its stored ``candidate_videos`` table recorded, so turning the sensor on does not
re-score what is already scored.
"""


import hashlib
import json
import time

import dagster as dg

from argus_dagster import storage as storage_lib
from argus_dagster.candidate_store import key_places, open_store as open_candidate_store, partition_hashes, scan
from argus_dagster.instances import ALL_TASKS
from argus_dagster.settings import load_settings
from resources.bench import BenchResource
from resources.judging import JudgeResource, RubricGeneratorResource, ScoringResource
from resources.storage import StorageResource
from resources.tools import ToolsResource
from resources.vlm import VlmResource

from . import CANDIDATE_ASSETS, TASK_ASSETS
from .inputs import rubrics
from .lineage import latest_record, stored_table
from .partitions import RANGE_END_TAG, RANGE_START_TAG
from .staleness import evaluator_digests, in_flight_partitions, partition_status

CANDIDATE_KEYS = [a.key for a in CANDIDATE_ASSETS]
TASK_KEYS = [a.key for a in TASK_ASSETS]
CURSOR_VERSION = 1
# Candidate runs call the judge: a run queue's `tag_concurrency_limits` on this tag bounds how many
# share its endpoints at once (deploy/aws/dagster.yaml).
JUDGE_TAGS = {"argus/judge": "1"}


def open_store(location: str, storage: StorageResource):
    """The candidate store at a local folder or an ``s3://bucket/prefix``, read through ``storage``
    (which also becomes the process's, for the stored tables the status reads)."""
    return open_candidate_store(location, storage_lib.use(storage.storage()))


def store_location(bench: BenchResource) -> str:
    return bench.candidates_dir or str(load_settings().candidates_dir)


def _read_cursor(cursor: str | None) -> tuple[dict | None, int]:
    """(entries, sequence number) of a cursor; (None, 0) without one."""
    if not cursor:
        return None, 0
    data = json.loads(cursor)
    if data.get("v") != CURSOR_VERSION:
        return None, 0
    return data["entries"], int(data.get("seq", 0))


def recorded_hashes(instance: dg.DagsterInstance, task: str, model: str) -> dict[tuple[str, str], str] | None:
    """``{(input_id, sample): sha256}`` the partition's last ``candidate_videos`` saw; None if never
    materialized (a table stored before samples were read holds single videos, sample ``""``)."""
    key = str(dg.MultiPartitionKey({"task": task, "model": model}))
    record = latest_record(instance, "candidate_videos", key)
    if record is None:
        return None
    df = stored_table(record)
    if df is None:
        return {}
    return {(r["input_id"], r.get("sample") or ""): r["sha256"] for r in df.iter_rows(named=True) if r["sha256"]}


def _stretches(tasks: list[str]) -> list[list[str]]:
    """``tasks`` in the task partitions' order, cut where one is skipped: each stretch is a range."""
    out: list[list[str]] = []
    for t in sorted(tasks, key=ALL_TASKS.index):
        if out and ALL_TASKS.index(t) == ALL_TASKS.index(out[-1][-1]) + 1:
            out[-1].append(t)
        else:
            out.append([t])
    return out


def candidate_run_requests(partitions: list[tuple[str, str]], hashes_of, launcher: str,
                           seq: int = 0) -> list[dg.RunRequest]:
    """The runs for ``(task, model)`` partitions: one per model and stretch of its tasks (a range of
    partitions in one run, as a backfill takes them under the assets' policy: a new model with five
    tasks is one run, one process). ``hashes_of(task, model)``: the partition's video hashes, for the
    run key (a changed video gets a key not used before); None: runs without a key (a schedule's,
    which asks again whenever the partition is still stale)."""
    by_model: dict[str, list[str]] = {}
    for task, model in partitions:
        by_model.setdefault(model, []).append(task)
    requests = []
    for model, tasks in sorted(by_model.items()):
        for stretch in _stretches(tasks):
            key = None
            if hashes_of is not None:
                hashes = json.dumps([(t, sorted(hashes_of(t, model).items())) for t in stretch])
                digest = hashlib.sha256(hashes.encode()).hexdigest()[:16]
                span = stretch[0] if len(stretch) == 1 else f"{stretch[0]}..{stretch[-1]}"
                key = f"{span}/{model}/{digest}/{seq}"
            first, last = (dg.MultiPartitionKey({"task": t, "model": model}) for t in (stretch[0], stretch[-1]))
            run_tags = {"argus/launcher": launcher, **JUDGE_TAGS}
            if len(stretch) == 1:
                requests.append(dg.RunRequest(run_key=key, asset_selection=CANDIDATE_KEYS, partition_key=first,
                                              tags=run_tags))
            else:
                requests.append(dg.RunRequest(run_key=key, asset_selection=CANDIDATE_KEYS,
                                              tags={**run_tags, RANGE_START_TAG: str(first), RANGE_END_TAG: str(last)}))
    return requests


@dg.sensor(name="candidate_store_sensor", asset_selection=CANDIDATE_KEYS + TASK_KEYS, minimum_interval_seconds=60,
           default_status=dg.DefaultSensorStatus.RUNNING,
           description="Adds new models as partitions and scores new or changed candidate videos.")
def candidate_store_sensor(context: dg.SensorEvaluationContext, bench: BenchResource,
                           rubric_generator: RubricGeneratorResource, rubric_vlm: VlmResource, tools: ToolsResource,
                           vlm: VlmResource, judge: JudgeResource, scoring: ScoringResource,
                           storage: StorageResource):
    t0 = time.perf_counter()
    previous, seq = _read_cursor(context.cursor)
    result = scan(open_store(store_location(bench), storage), previous)
    instance = context.instance

    known_models = set(instance.get_dynamic_partitions("candidate_models"))
    new_models = sorted(set(result.models) - known_models)
    rubric_tasks = set(instance.get_materialized_partitions(rubrics.key) or ())

    changed = set(result.changed)
    digests = evaluator_digests({"rubric_generator": rubric_generator, "rubric_vlm": rubric_vlm, "tools": tools,
                                 "vlm": vlm, "judge": judge, "scoring": scoring})
    # A changed partition that is already up to date (scored by argus evaluate, or by the UI) is not
    # requested again: the same question argus evaluate and the nightly reconcile ask.
    # A partition that a queued or running run is materializing (a UI backfill, the reconcile) is not
    # requested twice; its entries stay out of the cursor, so the next tick looks at it again.
    running = in_flight_partitions(instance)
    busy = set()
    for task, model in sorted(changed):
        if task in running or str(dg.MultiPartitionKey({"task": task, "model": model})) in running:
            busy.add((task, model))
            changed.discard((task, model))
        elif model in known_models and partition_status(
                instance, task, model, partition_hashes(result.known, task, model), digests) is None:
            changed.discard((task, model))

    requests, waiting = [], set()
    for task in sorted({t for t, _ in changed}):
        if task in rubric_tasks:
            continue
        waiting.add(task)
        requests.append(dg.RunRequest(run_key=f"inputs/{task}/{_stamp(result.known, task)}", asset_selection=TASK_KEYS,
                                      partition_key=task, tags={"argus/launcher": "sensor"}))
    requests += candidate_run_requests([(t, m) for t, m in sorted(changed) if t not in waiting],
                                       lambda t, m: partition_hashes(result.known, t, m), "sensor", seq + 1)

    # Entries of partitions that wait for their task's rubrics stay out of the cursor: seen as new next tick.
    def held(key: str) -> bool:  # looked at again next tick
        return any(task in waiting or (task, model) in busy for task, model, _ in key_places(key))

    keep = {k: v for k, v in result.known.items() if not held(k)}
    if previous is not None:
        keep.update({k: v for k, v in previous.items() if held(k)})
    for problem in result.problems:
        context.log.warning(problem)
    context.log.info(f"{result.n_entries} videos, {result.n_hashed} hashed, {len(changed)} partitions changed, "
                     f"{len(new_models)} new models, {time.perf_counter() - t0:.3f}s")
    seq += bool(requests)
    cursor = json.dumps({"v": CURSOR_VERSION, "seq": seq, "entries": keep}, separators=(",", ":"))
    if not requests and not new_models:
        return dg.SensorResult(skip_reason=f"no change among {result.n_entries} candidate videos", cursor=cursor)
    return dg.SensorResult(
        run_requests=requests, cursor=cursor,
        dynamic_partitions_requests=[dg.AddDynamicPartitionsRequest("candidate_models", new_models)] if new_models else [],
    )


def _task_of(key: str) -> str:
    places = key_places(key)
    return places[0][0] if places else ""


def _stamp(known: dict, task: str) -> str:
    """Changes when the task's candidate set changes, so a failed inputs run is retried after an edit."""
    keys = sorted(k for k in known if _task_of(k) == task)
    return hashlib.sha256(json.dumps([(k, known[k][1]) for k in keys]).encode()).hexdigest()[:12]
