"""argus evaluate as a client of the evaluation's Dagster instance.

It does what the UI, the sensors and a cluster do, in one process: registers models as
``candidate_models`` partitions, observes the sources (:mod:`assets.sources`), asks Dagster what is
missing or stale (the automation conditions of :mod:`assets.automation`, evaluated on the instance's
records) and has Dagster execute exactly that, as in-process runs of ranges of partitions with the
evaluation's resources (:func:`resources.resources_for`) in the evaluation's instance
(``$ARGUS_HOME/benches/<bench>/<profile>/dagster_home``). Nothing here decides what is up to date:
a partition whose inputs, code and evaluator are unchanged, and whose last run left nothing to
retry, is not requested. What makes the runs fast lives in the resources (one VLM client per process
under one bound per machine, the frame pool, the content cache, VLM waits overlapped with CPU tools
inside a stage) and in the ranges: few runs, each keeping the judge's slots full.
"""

from __future__ import annotations

import os
import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import dagster as dg
import polars as pl

from argus_dagster.method.bench import task_dir
from argus_dagster.method.candidate_store import discover, unknown_models
from argus_dagster.infra.progress import PROGRESS
from argus_dagster.infra.processes import launcher_tags
from argus_dagster.infra.settings import Settings, load_settings
from argus_dagster.infra.sqlite import sync_lightly
from argus_dagster.infra.storage import Storage

QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}

INSTANCE_YAML = """\
# The Dagster instance of one evaluation (argus evaluate, argus demo, argus ui).
# Dagster's anonymous usage statistics: set enabled to true to send them.
telemetry:
  enabled: false
# Runs' event logs keep log lines of INFO and above (every Dagster event is kept whatever its level):
# the IO manager's DEBUG lines repeat each materialization's path. DEBUG keeps them too.
python_logs:
  python_log_level: INFO
# How many runs the daemon executes at once (the runs the UI, the sensors and the schedules launch),
# and how often it looks for queued runs to launch (Dagster's default: every 5 s, a wait each run pays).
run_queue:
  max_concurrent_runs: 4
  dequeue_interval_seconds: 1
"""


def local_instance(settings: Settings | None = None) -> dg.DagsterInstance:
    """The Dagster instance of an evaluation (default: this process's, see ``load_settings``): the
    one ``DAGSTER_HOME`` names, pointed at the evaluation's ``dagster_home``, with Dagster's storage
    as its ``dagster.yaml`` says (default: SQLite files there)."""
    settings = settings or load_settings()
    home = settings.dagster_home
    home.mkdir(parents=True, exist_ok=True)
    ensure_instance_yaml(home)
    sync_lightly(home)  # its SQLite files without a disk sync per event (argus_dagster.infra.sqlite)
    os.environ["DAGSTER_HOME"] = str(home)  # Dagster's own variable: the instance DagsterInstance.get() opens
    return dg.DagsterInstance.get()


def ensure_instance_yaml(dagster_home: Path) -> Path:
    """The instance's own ``dagster.yaml`` (:data:`INSTANCE_YAML`), written where there is none."""
    config = Path(dagster_home) / "dagster.yaml"
    if not config.is_file():
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(INSTANCE_YAML)
    return config


PROTOCOLS = ("videoargus", "firm", "both", "vefx")


class Plan:
    """What Dagster's automation conditions requested, as argus evaluate executes it: by asset key,
    the partitions to materialize (``None`` for the unpartitioned leaderboard)."""

    def __init__(self, requested: dict[str, set], why: dict | None = None, waiting: str = "",
                 inputs_of: dict | None = None):
        self.requested = requested
        self.why = why or {}  # (asset, partition) -> the conditions that requested it, in words
        self.inputs_of = inputs_of or {}  # a reason about inputs -> its (task, input_id)s
        self.waiting = waiting  # the retries the automation sensor holds back now (retry_wait_text)

    def reasons(self, selection: list[str], key) -> str:
        """Why the first asset of ``selection`` (the most upstream) was requested for ``key``, and the
        work any of them left to retry."""
        first = next((self.why[(a, key)] for a in selection if (a, key) in self.why), [])
        retried = [w for a in selection for w in self.why.get((a, key), []) if w.endswith(" retried")]
        return "; ".join(dict.fromkeys(first + retried))

    def partitions(self, asset: str) -> set:
        return self.requested.get(asset, set())


def plan(instance: dg.DagsterInstance, defs: dg.Definitions, tasks: list[str], partitions: set[tuple[str, str]],
         force: bool = False, done: set = frozenset()) -> Plan:
    """What to materialize for ``tasks`` and the ``(task, model)`` partitions: Dagster's answer, from
    the automation conditions on the assets (:mod:`assets.automation`) evaluated on the instance's
    records (the automation sensor asks the same conditions under the daemon; they read states, so
    no cursor is kept); every partition with ``force``. What this command materialized already
    (``done``: ``(asset, partition)``) is not asked again: work its run left to retry waits for the
    next command.

    A person asking now retries at once: the conditions are asked as of the end of the last back-off
    the automation sensor is holding (:func:`~assets.automation.retries_waiting`), and the plan says
    what the sensor would have held back (``Plan.waiting``)."""
    from argus_dagster.definitions import AUTOMATED_ASSETS, CANDIDATE_ASSETS, TASK_ASSETS, retries_waiting

    keys = {str(dg.MultiPartitionKey({"task": t, "model": m})) for t, m in partitions}
    if force:
        requested = {a.key.to_user_string(): set(tasks) for a in TASK_ASSETS}
        requested.update({a.key.to_user_string(): set(keys) for a in CANDIDATE_ASSETS})
        requested["leaderboard"] = {None}
        return Plan(requested, {(a, k): ["forced (--force)"] for a, keys in requested.items() for k in keys})
    now = time.time()
    waiting = {(a, p): due for (a, p), due in retries_waiting(instance, now).items()
               if (a, p) not in done and (p in tasks or p in keys)}
    at = max([now, *(due + 1 for due in waiting.values())])  # a second on: the time given keeps microseconds
    result = dg.evaluate_automation_conditions(
        defs=defs, instance=instance, asset_selection=dg.AssetSelection.assets(*[a.key for a in AUTOMATED_ASSETS]),
        evaluation_time=datetime.fromtimestamp(at, timezone.utc))
    requested = {}
    inputs_of: dict[str, set] = {}
    why = _why(result, instance, defs, inputs_of)
    for a in AUTOMATED_ASSETS:
        name = a.key.to_user_string()
        got = {str(p) if p is not None else None for p in result.get_requested_partitions(a.key)}
        got = {p for p in got if (name, p) not in done}
        wanted = got & (set(tasks) if a in TASK_ASSETS else keys if a in CANDIDATE_ASSETS else {None})
        if wanted:
            requested[name] = wanted
    return Plan(requested, why, retry_wait_text(waiting), inputs_of)


