"""Materializing the graph in the local Dagster instance, partition by partition.

The CLI is a thin launcher: it registers models as ``candidate_models`` partitions and materializes
the same assets the UI shows, in the SQLite instance under ``$ARGUS_HOME/dagster_home``.

A partition that is up to date is not run again: after each successful run the CLI tags the run
with a fingerprint of everything its outputs depend on (the assets' code versions, the judge, rubric
generator, tool versions, sampling and aggregation settings, and the content hashes of the task's
bench files, frozen rubrics and the partition's candidate videos), and skips a partition whose
latest materialization carries the fingerprint it would get now. A run that left work to retry (a
rubric that could not be generated, a tool step that failed, a judgment the VLM did not answer) is
not tagged, so the next run does that work. ``force=True`` (``--force``)
re-materializes every partition; the content cache then answers every tool step and judgment.

Partitions run as concurrent in-process runs (``ARGUS_PARALLEL_RUNS``, default 5): a task's model
partitions start as soon as its rubrics exist, so one partition's Dagster bookkeeping and tools
overlap another's VLM waits, and all of them share one VLM client and its bound (requests that
wait for a slot are served by stage, then by task order: ``argus_dagster.vlm.request_priority``).
These runs write their events to the instance like any other; their stdout is not captured into
compute-log files (that capture redirects the process's file descriptors, which concurrent runs in
one process would tangle), so the CLI's runs show no raw stdout in the UI.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import dagster as dg
import polars as pl

from .bench import discover, task_dir
from .cache import cache_key
from .media import file_digest
from .progress import PROGRESS
from .settings import environment, load_settings
from .vlm import request_priority

QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


# Concurrent in-process runs: no stdout capture. (Not ``python_logs`` either: with it, every run
# reconfigures Python logging while the others log, which deadlocks.)
_NO_CAPTURE = {"compute_logs": {"module": "dagster._core.storage.noop_compute_log_manager",
                                "class": "NoOpComputeLogManager"}}
INSTANCE_YAML = """\
# The Dagster instance of this ARGUS_HOME (argus evaluate, argus demo, make ui).
# Dagster's anonymous usage statistics: set enabled to true to send them.
telemetry:
  enabled: false
"""
_STORAGE_KEYS = ("storage", "run_storage", "event_log_storage", "schedule_storage")


def local_instance(capture_stdout: bool = True) -> dg.DagsterInstance:
    """The instance under ``$ARGUS_HOME/dagster_home``; ``capture_stdout=False`` for concurrent
    in-process runs (no compute-log capture).

    Unless a ``dagster.yaml`` there configures storage, it is the default SQLite storage through
    ``argus_dagster.storage`` (the same files, with connections kept open).
    """
    import yaml
    from dagster._core.instance.ref import InstanceRef

    from .storage import sqlite_storage_overrides

    settings = load_settings()
    home = settings.dagster_home
    home.mkdir(parents=True, exist_ok=True)
    os.environ["DAGSTER_HOME"] = str(home)
    config = ensure_instance_yaml(home)
    configured = yaml.safe_load(config.read_text()) or {}
    overrides = {} if any(k in configured for k in _STORAGE_KEYS) else sqlite_storage_overrides(str(home))
    if not capture_stdout:
        overrides.update(_NO_CAPTURE)
    return dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home), overrides=overrides))


def ensure_instance_yaml(dagster_home: Path) -> Path:
    """The instance's own ``dagster.yaml`` (:data:`INSTANCE_YAML`), written where there is none."""
    config = Path(dagster_home) / "dagster.yaml"
    if not config.is_file():
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(INSTANCE_YAML)
    return config


def shares_a_process() -> bool:
    """Whether partition runs can share this process: only on an instance without settings. With any
    (the default file turns telemetry off), Dagster applies a logging configuration at the start of
    every run, which closes the handlers of the runs beside it in the process and can deadlock them;
    then they run one after another."""
    import yaml

    config = ensure_instance_yaml(load_settings().dagster_home)  # as the runs will read it
    configured = yaml.safe_load(config.read_text()) or {}
    return not (set(configured) - set(_STORAGE_KEYS) - {"compute_logs", "local_artifact_storage"})


PROTOCOLS = ("videoargus", "firm", "both")


