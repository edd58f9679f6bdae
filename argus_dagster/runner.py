"""Materializing an evaluation's graph in its Dagster instance, partition by partition.

The CLI is a thin launcher: it registers models as ``candidate_models`` partitions and materializes
the same assets the UI shows, with the same resources (:func:`resources.resources_for`), in the
evaluation's instance (``$ARGUS_HOME/benches/<bench>/<profile>/dagster_home``, Dagster's own storage
as its ``dagster.yaml`` configures it). Every run is one of Dagster's in-process runs, one after
another, each executing its steps with Dagster's in-process executor; what makes them fast lives in
the resources every run gets (one VLM client and its bound per process, the frame pool, the content
cache, VLM waits overlapped with CPU tools inside a stage).

A partition that is up to date is not run again. Whether it is, is asked of what Dagster recorded
with its materializations, whoever launched them (``assets.staleness``: the same question the
candidate-store sensor and the nightly reconcile ask): code versions, the upstream materializations
each asset read and their data versions, the bench files, video hashes and evaluator the assets
recorded, and work left to retry (a rubric that could not be generated, a tool step that failed, a
judgment the VLM did not answer). A row with a permanent error leaves its partition up to date.
``force=True`` (``--force``) re-materializes every partition; the content cache then answers every
tool step and judgment.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

import dagster as dg
import polars as pl

from .bench import discover, task_dir
from .progress import PROGRESS
from .settings import Settings, load_settings

QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}

INSTANCE_YAML = """\
# The Dagster instance of one evaluation (argus evaluate, argus demo, make ui).
# Dagster's anonymous usage statistics: set enabled to true to send them.
telemetry:
  enabled: false
# Runs' event logs keep log lines of INFO and above (every Dagster event is kept whatever its level):
# the IO manager's DEBUG lines repeat each materialization's path. DEBUG keeps them too.
python_logs:
  python_log_level: INFO