RETRIED = {"rubrics": "rubrics the generator failed to make", "criterion_evidence": "failed tool steps",
           "criterion_scores": "unanswered judgments"}


def retry_wait_text(waiting: dict[tuple[str, str | None], float]) -> str:
    """What the automation sensor holds back (``{(asset, partition): when it may be retried}``), in
    words: "N partitions wait to retry (what failed), next at HH:MM; argus evaluate retries them now";
    empty when nothing waits."""
    if not waiting:
        return ""
    n = len({p for _, p in waiting})
    what = ", ".join(RETRIED[a] for a in RETRIED if any(asset == a for asset, _ in waiting))
    when = time.strftime("%H:%M", time.localtime(min(waiting.values())))
    return (f"{n} partition{'s' if n != 1 else ''} wait{'s' if n == 1 else ''} to retry ({what}), next at {when}; "
            "argus evaluate retries them now")


def _keys_of(subset) -> set:
    return set(subset.expensively_compute_partition_keys()) if subset.is_partitioned else (
        {None} if subset.get_internal_bool_value() else set())


def _input_reasons(instance: dg.DagsterInstance, defs: dg.Definitions, task: str) -> list[tuple[str, str]]:
    """The inputs of ``task`` whose manifest row moved since ``input_instances`` stored them, in words
    (:func:`~.history.input_changes`); empty when that cannot be said."""
    from argus_dagster.method.bench import read_task_at
    from argus_dagster.definitions import latest_record, stored_table
    from argus_dagster.client.history import input_changes

    storage = defs.resources["storage"].storage()
    stored = stored_table(latest_record(instance, "input_instances", task), storage)
    try:
        now = read_task_at(defs.resources["bench"].bench_path(), task, storage)
    except Exception:  # the bench unreadable now: the run that reads it says why, on its rows
        return []
    return input_changes(task, stored.to_dicts() if stored is not None else None, now)


def _why(result, instance: dg.DagsterInstance, defs: dg.Definitions,
         inputs_of: dict[str, set] | None = None) -> dict[tuple[str, str | None], list[str]]:
    """Per requested (asset, partition), which of its condition's parts were true, in words: new
    (missing), new code, the inputs that moved, an input requested in the same run, the work its
    last run left to retry."""
    from argus_dagster.definitions import changed_inputs, latest_records
    from argus_dagster.client.history import Labels, change_text

    graph, records, labels = defs.resolve_asset_graph(), latest_records(instance), Labels(instance)
    out: dict[tuple[str, str | None], list[str]] = {}

    def add(asset: str, keys: set, text: str) -> None:
        for k in keys:
            out.setdefault((asset, str(k) if k is not None else None), []).append(text)

    def walk(r, node, requested: set) -> None:
        asset = r.key.to_user_string()
        name, label = node.condition.name, node.condition.get_label()
        keys = _keys_of(node.true_subset) & requested
        if keys and name == "missing":
            add(asset, keys, "new")
        elif keys and name == "new_code":
            add(asset, keys, "new code")
        elif keys and name == "inputs_changed":
            pdef = graph.get(r.key).partitions_def
            moved = changed_inputs(graph, r.key, pdef, records)
            mine = records.latest(r.key, partitioned=pdef is not None)
            for k in keys:
                p = str(k) if k is not None else None
                for dep in moved.get(p, []):
                    if dep == "bench_files" and p is not None and "|" not in p and inputs_of is not None:
                        said = _input_reasons(instance, defs, p)
                        for text, input_id in said:
                            add(asset, {k}, text)
                            inputs_of.setdefault(text, set()).add((p, input_id))
                        if said:
                            continue
                    source = graph.get(dg.AssetKey(dep))
                    latest = records.latest(dg.AssetKey(dep), observed=source.is_observable and not source.is_materializable,
                                            partitioned=source.partitions_def is not None).get(None)
                    add(asset, {k}, change_text(dep, p, mine.get(p), latest, labels))
        elif keys and label == "an input will be requested":
            add(asset, keys, "an input runs first")
        elif keys and name == "retryable_work_left":
            for k in keys:
                add(asset, {k}, _retry_text(instance, asset, k))
        if label in ("any_deps_missing", "any_deps_in_progress", "an input will be requested"):
            return
        for child in node.child_results:
            walk(r, child, requested)

    for r in result.results:
        walk(r, r, _keys_of(r.true_subset))
    return out


def _retry_text(instance: dg.DagsterInstance, asset: str, key) -> str:
    from argus_dagster.definitions import RETRY_METADATA, latest_record

    record = latest_record(instance, asset, str(key) if key is not None else None)
    md = record.asset_materialization.metadata if record else {}
    n = sum(int(md[m].value or 0) for m in RETRY_METADATA.get(asset, ()) if m in md)
    return f"{n} {RETRIED.get(asset, 'failures')} retried"


def _feeds_automated(defs: dg.Definitions, assets: set[str]) -> bool:
    """Whether any of ``assets`` is read by an asset the automation conditions keep up to date (only
    then can its new materializations make the conditions request more)."""
    from argus_dagster.definitions import AUTOMATED_ASSETS

    graph = defs.resolve_asset_graph()
    automated = {k for a in AUTOMATED_ASSETS for k in a.keys}
    return any(graph.get(dg.AssetKey(a)).child_keys & automated for a in assets)


def _stretches(items: list[str], order: list[str]) -> list[list[str]]:
    """``items`` in ``order``, cut where one is skipped: each stretch is a range of partitions."""
    out: list[list[str]] = []
    for x in sorted(items, key=order.index):
        if out and order.index(x) == order.index(out[-1][-1]) + 1:
            out[-1].append(x)
        else:
            out.append([x])
    return out