def run_all(tasks: list[str] | None = None, models: list[str] | None = None,
            progress: Callable[[str], None] = print, instance: dg.DagsterInstance | None = None,
            parallel: int | None = None, force: bool = False, vlm_only: bool = False,
            protocol: str = "videoargus") -> pl.DataFrame | None:
    """Materialize every asset for the selected tasks and models; returns the leaderboard (None
    with ``protocol="firm"``, which makes none).

    Up to ``parallel`` partition runs at once (``ARGUS_PARALLEL_RUNS``, default 5; 1 runs them one
    after another). Up-to-date partitions are skipped unless ``force``. ``vlm_only``: the VLM-only
    ablation (every plan one ``vlm_qa``), else as ``ARGUS_VLM_ONLY`` says. The runs' event logs keep
    INFO and above (see ``info_and_above``). ``protocol``: ``videoargus`` (the default), ``firm``
    (FIRM-Video's ``firm_checklists``, ``firm_verdicts`` and ``firm_scores`` only) or ``both`` (the
    FIRM runs follow each partition's VideoArgus run; they are never skipped as up to date, and the
    content cache answers what they computed before).
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol {protocol!r}: expected one of {PROTOCOLS}")
    with info_and_above():
        return _run_all(tasks, models, progress, instance, parallel, force, vlm_only, protocol)


@contextmanager
def info_and_above() -> Iterator[None]:
    """No DEBUG records in this process while the block runs.

    In a run, every log record becomes an event in the instance's event log. The IO manager's DEBUG
    lines ("Loading partition ...", "Writing file at ...") are a third of a partition run's events
    and say what the materialization's metadata already says (its path), so the CLI's runs leave
    them out. Dagster's own events (steps, materializations, checks) are logged whatever the level,
    so every one of them is kept.
    """
    before = logging.root.manager.disable
    logging.disable(max(before, logging.DEBUG))
    try:
        yield
    finally:
        logging.disable(before)


def _run_all(tasks: list[str] | None, models: list[str] | None, progress: Callable[[str], None],
             instance: dg.DagsterInstance | None, parallel: int | None, force: bool,
             vlm_only: bool = False, protocol: str = "videoargus") -> pl.DataFrame | None:
    from assets import ALL_ASSETS, ALL_CHECKS, CANDIDATE_ASSETS, TASK_ASSETS
    from assets.leaderboard import leaderboard
    from resources import resources_for

    parallel = max(1, parallel or int(environment().number("ARGUS_PARALLEL_RUNS", 5, minimum=1)))
    if parallel > 1 and not shares_a_process():
        parallel = 1  # see shares_a_process
    instance = instance or local_instance(capture_stdout=parallel == 1)
    settings = load_settings()
    discovery = discover(settings.candidates_dir, settings.bench_dir)
    for problem in discovery.problems:
        progress(f"left out: {problem}")
    found = discovery.models
    if models:
        unknown = sorted(set(models) - set(found))
        if unknown:
            raise SystemExit(f"no candidate videos for model(s) {unknown} under {settings.candidates_dir}")
        found = {m: t for m, t in found.items() if m in models}
    task_list = sorted({t for ts in found.values() for t in ts} if not tasks else set(tasks))
    if not found:
        raise SystemExit(f"no candidate videos under {settings.candidates_dir} (expected <TASK>/<model>/<id>.mp4)")
    sweep_dead_runs(instance, progress)
    notice = pool_notice(instance)
    if notice:
        progress(notice)
    instance.add_dynamic_partitions("candidate_models", sorted(found))
    resources = resources_for(vlm_only=vlm_only or None)  # built now, so they follow this process's ARGUS_HOME
    # The partitioned checks run with the assets they guard; a failed one is reported, not fatal.
    task_keys = {a.key for a in TASK_ASSETS}
    partitioned = [c for c in ALL_CHECKS if c.partitions_def is not None]
    task_checks = [c for c in partitioned if all(k.asset_key in task_keys for k in c.check_keys)]
    candidate_checks = [c for c in partitioned if c not in task_checks]
    t_start = time.perf_counter()
    n_videos = {(t, m): _count_videos(settings.candidates_dir, t, m) for m, ts in found.items() for t in ts if t in task_list}
    PROGRESS.reset(sum(n_videos.values()))
    say_lock = threading.Lock()
    evaluator = evaluator_identity(resources)
    ran: list[str] = []
    # Within a stage (rubrics, evidence, judgments: see ``argus_dagster.vlm``), a task's runs send
    # their VLM requests ahead of later tasks' runs, so tasks finish one after another and one run's
    # Dagster work overlaps the others' VLM waits.
    urgency = {t: i for i, t in enumerate(task_list)}

    def say(msg: str) -> None:
        with say_lock:
            progress(msg)

    def task_run(task: str) -> None:
        if protocol != "firm":
            videoargus_task_run(task)
        if protocol != "videoargus":
            firm_task_run(task)

    def model_run(task: str, model: str) -> None:
        if protocol != "firm":
            videoargus_model_run(task, model)
        if protocol != "videoargus":
            firm_model_run(task, model)

    def firm_task_run(task: str) -> None:
        t0 = time.perf_counter()
        with request_priority(urgency[task]):
            res = _firm_run(instance, resources, task, with_inputs=protocol == "firm")
        _check(res, say)
        ran.append(f"firm {task}")
        say(f"[{time.perf_counter() - t_start:6.1f}s] {task}: FIRM-Video checklists ({time.perf_counter() - t0:.1f}s)")

    def firm_model_run(task: str, model: str) -> None:
        t0 = time.perf_counter()
        with request_priority(urgency[task]):
            res = _firm_run(instance, resources, task, model, with_inputs=protocol == "firm")
        _check(res, say)
        ran.append(f"firm {task} x {model}")
        say(f"[{time.perf_counter() - t_start:6.1f}s] {task} x {model}: FIRM-Video scores "
            f"({time.perf_counter() - t0:.1f}s)")

    def videoargus_task_run(task: str) -> None:
        t0 = time.perf_counter()
        if not force and _up_to_date(instance, "rubrics", task, fingerprint(evaluator, settings, task)):
            say(f"[{time.perf_counter() - t_start:6.1f}s] {task}: inputs and rubrics up to date")
            return
        with request_priority(urgency[task]):
            res = dg.materialize(TASK_ASSETS + task_checks, selection=TASK_ASSETS + task_checks, partition_key=task,
                                 instance=instance, resources=resources, run_config=QUIET,
                                 tags=launcher_tags())
        _check(res, say)
        # Taken after the run: the rubrics it froze are part of the task's files. A rubric that could
        # not be written leaves the task untagged, so the next run tries again.
        if not res.output_for_node("rubrics")["error"].drop_nulls().len():
            instance.add_run_tags(res.run_id, {FINGERPRINT_TAG: fingerprint(evaluator, settings, task)})
        ran.append(task)
        say(f"[{time.perf_counter() - t_start:6.1f}s] {task}: inputs and rubrics ({time.perf_counter() - t0:.1f}s)")

    def videoargus_model_run(task: str, model: str) -> None:
        t0 = time.perf_counter()
        key = dg.MultiPartitionKey({"task": task, "model": model})
        fp = fingerprint(evaluator, settings, task, model)  # the state this run starts from
        if not force and _up_to_date(instance, "diagnostic_reports", str(key), fp):
            PROGRESS.expect(-n_videos.get((task, model), 0))
            say(f"[{time.perf_counter() - t_start:6.1f}s] {task} x {model}: up to date")
            return
        with request_priority(urgency[task]):
            res = dg.materialize(CANDIDATE_ASSETS + TASK_ASSETS + candidate_checks,
                                 selection=CANDIDATE_ASSETS + candidate_checks, partition_key=key, instance=instance,
                                 resources=resources, run_config=QUIET, tags=launcher_tags())
        _check(res, say)
        meta = {m.asset_key.to_user_string(): m.materialization.metadata for m in res.get_asset_materialization_events()}
        retry = (meta["criterion_evidence"]["tool_steps_failed"].value
                 + meta["criterion_scores"]["n_unscored_retryable"].value)
        if not retry:  # a partition with failed steps or unanswered judgments is run again next time
            instance.add_run_tags(res.run_id, {FINGERPRINT_TAG: fp})
        ran.append(f"{task} x {model}")
        say(f"[{time.perf_counter() - t_start:6.1f}s] {task} x {model}: scored ({time.perf_counter() - t0:.1f}s)"
            + (f"; {retry} failed tool steps or unanswered judgments, retried on the next run" if retry else ""))

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
    defs = dg.Definitions(assets=ALL_ASSETS, asset_checks=ALL_CHECKS, resources=resources)

    def stored(asset: str) -> pl.DataFrame | None:  # nothing ran: what is stored is current
        if ran or instance.get_latest_materialization_event(dg.AssetKey(asset)) is None:
            return None
        return defs.load_asset_value(asset, instance=instance)

    board = stored("leaderboard") if protocol != "firm" else None
    if protocol == "firm":  # FIRM-Video only: no leaderboard (argus evaluate prints FIRM's summary)
        progress(f"[{time.perf_counter() - t_start:6.1f}s] FIRM-Video done")
    elif board is None:
        result = dg.materialize(ALL_ASSETS + ALL_CHECKS, selection=[leaderboard],
                                instance=instance, resources=resources, run_config=QUIET)
        _check(result, progress)
        board = result.output_for_node("leaderboard")
        progress(f"[{time.perf_counter() - t_start:6.1f}s] leaderboard")
    else:
        progress(f"[{time.perf_counter() - t_start:6.1f}s] every partition up to date (--force re-materializes)")
    human = sorted((settings.home / "human").glob("*.csv"))
    if human:  # people's ratings are there: say how well the scores agree with them
        from assets.alignment import human_alignment

        from .alignment import ALIGNMENT_COLUMNS, format_alignment

        # Always recomputed (one short run): the ratings themselves may have changed.
        res = dg.materialize(ALL_ASSETS + ALL_CHECKS, selection=[human_alignment], instance=instance,
                             resources=resources, run_config=QUIET)
        _check(res)
        table = res.output_for_node("human_alignment")
        progress(f"[{time.perf_counter() - t_start:6.1f}s] human alignment "
                 f"(ratings: {', '.join(p.name for p in human)})")
        for (task,), rows in table.group_by("task", maintain_order=True):
            progress(f"\n{task}\n" + format_alignment(rows.select(ALIGNMENT_COLUMNS)))
    return board


def _count_videos(candidates: Path, task: str, model: str) -> int:
    folder = task_dir(candidates, task)
    return sum(1 for p in (folder / model).iterdir() if p.is_file()) if folder and (folder / model).is_dir() else 0


def row_errors(tasks: list[str] | None = None, models: list[str] | None = None,
               instance: dg.DagsterInstance | None = None) -> list[tuple[str, str, str]]:
    """The row errors stored for the evaluated bench (the tasks and models given, else all)."""
    from assets import ALL_ASSETS, ALL_CHECKS
    from resources import resources_for

    settings = load_settings()
    found = discover(settings.candidates_dir, settings.bench_dir).models
    if models:
        found = {m: t for m, t in found.items() if m in models}
    task_list = sorted(tasks or {t for ts in found.values() for t in ts})
    defs = dg.Definitions(assets=ALL_ASSETS, asset_checks=ALL_CHECKS, resources=resources_for())
    with info_and_above():  # the IO manager's DEBUG lines ("Loading partition ...") stay off the terminal
        return _row_errors(defs, instance or local_instance(), task_list, found)


def _row_errors(defs: dg.Definitions, instance: dg.DagsterInstance, tasks: list[str],
                found: dict[str, list[str]]) -> list[tuple[str, str, str]]:
    """``(where, id, error)`` of every row with an error in the evaluated partitions, as stored."""
    out: list[tuple[str, str, str]] = []

    def stored(asset: str, key) -> pl.DataFrame | None:
        if not instance.get_materialized_partitions(dg.AssetKey(asset)) & {str(key)}:
            return None
        return defs.load_asset_value(asset, partition_key=str(key), instance=instance)

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


def error_summary(errors: list[tuple[str, str, str]], first: int = 3) -> str:
    """How many rows carry an error, of which kind (the text before its first colon), and the first few
    of each kind with where they are and their ids; empty when there is none."""
    if not errors:
        return ""
    kinds: dict[str, list[tuple[str, str, str]]] = {}
    for where, iid, error in errors:
        kinds.setdefault(error.split(":", 1)[0].strip()[:60] or "error", []).append((where, iid, error))
    lines = [f"\n{len(errors)} row{'s' if len(errors) != 1 else ''} with an error (they are not scored; "
             "the rest are):"]
    for kind, rows in sorted(kinds.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"  {len(rows)} x {kind}")
        for where, iid, error in rows[:first]:
            lines.append(f"      {where} {iid!r}: {error[:160]}")
        if len(rows) > first:
            lines.append(f"      ... and {len(rows) - first} more")
    return "\n".join(lines)


FINGERPRINT_TAG = "argus/fingerprint"
PROCESS_TAG = "argus/process"  # host:pid:start of the process that executes a CLI run
IN_PROGRESS = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.NOT_STARTED]


def _process_id(pid: int | None = None) -> str:
    """``host:pid:start``: the start time (in clock ticks since boot) tells a reused pid apart."""
    import socket

    pid = pid or os.getpid()
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid)}"


def _start_ticks(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"


def launcher_tags() -> dict[str, str]:
    return {"argus/launcher": "cli", PROCESS_TAG: _process_id()}


def _alive(process: str) -> bool:
    import socket

    host, _, rest = process.partition(":")
    pid, _, start = rest.partition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's run: not ours to judge
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return start in ("?", _start_ticks(int(pid)))


def sweep_dead_runs(instance: dg.DagsterInstance, progress: Callable[[str], None] = print) -> list[str]:
    """Runs this CLI started in a process that is gone (killed, out of memory) are marked failed and
    give back the concurrency-pool slots they held, so no later run waits on them forever.

    A run launched by the daemon or the UI is watched by Dagster's run monitoring instead.
    """
    swept = []
    for record in instance.get_run_records(dg.RunsFilter(statuses=IN_PROGRESS, tags={"argus/launcher": "cli"})):
        run = record.dagster_run
        process = run.tags.get(PROCESS_TAG)
        if process is None or _alive(process):
            continue
        instance.report_run_failed(run, message=f"the process that ran it ({process}) is gone; argus evaluate "
                                                "marked it failed and freed its pool slots")
        instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        swept.append(run.run_id)
        progress(f"run {run.run_id[:8]} was left started by a process that is gone: marked failed, pool slots freed")
    return swept


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


def evaluator_identity(resources: dict) -> dict:
    """What, besides the data, determines every output: code versions and the evaluator's settings."""
    from argus_dagster import __version__
    from argus_dagster.evidence.tools.vlm_qa import qa_version
    from assets import CANDIDATE_ASSETS, TASK_ASSETS

    from .media import SAMPLING_ID

    vlm, rubric_vlm, tools = resources["vlm"], resources["rubric_vlm"], resources["tools"]
    return {
        "version": __version__,
        "code": {k.to_user_string(): v for a in TASK_ASSETS + CANDIDATE_ASSETS for k, v in a.code_versions_by_key.items()},
        "rubric_generator": resources["rubric_generator"].identity(rubric_vlm),
        "judge": resources["judge"].identity(vlm),
        "tools": {**tools.suite().versions(), **({"vlm_qa": qa_version(vlm.backend, vlm.model_name())}
                                                 if vlm.configured else {})},
        "tool_flags": {"vlm_only": tools.vlm_only, "web_search": tools.web_search},
        "sampling": SAMPLING_ID,
        "cap_alpha": resources["scoring"].cap_alpha,
    }


