"""What the client asks Dagster to run, and how it launches it: the plan (Dagster's answer, from the
automation conditions on the assets) and the runs that execute it, each a typed :class:`RunSpec`.

Two things here are Dagster features the client does itself, and why:

- **Ranges of partitions.** The assets' ``BackfillPolicy.single_run`` takes a range of partitions in
  one run; a backfill would cut the requested partitions into those ranges. ``argus evaluate`` cuts
  them here (:func:`runs_of`: per task over neighbouring models, or per model over tasks) because it
  executes the runs in its own process, where Dagster's backfill daemon does not run.
- **In-process runs.** Each spec is executed by ``dg.materialize`` in this process (:func:`launch`),
  not submitted to the run queue: the runs share this process's VLM client, frame pool and content
  cache, and there is no daemon or run worker to start for one command (the two paths timed side by
  side: docs/performance.md, "The CLI and Dagster-launched runs").

FIRM-Video's and VEFX-Bench's assets go through the same loop (:data:`PROTOCOL_SELECTION`): the
command line's definitions give them the conditions the VideoArgus assets carry
(``build_definitions(protocols=...)``), Dagster answers which of their partitions are missing or
out of date, and the same runs execute them. The served definitions (the UI, the daemon) give them
none: there a protocol runs when a person asks for it.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
import uuid
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, cast

import dagster as dg

from argus_dagster.client.instance import ask_dead_run_sensor
from argus_dagster.client.reasons import requested_reasons
from argus_dagster.definitions import ROLES, materialize_selection
from argus_dagster.infra.processes import launcher_tags
from argus_dagster.method.inputs import ALL_TASKS
from argus_dagster.outputs.history_words import retry_wait_text, split_partition
from argus_dagster.records.automation import RETRY_METADATA, asked_by_a_pass, planned_in_flight, retries_waiting
from argus_dagster.records.history import MAX_TAG, REASON_TAG

QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
# The assets a run materializes per task, per task x model, or once (unpartitioned), whichever loop asks.
TASK_LEVEL = ROLES.task + ROLES.firm_task
CANDIDATE_LEVEL = ROLES.candidate + ROLES.firm_candidate + ROLES.vefx_candidate
# What each loop asks Dagster about: VideoArgus's assets, or a protocol's with the tables it reads.
PROTOCOL_SELECTION = {"videoargus": tuple(a for a in ROLES.automated if a not in ROLES.site),
                      "firm": ("input_instances", "candidate_videos") + ROLES.firm_task + ROLES.firm_candidate,
                      "vefx": ("input_instances", "candidate_videos") + ROLES.vefx_candidate + ROLES.vefx_board}
JUDGE_TAG = "argus/judge"  # runs that call the judge (a run queue's tag limit can bound them)


@dataclass(frozen=True)
class Plan:
    """What Dagster's automation conditions requested, as argus evaluate executes it: by asset name,
    the partitions to materialize (``None`` for the unpartitioned leaderboard)."""

    requested: dict[str, set]
    why: dict = field(default_factory=dict)  # (asset, partition) -> the conditions that requested it, in words
    waiting: str = ""  # the retries the automation sensor holds back now (retry_wait_text)
    inputs_of: dict = field(default_factory=dict)  # a reason about inputs -> its (task, input_id)s

    def reasons(self, selection: list[str], key) -> str:
        """Why the first asset of ``selection`` (the most upstream) was requested for ``key``, and the
        work any of them left to retry."""
        first: list[str] = next((self.why[(a, key)] for a in selection if (a, key) in self.why), [])
        retried = [w for a in selection for w in self.why.get((a, key), []) if w.endswith(" retried")]
        return "; ".join(dict.fromkeys(first + retried))

    def partitions(self, asset: str) -> set:
        return self.requested.get(asset, set())


@dataclass(frozen=True)
class RunSpec:
    """One run the client launches: the assets it materializes (by name; their partitioned checks ride
    along), its partitions (one key, or a range's keys in order; none for an unpartitioned asset), its
    tags and why it runs, in words. ``kind`` says what it is to a person: ``task`` (inputs and
    rubrics), ``partition`` (task x model), ``leaderboard``, or a protocol's run (``firm``, ``vefx``,
    ``alignment``). ``says``: the line a protocol's run prints when it is done (``{seconds}``: how
    long it took); a spec without a selection only says it."""

    kind: str
    selection: list[str]
    keys: list[str] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)
    reason: str = ""
    says: str = ""
    ops: dict[str, dict] = field(default_factory=dict)  # each asset's run config (the judge's repeats)


def plan(instance: dg.DagsterInstance, defs: dg.Definitions, tasks: list[str], partitions: set[tuple[str, str]],
         force: bool = False, done: AbstractSet[tuple[str, str | None]] = frozenset(),
         selection: tuple[str, ...] | None = None) -> Plan:
    """What to materialize for ``tasks`` and the ``(task, model)`` partitions: Dagster's answer, from
    the automation conditions on the assets (:mod:`assets.automation`) evaluated on the instance's
    records (the automation sensor asks the same conditions under the daemon; they read states, so
    no cursor is kept); every partition with ``force``. What this command materialized already
    (``done``: ``(asset, partition)``) is not asked again: work its run left to retry waits for the
    next command.

    A person asking now retries at once: the conditions are asked as of the end of the last back-off
    the automation sensor is holding (:func:`~argus_dagster.records.automation.retries_waiting`), and the plan says
    what the sensor would have held back (``Plan.waiting``). ``selection``: the assets asked about
    (:data:`PROTOCOL_SELECTION`; their definitions in ``defs`` carry the conditions)."""
    selection = selection or PROTOCOL_SELECTION["videoargus"]
    keys = {str(dg.MultiPartitionKey({"task": t, "model": m})) for t, m in partitions}

    def of(name: str) -> set:
        return set(tasks) if name in TASK_LEVEL else keys if name in CANDIDATE_LEVEL else {None}

    if force:
        requested = {name: of(name) for name in selection}
        return Plan(requested, {(a, k): ["forced (--force)"] for a, keys in requested.items() for k in keys})
    now = time.time()
    waiting: dict[tuple[str, str | None], float] = {(a, p): due for (a, p), due in retries_waiting(instance, now).items()
                                                    if (a, p) not in done and (p in tasks or p in keys)}
    at = max([now, *(due + 1 for due in waiting.values())])  # a second on: the time given keeps microseconds
    with asked_by_a_pass():  # a pass in flight holds back the automation sensor, not another pass
        result = dg.evaluate_automation_conditions(
            defs=defs, instance=instance, asset_selection=dg.AssetSelection.assets(*selection),
            evaluation_time=datetime.fromtimestamp(at, timezone.utc))
    requested = {}
    inputs_of: dict[str, set] = {}
    why = requested_reasons(result, instance, defs, inputs_of)
    for name in selection:
        got = {str(p) if p is not None else None for p in result.get_requested_partitions(dg.AssetKey(name))}
        got = {p for p in got if (name, p) not in done}
        wanted = got & of(name)
        if wanted:
            requested[name] = wanted
    return Plan(requested, why, retry_wait_text(waiting), inputs_of)


def feeds(defs: dg.Definitions, assets: set[str], selection: tuple[str, ...] | None = None) -> bool:
    """Whether any of ``assets`` is read by an asset of ``selection`` (only then can its new
    materializations make the conditions request more of them)."""
    selection = selection or PROTOCOL_SELECTION["videoargus"]
    graph = defs.resolve_asset_graph()
    asked = {dg.AssetKey(name) for name in selection}
    return any(graph.get(dg.AssetKey(a)).child_keys & asked for a in assets)


def _stretches(items: list[str], order: list[str]) -> list[list[str]]:
    """``items`` in ``order``, cut where one is skipped: each stretch is a range of partitions."""
    out: list[list[str]] = []
    for x in sorted(items, key=order.index):
        if out and order.index(x) == order.index(out[-1][-1]) + 1:
            out[-1].append(x)
        else:
            out.append([x])
    return out


def _ranges(by_partition: dict[tuple[str, str], tuple], model_order: list[str]) -> list[tuple[list[str], list[str]]]:
    """``(selection, partition keys)`` of ranges over ``(task, model)`` partitions with the same assets
    to materialize: per task over its models, or per model over its tasks, whichever takes fewer runs
    (a range holds one dimension fixed)."""

    def grouped(by_task: bool) -> list[tuple[list[str], list[str]]]:
        groups: dict[tuple, list[str]] = {}
        for (task, model), chosen in by_partition.items():
            groups.setdefault((task if by_task else model, chosen), []).append(model if by_task else task)
        out = []
        for (fixed, chosen), free in sorted(groups.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            order = model_order if by_task else list(ALL_TASKS)
            for stretch in _stretches(free, order):
                pairs = [(fixed, x) if by_task else (x, fixed) for x in stretch]
                out.append((list(chosen), [str(dg.MultiPartitionKey({"task": t, "model": m})) for t, m in pairs]))
        return out

    per_task, per_model = grouped(True), grouped(False)
    return per_model if len(per_model) < len(per_task) else per_task


def partition_ranges(by_partition: dict[tuple[str, str], tuple], model_order: list[str]) -> list[tuple[list[str], list[str]]]:
    """``(selection, partition keys)``: the fewest runs of ranges that materialize each ``(task, model)``
    partition's assets (the evaluation's models in ``model_order``)."""
    return _ranges(by_partition, model_order)


def runs_of(plan: Plan, model_order: list[str], tags: dict[str, str] | None = None,
            protocol: str = "videoargus") -> list[RunSpec]:
    """The runs that execute ``plan``, each a range of partitions with the same assets to materialize
    (the assets' backfill policy takes a range in one run): the tasks' inputs and rubrics (or a
    protocol's per-task assets) first, then the task x model partitions (:func:`_ranges`), then what
    is unpartitioned (the leaderboard, VEFX-Bench's). ``tags``: the command's
    (:func:`~argus_dagster.client.evaluate.command_tags`); each run adds why it runs and, where it
    calls the judge, :data:`JUDGE_TAG`. ``protocol``: the loop's; a protocol's runs are of its kind."""
    out: list[tuple[str, list[str], list[str]]] = []
    kinds = ({"task": "task", "partition": "partition", "board": "leaderboard"} if protocol == "videoargus"
             else dict.fromkeys(("task", "partition", "board"), protocol))
    by_selection: dict[tuple, list[str]] = {}
    for task in ALL_TASKS:
        chosen = tuple(name for name in TASK_LEVEL if task in plan.partitions(name))
        if chosen:
            by_selection.setdefault(chosen, []).append(task)
    # VideoArgus's assets take a range of partitions in one run (BackfillPolicy.single_run); a
    # protocol's take one partition a run.
    ranged = protocol == "videoargus"
    for chosen, tasks in sorted(by_selection.items()):
        stretches = _stretches(tasks, list(ALL_TASKS)) if ranged else [[t] for t in tasks]
        out += [(kinds["task"], list(chosen), stretch) for stretch in stretches]
    by_partition: dict[tuple[str, str], tuple] = {}
    candidate_keys = set().union(*(plan.partitions(name) for name in CANDIDATE_LEVEL))
    for key in candidate_keys:
        by_partition[split_partition(key)] = tuple(name for name in CANDIDATE_LEVEL if key in plan.partitions(name))
    ranges = (_ranges(by_partition, model_order) if ranged else
              [(list(chosen), [str(dg.MultiPartitionKey({"task": t, "model": m}))])
               for (t, m), chosen in sorted(by_partition.items(), key=lambda kv: (kv[0][0], model_order.index(kv[0][1])
                                                                                   if kv[0][1] in model_order else 0))])
    out += [(kinds["partition"], selection, keys) for selection, keys in ranges]
    # What is unpartitioned (the leaderboard and the cost ledger; a protocol's board) in one run, Dagster
    # ordering them by their dependencies; the pages in a run of their own, after everything they show.
    boards = sorted(n for n, parts in plan.requested.items() if None in parts and n not in ROLES.site)
    if boards:
        out.append((kinds["board"], boards, []))
    pages = [n for n in ROLES.site if None in plan.partitions(n)]
    if pages:
        out.append(("site", pages, []))
    specs = []
    for kind, selection, keys in out:
        reason = "; ".join(dict.fromkeys(w for k in (keys or (None,)) for a in selection for w in plan.why.get((a, k), [])))
        judged = bool(keys) and any(name in CANDIDATE_LEVEL for name in selection)
        specs.append(RunSpec(kind, selection, keys, {**(tags or {}), **({JUDGE_TAG: "1"} if judged else {}),
                                                     **({REASON_TAG: reason[:MAX_TAG]} if reason else {})}, reason))
    return specs


IN_FLIGHT = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED,
             dg.DagsterRunStatus.CANCELING]
DEAD_RUN_CHECK_S = 5.0  # while waiting: how often the runs waited for are checked for a process that died


def _partition_words(key: str) -> str:
    """``T2V x noisy`` for a task x model key, the task for a task's."""
    if "|" not in key:
        return key
    task, model = split_partition(key)
    return f"{task} x {model}"


def writers_of(instance: dg.DagsterInstance, spec: RunSpec) -> dict[str, list[str]]:
    """The runs in flight on ``instance`` (launched by anyone: another command, the UI, the daemon) that
    materialize an asset partition ``spec`` would, by their planned materializations: ``{run id: the
    partitions shared, in words}``."""
    wanted = {(a, k) for a in spec.selection for k in (spec.keys or (None,))}
    out: dict[str, list[str]] = {}
    for run_id, planned in planned_in_flight(instance, IN_FLIGHT).items():
        shared = wanted & planned
        if shared:
            out[run_id] = sorted({_partition_words(p) if p else a for a, p in shared})
    return out


def wait_for_writers(instance: dg.DagsterInstance, spec: RunSpec, progress, poll_s: float = 0.25,
                     timeout_s: float | None = None) -> bool:
    """Before ``spec`` runs: wait, saying so in one line per run, for every run in flight that
    materializes one of its asset partitions (two runs never compute one partition at once: each
    would read the other's half-written inputs, and the history would mix their passes). Waits on the
    runs' status in Dagster's records; returns whether it waited (the caller asks Dagster again: the
    other run may have done the work)."""
    busy = writers_of(instance, spec)
    if not busy:
        return False
    for run_id, what in busy.items():
        where = ", ".join(what)
        progress(f"  {where} {'is' if len(what) == 1 else 'are'} being materialized by run {run_id[:8]}; waiting")
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    pending = set(busy)
    next_dead_check = time.monotonic() + DEAD_RUN_CHECK_S
    while pending:
        if time.monotonic() >= next_dead_check:  # a run whose process died never ends by itself
            ask_dead_run_sensor(instance)
            next_dead_check = time.monotonic() + DEAD_RUN_CHECK_S
        for run_id in list(pending):
            run = instance.get_run_by_id(run_id)
            if run is None or run.is_finished:
                pending.discard(run_id)
        if pending:
            if deadline is not None and time.monotonic() > deadline:
                raise SystemExit(f"run(s) {', '.join(r[:8] for r in sorted(pending))} still materialize what this "
                                 "command would; try again once they end (argus ui shows them)")
            time.sleep(poll_s)
    return True


LAUNCH_TAG = "argus/launch"  # one launch's token: the gate opens once its run has started
GATE_FILE = ".argus-launch.lock"


class Replan(Exception):
    """Another run materialized what a run was about to: Dagster is asked again before anything runs."""


class _Gate:
    """The evaluation's launch gate: an ``flock`` on its instance folder, held from the check for runs in
    flight that share a partition (:func:`writers_of`) until this launch's run has started, so two
    processes never both find a partition free and both compute it. Dagster's run queue holds back a
    queued run of a partition in flight; runs executed in process (``argus evaluate``, the pass job)
    pass no queue, and take this gate instead. Released by the kernel if the process dies."""

    def __init__(self, instance: dg.DagsterInstance):
        self.path = Path(instance.root_directory) / GATE_FILE
        self._fd: int | None = None
        self._lock = threading.Lock()

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        with self._lock:
            self._fd = fd

    def release(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def release_once_started(self, instance: dg.DagsterInstance, token: str, done: threading.Event) -> None:
        """Release the gate as soon as the run tagged ``token`` has left ``NOT_STARTED`` (its planned
        materializations are recorded: other launches see it in :func:`writers_of`)."""
        while not done.wait(0.02):
            runs = instance.get_runs(dg.RunsFilter(tags={LAUNCH_TAG: token}), limit=1)
            if runs and runs[0].status != dg.DagsterRunStatus.NOT_STARTED:
                break
        self.release()


def execute(instance: dg.DagsterInstance, resources: Mapping[str, Any], spec: RunSpec, progress=None,
            replan_after_wait: bool = False) -> dg.ExecuteInProcessResult:
    """One of Dagster's in-process runs of ``spec`` (:func:`argus_dagster.definitions.materialize_selection`:
    its assets and their partitioned checks, over its partitions), on the evaluation's instance.

    With ``progress``, through the launch gate (:class:`_Gate`): a run in flight that materializes one
    of ``spec``'s partitions is waited for first, saying so (:func:`wait_for_writers`); then, with
    ``replan_after_wait``, :class:`Replan` is raised (the other run may have done the work), else
    ``spec`` runs as planned."""
    token = uuid.uuid4().hex
    gate, started = _Gate(instance), threading.Event()
    watcher = threading.Thread(target=gate.release_once_started, args=(instance, token, started), daemon=True)
    try:
        gate.acquire()
        while progress is not None and writers_of(instance, spec):
            gate.release()
            wait_for_writers(instance, spec, progress)
            if replan_after_wait:
                raise Replan()
            gate.acquire()
        watcher.start()
        return materialize_selection(instance, resources, spec.selection, spec.keys,
                                     {**launcher_tags(), **spec.tags, LAUNCH_TAG: token},
                                     {**QUIET, "ops": {name: {"config": c} for name, c in spec.ops.items()}}
                                     if spec.ops else QUIET)
    finally:
        started.set()
        if watcher.is_alive():
            watcher.join()
        gate.release()


def launch(instance: dg.DagsterInstance, resources: Mapping[str, Any], spec: RunSpec, progress,
           replan_after_wait: bool = False) -> dg.ExecuteInProcessResult:
    """Execute ``spec`` through the launch gate (:func:`execute`) and say each of its checks that did not
    pass; a failed run stops the command."""
    result = execute(instance, resources, spec, progress, replan_after_wait)
    if not result.success:
        resumes = "; argus evaluate again resumes from what was stored" if spec.kind in RESUMABLE else ""
        raise SystemExit(f"run {result.run_id} failed; see the Dagster UI (argus ui) for its logs{resumes}")
    for line in failed_checks(result):
        progress(line)
    return result


RESUMABLE = ("task", "partition", "leaderboard", "site")  # the runs Dagster's conditions request again after a failure


def failed_checks(result: dg.ExecuteInProcessResult) -> list[str]:
    """A line for every asset check of ``result`` that did not pass (reported, not fatal)."""
    out = []
    for ev in result.get_asset_check_evaluations():
        if not ev.passed:
            where = f" ({ev.partition})" if ev.partition else ""
            out.append(f"  check {ev.check_name} on {ev.asset_key.to_user_string()}{where} did not pass: "
                       "see its metadata in the UI")
    return out


def frozen_rubrics(result: dg.ExecuteInProcessResult) -> dict[str, tuple[int, list[str]]]:
    """Per task, how many rubrics a run generated and the folders it froze them in (later runs load them
    from there)."""
    out = {}
    for event in result.get_asset_materialization_events():
        m = event.materialization
        if m.asset_key.to_user_string() == "rubrics" and "n_generated" in m.metadata:
            folders = cast("list[str] | None", m.metadata["frozen_in"].value) if "frozen_in" in m.metadata else []
            out[str(m.partition)] = (int(cast("int | None", m.metadata["n_generated"].value) or 0), list(folders or []))
    return out


def retry_left(result: dg.ExecuteInProcessResult) -> dict[str, int]:
    """Per partition, the failed tool steps and unanswered judgments a candidate run left to retry."""
    out: dict[str, int] = {}
    for event in result.get_asset_materialization_events():
        m = event.materialization
        for name in RETRY_METADATA.get(m.asset_key.to_user_string(), ()):
            if name in m.metadata:
                out[str(m.partition)] = out.get(str(m.partition), 0) + int(cast("int | None", m.metadata[name].value) or 0)
    return out