def _ranges(by_partition: dict[tuple[str, str], tuple], model_order: list[str]) -> list[tuple[str, list[str], list]]:
    """Runs of ranges over ``(task, model)`` partitions with the same assets to materialize: per task
    over its models, or per model over its tasks, whichever takes fewer runs (a range holds one
    dimension fixed)."""
    from argus_dagster.method.inputs import ALL_TASKS

    def grouped(by_task: bool) -> list[tuple[str, list[str], list]]:
        groups: dict[tuple, list[str]] = {}
        for (task, model), chosen in by_partition.items():
            groups.setdefault((task if by_task else model, chosen), []).append(model if by_task else task)
        out = []
        for (fixed, chosen), free in sorted(groups.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            order = model_order if by_task else list(ALL_TASKS)
            for stretch in _stretches(free, order):
                pairs = [(fixed, x) if by_task else (x, fixed) for x in stretch]
                out.append(("partition", list(chosen),
                            [str(dg.MultiPartitionKey({"task": t, "model": m})) for t, m in pairs]))
        return out

    per_task, per_model = grouped(True), grouped(False)
    return per_model if len(per_model) < len(per_task) else per_task


def _runs(plan: Plan, model_order: list[str]) -> list[tuple[str, list[str], list]]:
    """The runs that execute ``plan``: ``(kind, selection, partition keys)``, each a range of
    partitions with the same assets to materialize (the assets' backfill policy takes a range in one
    run): the tasks' inputs and rubrics first, then the task x model partitions (:func:`_ranges`),
    then the leaderboard."""
    from argus_dagster.definitions import CANDIDATE_ASSETS, TASK_ASSETS, task_model_partitions

    from argus_dagster.method.inputs import ALL_TASKS

    runs = []
    by_selection: dict[tuple, list[str]] = {}
    for task in ALL_TASKS:
        chosen = tuple(a.key.to_user_string() for a in TASK_ASSETS if task in plan.partitions(a.key.to_user_string()))
        if chosen:
            by_selection.setdefault(chosen, []).append(task)
    for chosen, tasks in sorted(by_selection.items()):
        runs += [("task", list(chosen), stretch) for stretch in _stretches(tasks, list(ALL_TASKS))]
    by_partition: dict[tuple[str, str], tuple] = {}
    keys = set().union(*(plan.partitions(a.key.to_user_string()) for a in CANDIDATE_ASSETS))
    for key in keys:
        dims = task_model_partitions.get_partition_key_from_str(key).keys_by_dimension
        by_partition[(dims["task"], dims["model"])] = tuple(
            a.key.to_user_string() for a in CANDIDATE_ASSETS if key in plan.partitions(a.key.to_user_string()))
    runs += _ranges(by_partition, model_order)
    if plan.partitions("leaderboard"):
        runs.append(("leaderboard", ["leaderboard"], []))
    return runs


def _execute(instance: dg.DagsterInstance, resources: dict, selection: list[str], keys: list,
             tags: dict | None = None) -> dg.ExecuteInProcessResult:
    """One of Dagster's in-process runs of ``selection`` (asset names) and their partitioned checks,
    over the partitions ``keys`` (one, or the first and last of a range), on the evaluation's instance."""
    from argus_dagster.definitions import ALL_ASSETS, ALL_CHECKS, SOURCES

    chosen = [a for a in ALL_ASSETS if {k.to_user_string() for k in a.keys} & set(selection)]
    names = {k for a in chosen for k in a.keys}
    checks = [c for c in ALL_CHECKS if c.partitions_def is not None and keys
              and all(k.asset_key in names for k in c.check_keys)]
    run_tags = {**launcher_tags(), **(tags or {})}
    kw = {}
    if len(keys) == 1:
        kw["partition_key"] = keys[0]
    elif keys:
        from argus_dagster.definitions import RANGE_END_TAG, RANGE_START_TAG

        run_tags.update({RANGE_START_TAG: str(keys[0]), RANGE_END_TAG: str(keys[-1])})
    return dg.materialize(ALL_ASSETS + SOURCES + ALL_CHECKS, selection=chosen + checks, instance=instance,
                          resources=resources, run_config=QUIET, tags=run_tags, raise_on_error=False, **kw)


def _frozen_rubrics(result: dg.ExecuteInProcessResult) -> dict[str, tuple[int, list[str]]]:
    """Per task, how many rubrics a run generated and the folders it froze them in (later runs load them
    from there)."""
    out = {}
    for event in result.get_asset_materialization_events():
        m = event.materialization
        if m.asset_key.to_user_string() == "rubrics" and "n_generated" in m.metadata:
            folders = m.metadata["frozen_in"].value if "frozen_in" in m.metadata else []
            out[str(m.partition)] = (int(m.metadata["n_generated"].value or 0), list(folders or []))
    return out


def _retry_left(result: dg.ExecuteInProcessResult) -> dict[str, int]:
    """Per partition, the failed tool steps and unanswered judgments a candidate run left to retry."""
    from argus_dagster.definitions import RETRY_METADATA

    out: dict[str, int] = {}
    for event in result.get_asset_materialization_events():
        m = event.materialization
        for name in RETRY_METADATA.get(m.asset_key.to_user_string(), ()):
            if name in m.metadata:
                out[str(m.partition)] = out.get(str(m.partition), 0) + int(m.metadata[name].value or 0)
    return out


class _Evaluation:
    """What one command works on: the evaluation's settings, instance and definitions, its selected
    tasks and ``(task, model)`` partitions, and each partition's number of videos."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def evaluation_storage(settings: Settings) -> Storage:
    """The storage of ``settings``' evaluation: its storage resource's (the S3 client, when the
    environment keeps files on S3), through which the command line lists and reads what runs stored."""
    from argus_dagster.definitions import storage_for

    return storage_for(settings=settings)[1].storage()


def stored_video_scores(settings: Settings) -> pl.DataFrame | None:
    """Every stored ``video_scores`` partition of ``settings``' evaluation as one table (None when there
    is none), read where its environment keeps the tables (a folder, or S3) without opening its instance."""
    from argus_dagster.definitions import storage_for
    from argus_dagster.infra.tables import stored_table

    bench, storage, _ = storage_for(settings=settings)
    return stored_table(bench.storage_dir, "video_scores", storage.storage())


def _prepare(tasks, models, progress, instance, settings, defs: dg.Definitions | None = None) -> _Evaluation:
    """Find the models, make them ``candidate_models`` partitions, and observe the sources: what
    changed is recorded with its new data version (:mod:`assets.sources`)."""
    from argus_dagster.definitions import build_definitions, changed_observations, report, source_versions

    from argus_dagster.method.candidate_store import open_store, scan

    settings = settings or load_settings()
    instance = instance or local_instance(settings)
    defs = defs or build_definitions(settings)
    resources = defs.resources
    storage = resources["storage"].storage()
    discovery = discover(settings.candidates_dir, settings.bench_dir, storage)
    for problem in discovery.problems:
        progress(f"left out: {problem}")
    found = discovery.models
    if models:
        unknown = sorted(set(models) - set(found))
        if unknown:
            raise SystemExit(unknown_models(unknown, found, settings.candidates_dir))
        found = {m: t for m, t in found.items() if m in models}
    task_list = sorted({t for ts in found.values() for t in ts} if not tasks else set(tasks))
    if not found:
        raise SystemExit(f"no candidate videos under {settings.candidates_dir} (expected <TASK>/<model>/<id>.mp4)")
    for line in ask_dead_run_sensor(instance):  # as the daemon's tick of it would (argus ui)
        progress(line)
    notice = pool_notice(instance)
    if notice:
        progress(notice)
    instance.add_dynamic_partitions("candidate_models", sorted(found))
    partitions = {(t, m) for m, ts in found.items() for t in ts if t in task_list}
    store = scan(open_store(str(settings.candidates_dir), storage), None)
    report(instance, changed_observations(instance, source_versions(resources, task_list, partitions, store.known)))
    return _Evaluation(settings=settings, instance=instance, defs=defs, storage=storage, tasks=task_list,
                       partitions=partitions, known=store.known,
                       n_videos={(t, m): _count_videos(settings.candidates_dir, t, m, storage) for t, m in partitions})


def plan_now(tasks: list[str] | None = None, models: list[str] | None = None, progress: Callable[[str], None] = print,
             instance: dg.DagsterInstance | None = None, settings: Settings | None = None) -> dict[str, list]:
    """What ``argus evaluate`` would run first, now (``argus evaluate --plan``): the sources observed,
    the automation conditions asked; nothing runs.
    ``{asset: [partition keys]}``; what those runs update is asked for after them."""
    ev = _prepare(tasks, models, progress, instance, settings)
    the_plan = plan(ev.instance, ev.defs, ev.tasks, ev.partitions)
    if the_plan.waiting:
        progress(the_plan.waiting)
    _say_reasons(the_plan, ev.n_videos, progress, known=ev.known)
    return {a: sorted(p for p in parts if p is not None) for a, parts in the_plan.requested.items()}


def _say_reasons(the_plan: Plan, n_videos: dict, progress: Callable[[str], None], prefix: str = "",
                 known: dict | None = None) -> None:
    """Why the plan runs what it runs, each reason with what it touches (:func:`~.history.reason_lines`);
    ``known``: the candidate store's scan, for the videos of each input a reason names."""
    from argus_dagster.method.candidate_store import partition_hashes, video_hashes
    from argus_dagster.client.history import reason_lines

    per_input: dict[tuple[str, str], int] = {}
    for task, input_id in {x for ids in the_plan.inputs_of.values() for x in ids}:
        per_input[(task, input_id)] = sum(1 for t, m in n_videos if t == task
                                          for i, _ in video_hashes(partition_hashes(known or {}, task, m), [input_id])
                                          if i == input_id)
    lines = reason_lines(the_plan.why, the_plan.requested, n_videos, the_plan.inputs_of, per_input)
    if lines:
        progress(f"{prefix}why (what changed: what it runs again):")
        for line in lines:
            progress(f"{prefix}  {line}")