def _files(root: Path | None) -> dict[str, str]:
    if root is None or not root.is_dir():
        return {}
    return {str(p.relative_to(root)): file_digest(str(p)) for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith(".part")}


def fingerprint(evaluator: dict, settings, task: str, model: str | None = None) -> str:
    """A task's (or a task x model partition's) inputs and evaluator, as one hash."""
    parts = {"evaluator": evaluator, "bench": _files(task_dir(settings.bench_dir, task)),
             "frozen": _files(settings.frozen_rubrics_dir / task)}
    if model is not None:
        d = task_dir(settings.candidates_dir, task)
        parts["candidates"] = _files(d / model if d else None)
    return cache_key(kind="fingerprint", task=task, model=model, **parts)


def _up_to_date(instance: dg.DagsterInstance, asset: str, partition: str, fp: str) -> bool:
    """Whether the latest materialization of ``asset``'s ``partition`` came from a run with ``fp``."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition]), limit=1).records
    if not records:
        return False
    run = instance.get_run_by_id(records[0].run_id)
    return run is not None and run.tags.get(FINGERPRINT_TAG) == fp


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


# ----------------------------------------------------------------------------------------------------
# FIRM-Video and best-of-N (argus evaluate --protocol firm|both, argus export firm, argus best-of-n)
# ----------------------------------------------------------------------------------------------------


def _firm_run(instance: dg.DagsterInstance, resources: dict, task: str, model: str | None = None,
              with_inputs: bool = False) -> dg.ExecuteInProcessResult:
    """One FIRM-Video run: a task's checklists, or a task x model partition's verdicts and scores (and
    their check). ``with_inputs``: also materialize the input (or candidate) table it reads."""
    from assets import CANDIDATE_ASSETS, FIRM_CANDIDATE_ASSETS, FIRM_CHECKS, FIRM_TASK_ASSETS, TASK_ASSETS
    from assets.candidates import candidate_videos
    from assets.inputs import input_instances

    if model is None:
        selection = ([input_instances] if with_inputs else []) + FIRM_TASK_ASSETS
        return dg.materialize(TASK_ASSETS + FIRM_TASK_ASSETS, selection=selection, partition_key=task,
                              instance=instance, resources=resources, run_config=QUIET, tags=launcher_tags())
    key = dg.MultiPartitionKey({"task": task, "model": model})
    selection = ([candidate_videos] if with_inputs else []) + FIRM_CANDIDATE_ASSETS + FIRM_CHECKS
    return dg.materialize(TASK_ASSETS + CANDIDATE_ASSETS + FIRM_TASK_ASSETS + FIRM_CANDIDATE_ASSETS + FIRM_CHECKS,
                          selection=selection, partition_key=key, instance=instance, resources=resources,
                          run_config=QUIET, tags=launcher_tags())


def stored_partitions(asset: str, instance: dg.DagsterInstance | None = None, tasks: list[str] | None = None,
                      resources: dict | None = None) -> dict[str, pl.DataFrame]:
    """Every materialized partition of ``asset`` as stored (of ``tasks`` only, when given), by key."""
    from assets import ALL_ASSETS, GRAPH_CHECKS
    from assets.partitions import task_model_partitions
    from resources import resources_for

    instance = instance or local_instance()
    defs = dg.Definitions(assets=ALL_ASSETS, asset_checks=GRAPH_CHECKS, resources=resources or resources_for())
    out = {}
    for key in sorted(instance.get_materialized_partitions(dg.AssetKey(asset)) or ()):
        task = task_model_partitions.get_partition_key_from_str(key).keys_by_dimension["task"] if "|" in key else key
        if tasks and task not in tasks:
            continue
        out[key] = defs.load_asset_value(asset, partition_key=key, instance=instance)
    return out


def export_firm(out: str | Path, tasks: list[str] | None = None, instance: dg.DagsterInstance | None = None,
                require_all: bool = True, resources: dict | None = None) -> tuple[int, list[str]]:
    """Write the reward-model training instances of every stored ``firm_scores`` row to ``out`` (JSON
    lines, one per video and dimension); returns how many, and the videos left out with why. Reads
    the stored tables only: nothing is called."""
    from .checklist import export_from_rows, write_export

    scores = stored_partitions("firm_scores", instance, tasks, resources)
    if not scores:
        raise ValueError("no firm_scores stored: run `argus evaluate --protocol firm` (or both) first")
    inputs = stored_partitions("input_instances", instance, tasks, resources)
    prompts = {(df["task"][0] if df.height else k): dict(zip(df["input_id"], df["prompt"])) for k, df in inputs.items()}
    records, left_out = [], []
    for df in scores.values():
        for (task, model), g in df.group_by("task", "model", maintain_order=True):
            recs, why = export_from_rows(g.to_dicts(), prompts.get(task, {}), video_prefix=f"{task}/{model}/",
                                         require_all=require_all)
            records += recs
            left_out += why
    return write_export(out, records), left_out


def best_of_n_report(by: str | dict[str, float], tasks: list[str] | None = None,
                     instance: dg.DagsterInstance | None = None,
                     resources: dict | None = None) -> tuple[pl.DataFrame, dict[str, str]]:
    """Best-of-N picks from the stored ``video_scores`` and ``firm_scores`` (the ``best_of_n`` asset's
    computation), with the comparison against ``$ARGUS_HOME/human/<TASK>.csv`` where it exists."""
    from assets.firm import best_of_n_tables

    instance = instance or local_instance()
    return best_of_n_tables(stored_partitions("video_scores", instance, tasks, resources),
                            stored_partitions("firm_scores", instance, tasks, resources), by, tasks=tasks,
                            human_dir=load_settings().home / "human")


def firm_summary(tasks: list[str] | None = None, instance: dg.DagsterInstance | None = None,
                 resources: dict | None = None) -> pl.DataFrame:
    """Per task and model: videos, mean IF/WC/PQ ratings (1-5) and how many of each are unscored."""
    parts = [df for df in stored_partitions("firm_scores", instance, tasks, resources).values() if df.height]
    if not parts:
        return pl.DataFrame()
    df = pl.concat(parts, how="diagonal_relaxed")
    return (df.group_by("task", "model").agg(
        pl.len().alias("n_videos"),
        *[pl.col(f"{d}_rating").mean().round(2).alias(f"mean_{d}") for d in ("if", "wc", "pq")],
        *[pl.col(f"{d}_rating").is_null().sum().alias(f"{d}_unscored") for d in ("if", "wc", "pq")])
        .sort("task", "model"))
