"""Materializing the graph in the local Dagster instance, partition by partition.

The CLI is a thin launcher: it registers models as ``candidate_models`` partitions and materializes
the same assets the UI shows, in the SQLite instance under ``$ARGUS_HOME/dagster_home``.

Partitions run as concurrent in-process runs (``ARGUS_PARALLEL_RUNS``, default 4): a task's model
partitions start as soon as its rubrics exist, so one partition's Dagster bookkeeping and tools
overlap another's VLM waits, and all of them share one VLM client and its bound. These runs write
their events to the instance like any other; their stdout is not captured into compute-log files
(that capture redirects the process's file descriptors, which concurrent runs in one process would
tangle), so the CLI's runs show no raw stdout in the UI.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Callable

import dagster as dg
import polars as pl

from .bench import discover_models
from .settings import load_settings

QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


# Concurrent in-process runs: no stdout capture, and no DEBUG lines in the event log (Dagster's own
# events are stored whatever the level; the IO manager's "Loading partition ..." lines are not).
_CLI_OVERRIDES = {"compute_logs": {"module": "dagster._core.storage.noop_compute_log_manager",
                                   "class": "NoOpComputeLogManager"},
                  "python_logs": {"python_log_level": "INFO"}}


def local_instance(capture_stdout: bool = True) -> dg.DagsterInstance:
    """The instance under ``$ARGUS_HOME/dagster_home``; ``capture_stdout=False`` for concurrent
    in-process runs (the same storage, no compute-log capture, INFO and above in the event log)."""
    settings = load_settings()
    settings.dagster_home.mkdir(parents=True, exist_ok=True)
    os.environ["DAGSTER_HOME"] = str(settings.dagster_home)
    if capture_stdout:
        return dg.DagsterInstance.get()
    from dagster._core.instance.ref import InstanceRef

    return dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(settings.dagster_home), overrides=_CLI_OVERRIDES))


def run_all(tasks: list[str] | None = None, models: list[str] | None = None,
            progress: Callable[[str], None] = print, instance: dg.DagsterInstance | None = None,
            parallel: int | None = None) -> pl.DataFrame:
    """Materialize every asset for the selected tasks and models; returns the leaderboard.

    Up to ``parallel`` partition runs at once (``ARGUS_PARALLEL_RUNS``, default 4; 1 runs them one
    after another).
    """
    from assets import ALL_ASSETS, ALL_CHECKS, CANDIDATE_ASSETS, TASK_ASSETS
    from assets.leaderboard import leaderboard
    from resources import resources_for

    parallel = max(1, parallel or int(os.environ.get("ARGUS_PARALLEL_RUNS") or 4))
    instance = instance or local_instance(capture_stdout=parallel == 1)
    settings = load_settings()
    found = discover_models(settings.candidates_dir)
    if models:
        unknown = sorted(set(models) - set(found))
        if unknown:
            raise SystemExit(f"no candidate videos for model(s) {unknown} under {settings.candidates_dir}")
        found = {m: t for m, t in found.items() if m in models}
    task_list = sorted({t for ts in found.values() for t in ts} if not tasks else set(tasks))
    if not found:
        raise SystemExit(f"no candidate videos under {settings.candidates_dir} (expected <TASK>/<model>/<id>.mp4)")
    instance.add_dynamic_partitions("candidate_models", sorted(found))
    resources = resources_for()  # built now, so they follow this process's ARGUS_HOME
    # The partitioned checks run with the assets they guard; a failed one is reported, not fatal.
    task_keys = {a.key for a in TASK_ASSETS}
    partitioned = [c for c in ALL_CHECKS if c.partitions_def is not None]
    task_checks = [c for c in partitioned if all(k.asset_key in task_keys for k in c.check_keys)]
    candidate_checks = [c for c in partitioned if c not in task_checks]
    t_start = time.perf_counter()
    say_lock = threading.Lock()

    def say(msg: str) -> None:
        with say_lock:
            progress(msg)

    def task_run(task: str) -> None:
        t0 = time.perf_counter()
        _check(dg.materialize(TASK_ASSETS + task_checks, selection=TASK_ASSETS + task_checks, partition_key=task,
                              instance=instance, resources=resources, run_config=QUIET,
                              tags={"argus/launcher": "cli"}), say)
        say(f"[{time.perf_counter() - t_start:6.1f}s] {task}: inputs and rubrics ({time.perf_counter() - t0:.1f}s)")

    def model_run(task: str, model: str) -> None:
        t0 = time.perf_counter()
        key = dg.MultiPartitionKey({"task": task, "model": model})
        _check(dg.materialize(CANDIDATE_ASSETS + TASK_ASSETS + candidate_checks,
                              selection=CANDIDATE_ASSETS + candidate_checks, partition_key=key, instance=instance,
                              resources=resources, run_config=QUIET, tags={"argus/launcher": "cli"}), say)
        say(f"[{time.perf_counter() - t_start:6.1f}s] {task} x {model}: scored ({time.perf_counter() - t0:.1f}s)")

    # Each task's model partitions are submitted when its rubrics are done; the first failure stops
    # the submission of new runs and is raised once the running ones finish.
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        pending: dict[Future, str | None] = {pool.submit(task_run, t): t for t in task_list}
        failure: BaseException | None = None
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for f in done:
                task = pending.pop(f)
                if f.exception() is not None:
                    failure = failure or f.exception()
                elif task is not None and failure is None:
                    for model in sorted(m for m, ts in found.items() if task in ts):
                        pending[pool.submit(model_run, task, model)] = None
        if failure is not None:
            raise failure
    result = dg.materialize(ALL_ASSETS + ALL_CHECKS, selection=[leaderboard],
                            instance=instance, resources=resources, run_config=QUIET)
    _check(result, progress)
    progress(f"[{time.perf_counter() - t_start:6.1f}s] leaderboard")
    human = sorted((settings.home / "human").glob("*.csv"))
    if human:  # people's ratings are there: say how well the scores agree with them
        from assets.alignment import human_alignment

        from .alignment import ALIGNMENT_COLUMNS, format_alignment

        res = dg.materialize(ALL_ASSETS + ALL_CHECKS, selection=[human_alignment], instance=instance,
                             resources=resources, run_config=QUIET)
        _check(res)
        table = res.output_for_node("human_alignment")
        progress(f"[{time.perf_counter() - t_start:6.1f}s] human alignment "
                 f"(ratings: {', '.join(p.name for p in human)})")
        for (task,), rows in table.group_by("task", maintain_order=True):
            progress(f"\n{task}\n" + format_alignment(rows.select(ALIGNMENT_COLUMNS)))
    return result.output_for_node("leaderboard")


def _check(result: dg.ExecuteInProcessResult, progress: Callable[[str], None] = print) -> None:
    if not result.success:
        raise SystemExit(f"run {result.run_id} failed; see the Dagster UI (make ui) for its logs")
    for ev in result.get_asset_check_evaluations():
        if not ev.passed:
            where = f" ({ev.partition})" if ev.partition else ""
            progress(f"  check {ev.check_name} on {ev.asset_key.to_user_string()}{where} did not pass: "
                     "see its metadata in the UI")


def current_leaderboard(instance: dg.DagsterInstance | None = None) -> pl.DataFrame | None:
    """The last materialized leaderboard, read from storage (no recomputation)."""
    from assets import ALL_ASSETS
    from resources import resources_for

    instance = instance or local_instance()
    if instance.get_latest_materialization_event(dg.AssetKey("leaderboard")) is None:
        return None
    defs = dg.Definitions(assets=ALL_ASSETS, resources=resources_for())
    return defs.load_asset_value("leaderboard", instance=instance)