def _say_up_to_date(runs, task_list, partitions, n_videos, progress, elapsed) -> None:
    """A line for each selected task and partition the first runs leave alone."""
    ran_tasks = {t for kind, _, keys in runs if kind == "task" for t in keys}
    ran_keys = {k for kind, _, keys in runs if kind == "partition" for k in keys}
    for task in task_list:
        if task not in ran_tasks:
            progress(f"{elapsed()} {task}: inputs and rubrics up to date")
    for task, model in sorted(partitions):
        if task not in ran_tasks and str(dg.MultiPartitionKey({"task": task, "model": model})) not in ran_keys:
            PROGRESS.expect(-n_videos.get((task, model), 0))
            progress(f"{elapsed()} {task} x {model}: up to date")


# The progress line's phase while a run of each kind goes: a task's inputs and rubrics, a range of
# partitions (evidence, then judging as their first judgments come in), the leaderboard and overview.
RUN_PHASE = {"task": "rubrics", "partition": "evidence", "leaderboard": "reports"}


def _run_and_say(kind: str, selection: list[str], keys: list, instance, resources, progress, elapsed,
                 the_plan: Plan | None = None, tags: dict | None = None) -> None:
    """Execute one run of the plan and say what it did (and why, as the conditions said); a failed run
    stops the command. ``tags``: the command's (:func:`command_tags`); the run's reasons are added."""
    from argus_dagster.definitions import task_model_partitions
    from argus_dagster.client.history import MAX_TAG, REASON_TAG

    the_plan = the_plan or Plan({})
    PROGRESS.phase(RUN_PHASE.get(kind, "reports"))  # the progress line's phase, from this run on
    t0 = time.perf_counter()
    reason = "; ".join(dict.fromkeys(w for k in (keys or [None]) for a in selection for w in the_plan.why.get((a, k), [])))
    run_tags = {**(tags or {}), **({JUDGE_TAG: "1"} if kind == "partition" else {}),
                **({REASON_TAG: reason[:MAX_TAG]} if reason else {})}
    result = _execute(instance, resources, selection, keys, run_tags or None)
    if not result.success:
        raise SystemExit(f"run {result.run_id} failed; see the Dagster UI (argus ui) for its logs; "
                         "argus evaluate again resumes from what was stored")
    for line in _failed_checks(result):
        progress(line)
    seconds = f"{time.perf_counter() - t0:.1f}s" + (f" for {len(keys)} partitions" if len(keys) > 1 else "")

    def took(key) -> str:
        why = the_plan.reasons(selection, key)
        return f"({seconds}" + (f"; {why}" if why and why != "new" else "") + ")"

    if kind == "task":
        frozen = _frozen_rubrics(result)
        for task in keys:
            n, folders = frozen.get(task, (0, []))
            progress(f"{elapsed()} {task}: inputs and rubrics {took(task)}"
                     + (f"; {n} new rubric{'s' if n != 1 else ''} frozen in {', '.join(folders)}" if n else ""))
    elif kind == "partition":
        retry = _retry_left(result)
        for key in keys:
            dims = task_model_partitions.get_partition_key_from_str(key).keys_by_dimension
            left = retry.get(key, 0)
            progress(f"{elapsed()} {dims['task']} x {dims['model']}: scored {took(key)}"
                     + (f"; {left} failed tool steps or unanswered judgments, retried on the next run" if left else ""))
    else:
        progress(f"{elapsed()} leaderboard {took(None)}")