"""


def local_instance(settings: Settings | None = None) -> dg.DagsterInstance:
    """The Dagster instance of an evaluation (default: this process's, see ``load_settings``): the
    one ``DAGSTER_HOME`` names, pointed at the evaluation's ``dagster_home``, with Dagster's storage
    as its ``dagster.yaml`` says (default: SQLite files there)."""
    settings = settings or load_settings()
    home = settings.dagster_home
    home.mkdir(parents=True, exist_ok=True)
    ensure_instance_yaml(home)
    os.environ["DAGSTER_HOME"] = str(home)  # Dagster's own variable: the instance DagsterInstance.get() opens
    return dg.DagsterInstance.get()


def ensure_instance_yaml(dagster_home: Path) -> Path:
    """The instance's own ``dagster.yaml`` (:data:`INSTANCE_YAML`), written where there is none."""
    config = Path(dagster_home) / "dagster.yaml"
    if not config.is_file():
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(INSTANCE_YAML)
    return config


PROTOCOLS = ("videoargus", "firm", "both")


def run_all(tasks: list[str] | None = None, models: list[str] | None = None,
            progress: Callable[[str], None] = print, instance: dg.DagsterInstance | None = None,
            force: bool = False, protocol: str = "videoargus",
            settings: Settings | None = None) -> pl.DataFrame | None:
    """Materialize every asset of one evaluation (``settings``, default this process's) for the
    selected tasks and models; returns the leaderboard (None with ``protocol="firm"``, which makes none).

    Up-to-date partitions are skipped unless ``force``. ``protocol``: ``videoargus`` (the default),
    ``firm`` (FIRM-Video's ``firm_checklists``, ``firm_verdicts`` and ``firm_scores`` only) or
    ``both`` (the FIRM runs follow each partition's VideoArgus run; they are never skipped as up to
    date, and the content cache answers what they computed before).
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol {protocol!r}: expected one of {PROTOCOLS}")
    from assets import ALL_ASSETS, ALL_CHECKS, CANDIDATE_ASSETS, TASK_ASSETS
    from assets.leaderboard import leaderboard
    from assets.staleness import evaluator_digests, generator_folder, leaderboard_status, partition_status, task_status
    from resources import resources_for

    from .candidate_store import open_store, partition_hashes, scan

    settings = settings or load_settings()
    instance = instance or local_instance(settings)
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
    resources = resources_for(settings=settings)
    # The partitioned checks run with the assets they guard; a failed one is reported, not fatal.
    task_keys = {a.key for a in TASK_ASSETS}
    partitioned = [c for c in ALL_CHECKS if c.partitions_def is not None]
    task_checks = [c for c in partitioned if all(k.asset_key in task_keys for k in c.check_keys)]
    candidate_checks = [c for c in partitioned if c not in task_checks]
    t_start = time.perf_counter()
    n_videos = {(t, m): _count_videos(settings.candidates_dir, t, m) for m, ts in found.items() for t in ts if t in task_list}
    PROGRESS.reset(sum(n_videos.values()))
    digests = evaluator_digests(resources)
    # The folders of the environment's resources (in the aws environment the frozen rubrics are on S3).
    frozen = generator_folder(resources["bench"].frozen_rubrics_path(),
                              resources["rubric_generator"].identity(resources["rubric_vlm"]))
    store = scan(open_store(str(settings.candidates_dir)), None) if not force else None
    ran: list[str] = []

    def elapsed() -> str:
        return f"[{time.perf_counter() - t_start:6.1f}s]"

    def videoargus_task_run(task: str) -> None:
        t0 = time.perf_counter()
        why = "forced" if force else task_status(instance, task, settings.bench_dir, frozen, digests)
        if why is None:
            progress(f"{elapsed()} {task}: inputs and rubrics up to date")
            return
        res = dg.materialize(TASK_ASSETS + task_checks, selection=TASK_ASSETS + task_checks, partition_key=task,
                             instance=instance, resources=resources, run_config=QUIET, tags=launcher_tags())
        _check(res, progress)
        ran.append(task)
        progress(f"{elapsed()} {task}: inputs and rubrics ({time.perf_counter() - t0:.1f}s)")

    def videoargus_model_run(task: str, model: str) -> None:
        t0 = time.perf_counter()
        key = dg.MultiPartitionKey({"task": task, "model": model})
        why = "forced" if force else partition_status(instance, task, model, partition_hashes(store.known, task, model),
                                                      digests)
        if why is None:
            PROGRESS.expect(-n_videos.get((task, model), 0))
            progress(f"{elapsed()} {task} x {model}: up to date")
            return
        res = dg.materialize(CANDIDATE_ASSETS + TASK_ASSETS + candidate_checks,
                             selection=CANDIDATE_ASSETS + candidate_checks, partition_key=key, instance=instance,
                             resources=resources, run_config=QUIET, tags=launcher_tags())
        _check(res, progress)
        meta = {m.asset_key.to_user_string(): m.materialization.metadata for m in res.get_asset_materialization_events()}
        retry = (meta["criterion_evidence"]["tool_steps_failed"].value
                 + meta["criterion_scores"]["n_unscored_retryable"].value)
        ran.append(f"{task} x {model}")
        progress(f"{elapsed()} {task} x {model}: scored ({time.perf_counter() - t0:.1f}s)"
                 + (f"; {retry} failed tool steps or unanswered judgments, retried on the next run" if retry else ""))

    def firm_run(task: str, model: str | None = None) -> None:
        t0 = time.perf_counter()
        _check(_firm_run(instance, resources, task, model, with_inputs=protocol == "firm"), progress)
        ran.append(f"firm {task}" + (f" x {model}" if model else ""))
        what = f"{task} x {model}: FIRM-Video scores" if model else f"{task}: FIRM-Video checklists"
        progress(f"{elapsed()} {what} ({time.perf_counter() - t0:.1f}s)")

    for task in task_list:
        if protocol != "firm":
            videoargus_task_run(task)
        if protocol != "videoargus":
            firm_run(task)
        for model in sorted(m for m, ts in found.items() if task in ts):
            if protocol != "firm":
                videoargus_model_run(task, model)
            if protocol != "videoargus":
                firm_run(task, model)

    # Nothing ran and the stored leaderboard follows every stored video_scores: it is current.
    current = protocol != "firm" and not ran and leaderboard_status(instance) is None
    board = load_stored(instance, "leaderboard") if current else None
    if protocol == "firm":  # FIRM-Video only: no leaderboard (argus evaluate prints FIRM's summary)
        progress(f"{elapsed()} FIRM-Video done")
    elif board is None:
        result = dg.materialize(ALL_ASSETS + ALL_CHECKS, selection=[leaderboard],
                                instance=instance, resources=resources, run_config=QUIET, tags=launcher_tags())
        _check(result, progress)
        board = result.output_for_node("leaderboard")
        progress(f"{elapsed()} leaderboard")
    else:
        progress(f"{elapsed()} every partition up to date (--force re-materializes)")
    human = sorted(settings.human_dir.glob("*.csv"))
    if human:  # people's ratings are there: say how well the scores agree with them
        from assets.alignment import human_alignment

        from .alignment import ALIGNMENT_COLUMNS, format_alignment

        # Always recomputed (one short run): the ratings themselves may have changed.
        res = dg.materialize(ALL_ASSETS + ALL_CHECKS, selection=[human_alignment], instance=instance,
                             resources=resources, run_config=QUIET, tags=launcher_tags())
        _check(res)
        table = res.output_for_node("human_alignment")
        progress(f"{elapsed()} human alignment (ratings: {', '.join(p.name for p in human)})")
        for (task,), rows in table.group_by("task", maintain_order=True):
            progress(f"\n{task}\n" + format_alignment(rows.select(ALIGNMENT_COLUMNS)))
    return board


def load_stored(instance: dg.DagsterInstance, asset: str, partition: str | None = None) -> pl.DataFrame | None:
    """The table the latest materialization of ``asset`` (``partition``) stored, read from the path
    its IO manager recorded in the materialization's metadata (as lineage and the sensor read it);
    None when there is none or it cannot be read."""
    from assets.lineage import latest_record, stored_table

    return stored_table(latest_record(instance, asset, partition))


def _count_videos(candidates: Path | str, task: str, model: str) -> int:
    if str(candidates).startswith("s3://"):
        from .candidate_store import S3CandidateStore

        return sum(1 for e in S3CandidateStore(str(candidates)).entries() if e.task == task and e.model == model)
    folder = task_dir(candidates, task)
    return sum(1 for p in (folder / model).iterdir() if p.is_file()) if folder and (folder / model).is_dir() else 0


def row_errors(tasks: list[str] | None = None, models: list[str] | None = None,
               instance: dg.DagsterInstance | None = None,
               settings: Settings | None = None) -> list[tuple[str, str, str]]:
    """The row errors stored for the evaluated bench (the tasks and models given, else all)."""
    settings = settings or load_settings()
    found = discover(settings.candidates_dir, settings.bench_dir).models
    if models:
        found = {m: t for m, t in found.items() if m in models}
    task_list = sorted(tasks or {t for ts in found.values() for t in ts})
    return _row_errors(instance or local_instance(settings), task_list, found)


def _row_errors(instance: dg.DagsterInstance, tasks: list[str],
                found: dict[str, list[str]]) -> list[tuple[str, str, str]]:
    """``(where, id, error)`` of every row with an error in the evaluated partitions, as stored."""
    out: list[tuple[str, str, str]] = []

    def stored(asset: str, key) -> pl.DataFrame | None:
        if not instance.get_materialized_partitions(dg.AssetKey(asset)) & {str(key)}:
            return None
        return load_stored(instance, asset, str(key))

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


def _check(result: dg.ExecuteInProcessResult, progress: Callable[[str], None] = print) -> None:
    if not result.success:
        raise SystemExit(f"run {result.run_id} failed; see the Dagster UI (make ui) for its logs")
    for ev in result.get_asset_check_evaluations():
        if not ev.passed:
            where = f" ({ev.partition})" if ev.partition else ""
            progress(f"  check {ev.check_name} on {ev.asset_key.to_user_string()}{where} did not pass: "
                     "see its metadata in the UI")


def current_leaderboard(instance: dg.DagsterInstance | None = None,
                        settings: Settings | None = None) -> pl.DataFrame | None:
    """The last materialized leaderboard, read from storage (no recomputation)."""
    return load_stored(instance or local_instance(settings), "leaderboard")


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
                      settings: Settings | None = None) -> dict[str, pl.DataFrame]:
    """Every materialized partition of ``asset`` as stored (of ``tasks`` only, when given), by key."""
    from assets.partitions import task_model_partitions

    instance = instance or local_instance(settings)
    out = {}
    for key in sorted(instance.get_materialized_partitions(dg.AssetKey(asset)) or ()):
        task = task_model_partitions.get_partition_key_from_str(key).keys_by_dimension["task"] if "|" in key else key
        if tasks and task not in tasks:
            continue
        table = load_stored(instance, asset, key)
        if table is not None:
            out[key] = table
    return out


def export_firm(out: str | Path, tasks: list[str] | None = None, instance: dg.DagsterInstance | None = None,
                require_all: bool = True, settings: Settings | None = None) -> tuple[int, list[str]]:
    """Write the reward-model training instances of every stored ``firm_scores`` row to ``out`` (JSON
    lines, one per video and dimension); returns how many, and the videos left out with why. Reads
    the stored tables only: nothing is called."""
    from .checklist import export_from_rows, write_export

    scores = stored_partitions("firm_scores", instance, tasks, settings)
    if not scores:
        raise ValueError("no firm_scores stored: run `argus evaluate --protocol firm` (or both) first")
    inputs = stored_partitions("input_instances", instance, tasks, settings)
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
                     settings: Settings | None = None) -> tuple[pl.DataFrame, dict[str, str]]:
    """Best-of-N picks from the stored ``video_scores`` and ``firm_scores`` (the ``best_of_n`` asset's
    computation), with the comparison against ``$ARGUS_HOME/human/<TASK>.csv`` where it exists."""
    from assets.firm import best_of_n_tables

    settings = settings or load_settings()
    instance = instance or local_instance(settings)
    return best_of_n_tables(stored_partitions("video_scores", instance, tasks, settings),
                            stored_partitions("firm_scores", instance, tasks, settings), by, tasks=tasks,
                            human_dir=settings.human_dir)


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