def run_all(tasks: list[str] | None = None, models: list[str] | None = None,
            progress: Callable[[str], None] = print, instance: dg.DagsterInstance | None = None,
            force: bool = False, protocol: str = "videoargus",
            settings: Settings | None = None, defs: dg.Definitions | None = None) -> pl.DataFrame | None:
    """Bring one evaluation (``settings``, default this process's) up to date for the selected tasks
    and models, as a client of its Dagster instance; returns the leaderboard (None with
    ``protocol="firm"``, which makes none).

    1. The models found become ``candidate_models`` partitions, and the sources (bench files, frozen
       rubrics, candidate videos, the evaluator) are observed: what changed is recorded with a new
       data version (:mod:`assets.sources`).
    2. Dagster says what to run: the automation conditions on the assets (:mod:`assets.automation`:
       missing, new code, an updated dependency, work left to retry), evaluated on the instance's
       records, as the automation sensor evaluates them under the daemon.
    3. Dagster runs it: in-process runs on the instance, each a range of partitions (the tasks'
       inputs and rubrics, then per task a range of its models, then the leaderboard), with the
       evaluation's resources (one VLM client and frame pool in this process for every run).

    ``force=True`` (``--force``) materializes every selected partition again (the content cache
    answers every tool step and judgment). ``protocol``: ``videoargus`` (the default), ``firm``
    (FIRM-Video's ``firm_checklists``, ``firm_verdicts`` and ``firm_scores`` only), ``both``
    (the FIRM runs follow each partition's VideoArgus run; they are never skipped as up to date, and
    the content cache answers what they computed before) or ``vefx`` (VEFX-Bench's ``vefx_scores``
    of the TV2V and TSV2V partitions and ``vefx_leaderboard`` only; the content cache answers what they
    computed before). ``defs``: the evaluation's definitions when the caller built them already.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol {protocol!r}: expected one of {PROTOCOLS}")
    ev = _prepare(tasks, models, progress, instance, settings, defs)
    settings, instance, defs, resources = ev.settings, ev.instance, ev.defs, ev.defs.resources
    task_list, partitions, n_videos = ev.tasks, ev.partitions, ev.n_videos
    PROGRESS.reset(sum(n_videos.values()))

    t_start = time.perf_counter()

    def elapsed() -> str:
        return f"[{time.perf_counter() - t_start:6.1f}s]"

    board = None
    if protocol in ("videoargus", "both"):
        model_order = list(instance.get_dynamic_partitions("candidate_models"))
        done: set[tuple[str, str | None]] = set()  # (asset, partition) materialized by this command
        leaderboard_due = False
        ran_any = False
        tags = command_tags(resources)
        # As the daemon's ticks do: ask, run what is requested, ask again (a task's new rubrics make
        # its candidate partitions' inputs updated: the next question requests them), until nothing is.
        while True:
            the_plan = plan(instance, defs, task_list, partitions, force, done)
            if the_plan.waiting and not ran_any:
                progress(f"{elapsed()} {the_plan.waiting}")
            force = False  # once
            runs = _runs(the_plan, model_order)
            if any(kind == "leaderboard" for kind, _, _ in runs) and len(runs) > 1:
                leaderboard_due = True  # after the partitions it follows
                runs = [r for r in runs if r[0] != "leaderboard"]
            if not runs:
                break
            if not ran_any:
                _say_up_to_date(runs, task_list, partitions, n_videos, progress, elapsed)
                _say_reasons(the_plan, n_videos, progress, f"{elapsed()} ", ev.known)
            ran_any = True
            for kind, selection, keys in runs:
                _run_and_say(kind, selection, keys, instance, resources, progress, elapsed, the_plan, tags)
                done |= {(a, k) for a in selection for k in (keys or [None])}
                leaderboard_due &= kind != "leaderboard"
            if not _feeds_automated(defs, {a for _, selection, _ in runs for a in selection}):
                break  # what ran updates no automated asset: asking again would request nothing new
        if leaderboard_due or load_stored(instance, "leaderboard", storage=ev.storage) is None:
            _run_and_say("leaderboard", ["leaderboard"], [], instance, resources, progress, elapsed, tags=tags)
        board = load_stored(instance, "leaderboard", storage=ev.storage)
        if not ran_any:
            _say_up_to_date([], task_list, partitions, n_videos, progress, elapsed)
            progress(f"{elapsed()} every partition up to date (--force re-materializes)")
    if protocol == "vefx":
        _vefx_all(instance, resources, task_list, partitions, progress, elapsed)
    if protocol in ("firm", "both"):
        for task in task_list:
            t0 = time.perf_counter()
            result = _firm_run(instance, resources, task, None, with_inputs=protocol == "firm")
            if not result.success:
                raise SystemExit(f"run {result.run_id} failed; see the Dagster UI (argus ui) for its logs")
            progress(f"{elapsed()} {task}: FIRM-Video checklists ({time.perf_counter() - t0:.1f}s)")
            for model in sorted(m for t, m in partitions if t == task):
                t0 = time.perf_counter()
                result = _firm_run(instance, resources, task, model, with_inputs=protocol == "firm",
                                   tags={**launcher_tags(), JUDGE_TAG: "1"})
                if not result.success:
                    raise SystemExit(f"run {result.run_id} failed; see the Dagster UI (argus ui) for its logs")
                for line in _failed_checks(result):
                    progress(line)
                progress(f"{elapsed()} {task} x {model}: FIRM-Video scores ({time.perf_counter() - t0:.1f}s)")
        if protocol == "firm":
            progress(f"{elapsed()} FIRM-Video done")
    human = sorted(resources["bench"].human_files(ev.storage))
    if human:  # people's ratings are there: say how well the scores agree with them
        from argus_dagster.protocols.alignment.metrics import ALIGNMENT_COLUMNS, format_alignment

        # Always recomputed (one short run): the ratings themselves may have changed.
        _execute(instance, resources, ["human_alignment"], [])
        table = load_stored(instance, "human_alignment", storage=ev.storage)
        progress(f"{elapsed()} human alignment (ratings: {', '.join(f'{t}.csv' for t in human)})")
        for (task,), rows in table.group_by("task", maintain_order=True):
            progress(f"\n{task}\n" + format_alignment(rows.select(ALIGNMENT_COLUMNS)))
    return board


JUDGE_TAG = "argus/judge"  # runs that call the judge (a run queue's tag limit can bound them)


def command_tags(resources: dict) -> dict[str, str]:
    """The tags of every run of one command: its id (its runs are one pass, :mod:`~.history`) and the
    judge it evaluates with."""
    import uuid

    from argus_dagster.client.history import COMMAND_TAG, EVALUATOR_TAG, evaluator_label

    return {COMMAND_TAG: uuid.uuid4().hex[:12],
            EVALUATOR_TAG: evaluator_label(resources["judge"].identity(resources["vlm"]))}


def _vefx_all(instance, resources, task_list, partitions, progress, elapsed) -> None:
    """``--protocol vefx``: per edit task its inputs, then per model its candidates, ``vefx_scores`` and
    their check, then ``vefx_leaderboard``; a task without a source video is said and skipped."""
    from argus_dagster.definitions import VEFX_CANDIDATE_ASSETS, VEFX_CHECKS, vefx_leaderboard
    from argus_dagster.protocols.vefx import EDIT_TASKS

    def run(selection, key=None, judge=False) -> None:
        from argus_dagster.definitions import ALL_ASSETS, GRAPH_CHECKS, SOURCES

        result = dg.materialize(ALL_ASSETS + SOURCES + GRAPH_CHECKS, selection=selection, instance=instance,
                                resources=resources, run_config=QUIET, raise_on_error=False,
                                tags={**launcher_tags(), **({JUDGE_TAG: "1"} if judge else {})},
                                **({"partition_key": key} if key is not None else {}))
        if not result.success:
            raise SystemExit(f"run {result.run_id} failed; see the Dagster UI (argus ui) for its logs")
        for line in _failed_checks(result):
            progress(line)

    from argus_dagster.definitions import candidate_videos, input_instances

    for task in task_list:
        if task not in EDIT_TASKS:
            progress(f"{elapsed()} {task}: skipped, VEFX-Bench's protocol judges edits (TV2V, TSV2V)")
            continue
        run([input_instances], task)
        for model in sorted(m for t, m in partitions if t == task):
            t0 = time.perf_counter()
            run([candidate_videos, *VEFX_CANDIDATE_ASSETS, *VEFX_CHECKS],
                dg.MultiPartitionKey({"task": task, "model": model}), judge=True)
            progress(f"{elapsed()} {task} x {model}: VEFX scores ({time.perf_counter() - t0:.1f}s)")
    run([vefx_leaderboard])
    progress(f"{elapsed()} VEFX leaderboard")


def vefx_board(instance: dg.DagsterInstance | None = None, settings: Settings | None = None) -> pl.DataFrame | None:
    """The last materialized ``vefx_leaderboard`` (per task, model and dimension, 1-4), or None."""
    settings = settings or load_settings()
    return load_stored(instance or local_instance(settings), "vefx_leaderboard", storage=evaluation_storage(settings))


def load_stored(instance: dg.DagsterInstance, asset: str, partition: str | None = None, *,
                storage: Storage) -> pl.DataFrame | None:
    """The table the latest materialization of ``asset`` (``partition``) stored, read through
    ``storage`` from the path its IO manager recorded in the materialization's metadata (as lineage
    and the sensor read it); None when there is none or it cannot be read."""
    from argus_dagster.definitions import latest_record, stored_table

    return stored_table(latest_record(instance, asset, partition), storage)


def _count_videos(candidates: Path | str, task: str, model: str, storage: Storage) -> int:
    if str(candidates).startswith("s3://"):
        from argus_dagster.method.candidate_store import S3CandidateStore

        return sum(1 for e in S3CandidateStore(str(candidates), storage).entries() if e.task == task and e.model == model)
    folder = task_dir(candidates, task)
    return sum(1 for p in (folder / model).iterdir() if p.is_file()) if folder and (folder / model).is_dir() else 0


def row_errors(tasks: list[str] | None = None, models: list[str] | None = None,
               instance: dg.DagsterInstance | None = None,
               settings: Settings | None = None) -> list[tuple[str, str, str]]:
    """The row errors stored for the evaluated bench (the tasks and models given, else all)."""
    settings = settings or load_settings()
    storage = evaluation_storage(settings)
    found = discover(settings.candidates_dir, settings.bench_dir, storage).models
    if models:
        found = {m: t for m, t in found.items() if m in models}
    task_list = sorted(tasks or {t for ts in found.values() for t in ts})
    return _row_errors(instance or local_instance(settings), task_list, found, storage)


def _row_errors(instance: dg.DagsterInstance, tasks: list[str],
                found: dict[str, list[str]], storage: Storage) -> list[tuple[str, str, str]]:
    """``(where, id, error)`` of every row with an error in the evaluated partitions, as stored."""
    out: list[tuple[str, str, str]] = []

    from argus_dagster.definitions import latest_record, stored_table

    def stored(asset: str, key) -> pl.DataFrame | None:
        record = latest_record(instance, asset, str(key))
        if record is None:
            return None
        n_errors = record.asset_materialization.metadata.get("n_errors")
        if n_errors is not None and n_errors.value == 0:  # counted when it was stored: nothing to read
            return None
        return stored_table(record, storage)

    for task in tasks:
        seen = set()
        for asset in ("input_instances", "rubrics"):
            df = stored(asset, task)
            for r in (df.filter(pl.col("error").is_not_null()).iter_rows(named=True) if df is not None else []):
                if r["input_id"] not in seen:  # a bad input is also a rubric error: said once
                    seen.add(r["input_id"])
                    out.append((task, r["input_id"], r["error"]))
        for model in sorted(m for m, ts in found.items() if task in ts):
            df = stored("video_scores", dg.MultiPartitionKey({"task": task, "model": model}))
            for r in (df.filter(pl.col("error").is_not_null()).iter_rows(named=True) if df is not None else []):
                if r["input_id"] not in seen:
                    out.append((f"{task} x {model}", r["input_id"], r["error"]))
    return out


_PREFIX = re.compile(r"^(input invalid: |line \d+: |line \d+ (?=field )|[^\s:]*/[^\s:]*: )+")
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_NUMBERS = re.compile(r"(?<![\w-])\d[\d,.]*")


def error_kind(error: str) -> str:
    """What kind of error ``error`` is, the same for every row of that kind: its text up to the first
    colon or semicolon (after ``field …:``, the next), without the manifest line or file path it opens
    with, quoted names as ``…`` and numbers as ``N`` (``line 7: input 'a' is listed again (first on
    line 1); ...`` is ``input … is listed again (first on line N)``)."""
    text = _NUMBERS.sub("N", _QUOTED.sub("…", _PREFIX.sub("", error.strip())))
    parts = re.split(r"[:;]", text)
    kind = parts[0].strip()
    if kind.endswith("field …") and len(parts) > 1:
        kind += ": " + parts[1].strip()
    return kind[:80] or "error"


def error_summary(errors: list[tuple[str, str, str]], first: int = 3) -> str:
    """How many rows carry an error, of which kind (:func:`error_kind`), and the first few of each kind
    with where they are and their ids; empty when there is none."""
    if not errors:
        return ""
    kinds: dict[str, list[tuple[str, str, str]]] = {}
    for where, iid, error in errors:
        kinds.setdefault(error_kind(error), []).append((where, iid, error))
    lines = [f"\n{len(errors)} row{'s' if len(errors) != 1 else ''} with an error (they are not scored; "
             "the rest are):"]
    for kind, rows in sorted(kinds.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"  {len(rows)} x {kind}")
        for where, iid, error in rows[:first]:
            lines.append(f"      {where} {iid!r}: {_clipped(error, 160)}")
        if len(rows) > first:
            lines.append(f"      ... and {len(rows) - first} more")
    return "\n".join(lines)


def _clipped(text: str, most: int) -> str:
    """``text`` in at most ``most`` characters: a long one keeps its start and its end (an error opens
    with the file's path and ends with the reason, which a deep folder must not push out)."""
    if len(text) <= most:
        return text
    head = most // 3
    return f"{text[:head]} … {text[-(most - head - 3):]}"


def ask_dead_run_sensor(instance: dg.DagsterInstance) -> list[str]:
    """A tick of the ``dead_run_sensor`` (:mod:`assets.sensors`), as the daemon runs it under ``argus
    ui``: runs left started by a process of this machine that is gone are marked failed and give back
    the pool slots they held (:mod:`argus_dagster.infra.processes`); a line for each."""
    from argus_dagster.definitions import dead_run_sensor

    with dg.build_sensor_context(instance=instance) as context:
        result = dead_run_sensor(context)
    message = result.skip_message if isinstance(result, dg.SkipReason) else ""
    return [line for line in (message or "").splitlines() if line.startswith("run ")]


def pool_notice(instance: dg.DagsterInstance, pool: str = "gpu") -> str | None:
    """What a run about to take ``pool`` waits for, when every slot is held by another run."""
    if pool not in instance.event_log_storage.get_concurrency_keys():
        return None
    info = instance.event_log_storage.get_concurrency_info(pool)
    if info.slot_count <= 0 or len(info.claimed_slots) < info.slot_count:
        return None
    holders = sorted({c.run_id[:8] for c in info.claimed_slots})
    return (f"the {pool!r} pool's {info.slot_count} slot(s) are held by run(s) {', '.join(holders)}: "
            "this run's evidence step waits for them")


def _failed_checks(result: dg.ExecuteInProcessResult) -> list[str]:
    """A line for every asset check of ``result`` that did not pass (reported, not fatal)."""
    out = []
    for ev in result.get_asset_check_evaluations():
        if not ev.passed:
            where = f" ({ev.partition})" if ev.partition else ""
            out.append(f"  check {ev.check_name} on {ev.asset_key.to_user_string()}{where} did not pass: "
                       "see its metadata in the UI")
    return out


def current_leaderboard(instance: dg.DagsterInstance | None = None,
                        settings: Settings | None = None) -> pl.DataFrame | None:
    """The last materialized leaderboard, read from storage (no recomputation)."""
    settings = settings or load_settings()
    return load_stored(instance or local_instance(settings), "leaderboard", storage=evaluation_storage(settings))


# ----------------------------------------------------------------------------------------------------
# FIRM-Video and best-of-N (argus evaluate --protocol firm|both, argus export firm, argus best-of-n)
# ----------------------------------------------------------------------------------------------------


def _firm_run(instance: dg.DagsterInstance, resources: dict, task: str, model: str | None = None,
              with_inputs: bool = False, **kw) -> dg.ExecuteInProcessResult:
    """One FIRM-Video run: a task's checklists, or a task x model partition's verdicts and scores (and
    their check). ``with_inputs``: also materialize the input (or candidate) table it reads. ``kw``:
    more of ``dg.materialize``'s arguments (default: quiet console, the CLI's tags)."""
    kw = {"run_config": QUIET, "tags": launcher_tags(), **kw, "instance": instance, "resources": resources}
    from argus_dagster.definitions import (CANDIDATE_ASSETS, FIRM_CANDIDATE_ASSETS, FIRM_CHECKS, FIRM_TASK_ASSETS, TASK_ASSETS,
                              candidate_videos, input_instances)

    if model is None:
        selection = ([input_instances] if with_inputs else []) + FIRM_TASK_ASSETS
        return dg.materialize(TASK_ASSETS + FIRM_TASK_ASSETS, selection=selection, partition_key=task, **kw)
    key = dg.MultiPartitionKey({"task": task, "model": model})
    selection = ([candidate_videos] if with_inputs else []) + FIRM_CANDIDATE_ASSETS + FIRM_CHECKS
    return dg.materialize(TASK_ASSETS + CANDIDATE_ASSETS + FIRM_TASK_ASSETS + FIRM_CANDIDATE_ASSETS + FIRM_CHECKS,
                          selection=selection, partition_key=key, **kw)


def stored_partitions(asset: str, instance: dg.DagsterInstance | None = None, tasks: list[str] | None = None,
                      settings: Settings | None = None) -> dict[str, pl.DataFrame]:
    """Every materialized partition of ``asset`` as stored (of ``tasks`` only, when given), by key."""
    from argus_dagster.definitions import task_model_partitions

    settings = settings or load_settings()
    instance = instance or local_instance(settings)
    storage = evaluation_storage(settings)
    out = {}
    for key in sorted(instance.get_materialized_partitions(dg.AssetKey(asset)) or ()):
        task = task_model_partitions.get_partition_key_from_str(key).keys_by_dimension["task"] if "|" in key else key
        if tasks and task not in tasks:
            continue
        table = load_stored(instance, asset, key, storage=storage)
        if table is not None:
            out[key] = table
    return out


def export_firm(out: str | Path, tasks: list[str] | None = None, instance: dg.DagsterInstance | None = None,
                settings: Settings | None = None, force: bool = False):
    """Write FIRM-Video's training data folder ``out`` (:mod:`argus_dagster.protocols.firm.export`: JSON lines, the
    frames as image files, a dataset card) from the stored ``firm_scores``, ``firm_verdicts`` and
    ``input_instances``; returns its :class:`~argus_dagster.protocols.firm.export.ExportResult`. Reads stored
    tables and the media they name: no model is called. A folder that holds anything but an earlier
    export is refused before anything is read, unless ``force``."""
    from functools import partial

    from argus_dagster.protocols.firm.export import check_out_folder, default_condition_frames, default_video_frames, export_dataset

    check_out_folder(Path(out), force)
    settings = settings or load_settings()
    instance = instance or local_instance(settings)
    scores = stored_partitions("firm_scores", instance, tasks, settings)
    if not scores:
        raise ValueError("no firm_scores stored: run `argus evaluate --protocol firm` (or both) first")
    verdicts: dict[tuple, list[dict]] = {}
    for df in stored_partitions("firm_verdicts", instance, tasks, settings).values():
        for r in df.iter_rows(named=True):
            verdicts.setdefault((r["task"], r["model"], r["input_id"], r.get("sample") or ""), []).append(r)
    inputs = {(r["task"] if "task" in r and r["task"] else key, r["input_id"]): r
              for key, df in stored_partitions("input_instances", instance, tasks, settings).items()
              for r in df.iter_rows(named=True)}
    rows = [r for _, df in sorted(scores.items()) for r in df.iter_rows(named=True)]
    makers = sorted({m for df in stored_partitions("firm_checklists", instance, tasks, settings).values()
                     if "maker" in df.columns for m in df["maker"].drop_nulls().unique().to_list()})
    sources = {"evaluation": f"{settings.evaluation} (bench {settings.bench!r}, profile {settings.profile!r})",
               "bench": str(settings.bench_dir), "candidates": str(settings.candidates_dir),
               "tables": "firm_scores, firm_verdicts, input_instances (as last materialized)",
               "IF checklist planner": "; ".join(makers) or "none recorded",
               "protocol": "FIRM-Video (check-before-score), argus_dagster/protocols/firm/checklist.py"}
    storage = evaluation_storage(settings)  # media on S3 are read through the evaluation's storage
    return export_dataset(out, rows, verdicts, inputs, sources=sources,
                          video_frames=partial(default_video_frames, storage=storage),
                          condition_frames=partial(default_condition_frames, storage=storage), force=force)


def best_of_n_report(by: str | dict[str, float], tasks: list[str] | None = None,
                     instance: dg.DagsterInstance | None = None,
                     settings: Settings | None = None) -> tuple[pl.DataFrame, dict[str, str]]:
    """Best-of-N picks from the stored ``video_scores`` and ``firm_scores`` (the ``best_of_n`` asset's
    computation), with the comparison against the bench's ``human/<TASK>.csv`` where it exists."""
    from argus_dagster.definitions import best_of_n_tables, storage_for

    settings = settings or load_settings()
    instance = instance or local_instance(settings)
    bench, storage, _ = storage_for(settings=settings)
    return best_of_n_tables(stored_partitions("video_scores", instance, tasks, settings),
                            stored_partitions("firm_scores", instance, tasks, settings), by, tasks=tasks,
                            human=bench.human_files(storage.storage()))


def firm_summary(tasks: list[str] | None = None, instance: dg.DagsterInstance | None = None,
                 settings: Settings | None = None) -> pl.DataFrame:
    """Per task and model: videos, mean IF/WC/PQ ratings (1-5) and how many of each are unscored."""
    parts = [df for df in stored_partitions("firm_scores", instance, tasks, settings).values() if df.height]
    if not parts:
        return pl.DataFrame()
    df = pl.concat(parts, how="diagonal_relaxed")
    return (df.group_by("task", "model").agg(
        pl.len().alias("n_videos"),
        *[pl.col(f"{d}_rating").mean().round(2).alias(f"mean_{d}") for d in ("if", "wc", "pq")],
        *[pl.col(f"{d}_rating").is_null().sum().alias(f"{d}_unscored") for d in ("if", "wc", "pq")])
        .sort("task", "model"))


def stored_export_table(what: str, tasks: list[str] | None = None, instance: dg.DagsterInstance | None = None,
                        settings: Settings | None = None) -> pl.DataFrame | None:
    """The stored table ``argus export <what>`` writes (``leaderboard``, ``videos``, ``criteria``, ``costs``; see
    :mod:`argus_dagster.outputs.export`), of ``tasks`` only when given; None when nothing is stored."""
    from argus_dagster.outputs.export import TABLES, combine

    if what not in TABLES:
        raise ValueError(f"{what!r}: expected one of {', '.join(TABLES)}")
    settings = settings or load_settings()
    instance = instance or local_instance(settings)
    if TABLES[what] == "leaderboard":
        return combine([current_leaderboard(instance, settings)], tasks)
    if what == "costs":  # the ledger: every stage's stored table, not the video scores alone
        from argus_dagster.method.leaderboard import LEDGER_STAGES, cost_table

        stages = {stage: combine(list(stored_partitions(asset, instance, tasks, settings).values()), tasks)
                  for stage, asset in LEDGER_STAGES.items()}
        costs = cost_table(stages=stages)
        return costs if costs.height else None
    return combine(list(stored_partitions(TABLES[what], instance, tasks, settings).values()), tasks)
