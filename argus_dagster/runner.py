"""Materializing an evaluation's graph in its Dagster instance, partition by partition.

The CLI is a thin launcher: it registers models as ``candidate_models`` partitions and materializes
the same assets the UI shows, with the same resources (:func:`resources.resources_for`), in the
evaluation's instance (``$ARGUS_HOME/benches/<bench>/<profile>/dagster_home``, Dagster's own storage
as its ``dagster.yaml`` configures it). Every run is one of Dagster's in-process runs, executing its
steps with Dagster's in-process executor, in a worker process; as many run at once as the instance's
run queue allows (``run_queue.max_concurrent_runs``, 4 in the instance file this writes, and the
``argus/judge`` tag limit): the limits the daemon applies to the runs the UI, the sensor and the
schedules queue. What makes them fast lives in the resources every run gets (one VLM client per
process under one bound per machine, the frame pool, the content cache, VLM waits overlapped with
CPU tools inside a stage); the workers overlap one run's reports and bookkeeping with another's
judge requests.

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
# How many runs execute at once: the daemon's queue (the runs the UI, the sensor and the schedules
# launch) and argus evaluate's worker processes alike.
run_queue:
  max_concurrent_runs: 4
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
DEFAULT_RUNS_AT_ONCE = 10  # Dagster's own default for the run queue's max_concurrent_runs


def runs_at_once(instance: dg.DagsterInstance) -> tuple[int, int]:
    """How many runs may execute at once, and how many of them may call the judge: the instance's
    run queue (``run_queue.max_concurrent_runs`` and the ``argus/judge`` tag limit in its
    ``dagster.yaml``), the same limits the daemon applies to runs the UI, sensor and schedule queue."""
    queue = instance.get_concurrency_config().run_queue_config  # None: a coordinator without a queue
    limit = queue.max_concurrent_runs if queue is not None else DEFAULT_RUNS_AT_ONCE
    limit = limit if limit > 0 else DEFAULT_RUNS_AT_ONCE  # -1: no limit; 0: the queue is paused
    judge = limit
    for rule in (queue.tag_concurrency_limits if queue is not None else None) or []:
        if rule.get("key") == JUDGE_TAG and isinstance(rule.get("limit"), int) and rule["limit"] > 0:
            judge = min(judge, rule["limit"])
    return limit, judge


JUDGE_TAG = "argus/judge"  # runs that call the judge (the sensor's and the reconcile's carry it too)


class _Job:
    """One run of the plan: what a worker executes (``spec``), after which jobs, and whether it is stale."""

    def __init__(self, name: str, spec: tuple, after: tuple[str, ...] = (), judge: bool = False,
                 stale: Callable[[], str | None] | None = None, skipped: Callable[[], None] | None = None):
        self.name, self.spec, self.after, self.judge = name, spec, after, judge
        self.stale = stale or (lambda: "forced")
        self.why: str | None = None  # what stale() said when the job was planned
        self.skipped = skipped or (lambda: None)
        self._asked = False

    def status(self, ran: set[str] = frozenset()) -> str | None:
        """``stale()``'s answer, asked once unless a job it comes after has run since."""
        if not self._asked or set(self.after) & ran:
            self.why, self._asked = self.stale(), True
        return self.why


def run_all(tasks: list[str] | None = None, models: list[str] | None = None,
            progress: Callable[[str], None] = print, instance: dg.DagsterInstance | None = None,
            force: bool = False, protocol: str = "videoargus",
            settings: Settings | None = None) -> pl.DataFrame | None:
    """Materialize every asset of one evaluation (``settings``, default this process's) for the
    selected tasks and models; returns the leaderboard (None with ``protocol="firm"``, which makes none).

    Each task's inputs and rubrics are one run, each task x model partition another, the leaderboard
    the last. They execute in worker processes, as many at once as the instance's run queue allows
    (:func:`runs_at_once`): each worker imports the code once and keeps its resources (VLM client,
    frame pool, models) for the runs it executes; the judge's bound holds across them (one bound per
    machine). A partition's run starts once its task's run is done.

    Up-to-date partitions are skipped unless ``force``. ``protocol``: ``videoargus`` (the default),
    ``firm`` (FIRM-Video's ``firm_checklists``, ``firm_verdicts`` and ``firm_scores`` only) or
    ``both`` (the FIRM runs follow each partition's VideoArgus run; they are never skipped as up to
    date, and the content cache answers what they computed before).
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol {protocol!r}: expected one of {PROTOCOLS}")
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
    n_videos = {(t, m): _count_videos(settings.candidates_dir, t, m) for m, ts in found.items() for t in ts if t in task_list}
    PROGRESS.reset(sum(n_videos.values()))
    digests = evaluator_digests(resources)
    # The folders of the environment's resources (in the aws environment the frozen rubrics are on S3).
    frozen = generator_folder(resources["bench"].frozen_rubrics_path(),
                              resources["rubric_generator"].identity(resources["rubric_vlm"]))
    store = scan(open_store(str(settings.candidates_dir)), None) if not force else None

    # Every task's inputs and rubrics first (the partitions wait for them), then the partitions.
    task_jobs: list[_Job] = []
    plan: list[_Job] = []
    for task in task_list:
        if protocol != "firm":
            task_jobs.append(_Job(task, ("task", task), stale=None if force else (
                lambda task=task: task_status(instance, task, settings.bench_dir, frozen, digests))))
        if protocol != "videoargus":
            task_jobs.append(_Job(f"firm {task}", ("firm", task, None, protocol == "firm"),
                                  after=(task,) if protocol == "both" else (), judge=True))
        for model in sorted(m for m, ts in found.items() if task in ts):
            name = f"{task} x {model}"
            if protocol != "firm":
                plan.append(_Job(name, ("partition", task, model), after=(task,), judge=True, stale=None if force else (
                    lambda task=task, model=model: partition_status(
                        instance, task, model, partition_hashes(store.known, task, model), digests)),
                    skipped=lambda n=n_videos.get((task, model), 0): PROGRESS.expect(-n)))
            if protocol != "videoargus":
                plan.append(_Job(f"firm {name}", ("firm", task, model, protocol == "firm"), judge=True,
                                 after=(f"firm {task}",) + ((name,) if protocol == "both" else ())))
    plan = task_jobs + plan
    limit, judge_limit = runs_at_once(instance)
    t_start = time.perf_counter()

    def elapsed() -> str:
        return f"[{time.perf_counter() - t_start:6.1f}s]"

    def finished(job: _Job, outcome: "_Outcome") -> None:
        for line in outcome.failed_checks:
            progress(line)
        why = job.why if job.why and job.why.startswith("stale") else ""  # say why it ran again
        took = f"({outcome.seconds:.1f}s" + (f"; {why}" if why else "") + ")"
        if job.spec[0] == "task":
            progress(f"{elapsed()} {job.name}: inputs and rubrics {took}")
        elif job.spec[0] == "partition":
            retry = outcome.retry
            progress(f"{elapsed()} {job.name}: scored {took}"
                     + (f"; {retry} failed tool steps or unanswered judgments, retried on the next run" if retry else ""))
        elif job.spec[0] == "firm":
            what = f"{job.spec[1]} x {job.spec[2]}: FIRM-Video scores" if job.spec[2] else f"{job.spec[1]}: FIRM-Video checklists"
            progress(f"{elapsed()} {what} {took}")
        else:
            progress(f"{elapsed()} {job.name}")

    def up_to_date(job: _Job) -> None:
        job.skipped()
        what = "inputs and rubrics up to date" if job.spec[0] == "task" else "up to date"
        progress(f"{elapsed()} {job.name}: {what}")

    with _Workers(settings, limit) as workers:
        ran = workers.run(plan, judge_limit, finished, up_to_date)
        # Nothing ran and the stored leaderboard follows every stored video_scores: it is current.
        current = protocol != "firm" and not ran and leaderboard_status(instance) is None
        board = load_stored(instance, "leaderboard") if current else None
        if protocol == "firm":  # FIRM-Video only: no leaderboard (argus evaluate prints FIRM's summary)
            progress(f"{elapsed()} FIRM-Video done")
        elif board is None:
            workers.run([_Job("leaderboard", ("leaderboard",))], judge_limit, finished, up_to_date)
            board = load_stored(instance, "leaderboard")
        else:
            progress(f"{elapsed()} every partition up to date (--force re-materializes)")
        human = sorted(settings.human_dir.glob("*.csv"))
        if human:  # people's ratings are there: say how well the scores agree with them
            from .alignment import ALIGNMENT_COLUMNS, format_alignment

            # Always recomputed (one short run): the ratings themselves may have changed.
            workers.run([_Job("human alignment", ("alignment",))], judge_limit, lambda j, o: None, up_to_date)
            table = load_stored(instance, "human_alignment")
            progress(f"{elapsed()} human alignment (ratings: {', '.join(p.name for p in human)})")
            for (task,), rows in table.group_by("task", maintain_order=True):
                progress(f"\n{task}\n" + format_alignment(rows.select(ALIGNMENT_COLUMNS)))
    return board


class _Outcome:
    """What a worker reports of one run (picklable)."""

    def __init__(self, run_id: str, success: bool, seconds: float, failed_checks: list[str], retry: int = 0):
        self.run_id, self.success, self.seconds = run_id, success, seconds
        self.failed_checks, self.retry = failed_checks, retry


class _Workers:
    """Worker processes that execute the plan's runs, at most ``limit`` at once (started as needed,
    each keeps its imports and resources for every run it executes), and a thread that adds their
    progress counts to this process's :data:`PROGRESS`."""

    def __init__(self, settings: Settings, limit: int):
        self.settings, self.limit = settings, limit
        self.pool = None
        self.events = None
        self.listener = None

    def __enter__(self) -> "_Workers":
        return self

    def _start(self, n: int) -> None:
        import multiprocessing
        import threading
        from concurrent.futures import ProcessPoolExecutor

        # spawn: a fresh interpreter per worker (forking a process with threads, Dagster's or an imported
        # library's, can deadlock the child), started with this process's environment as it is now.
        context = multiprocessing.get_context("spawn")
        self.events = context.SimpleQueue()
        self.pool = ProcessPoolExecutor(max_workers=n, mp_context=context, initializer=_worker_init,
                                        initargs=(self.settings, self.events))
        self.listener = threading.Thread(target=self._listen, daemon=True)
        self.listener.start()

    def _listen(self) -> None:
        while True:
            event = self.events.get()
            if event is None:
                return
            PROGRESS.apply(event)

    def run(self, plan: list[_Job], judge_limit: int, finished: Callable, up_to_date: Callable) -> list[str]:
        """Execute ``plan`` (jobs in order, each after the jobs it names); returns the names of the
        jobs that ran. A failed run stops the plan: the runs under way finish, then it raises."""
        from concurrent.futures import FIRST_COMPLETED, wait
        from concurrent.futures.process import BrokenProcessPool

        pending, done, ran, failed = list(plan), set(), [], []
        running: dict = {}
        while pending or running:
            progressed = True
            while progressed and not failed:
                progressed = False
                for job in list(pending):
                    if not all(a in done for a in job.after) or len(running) >= self.limit:
                        continue
                    if job.judge and sum(j.judge for j in running.values()) >= judge_limit:
                        continue
                    pending.remove(job)
                    progressed = True
                    if job.status(set(ran)) is None:
                        done.add(job.name)
                        up_to_date(job)
                        continue
                    if self.pool is None:
                        self._start(min(self.limit, len(plan)))
                    running[self.pool.submit(_execute, job.spec)] = job
            if not running:
                break
            complete, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in complete:
                job = running.pop(future)
                try:
                    outcome = future.result()
                except BrokenProcessPool:
                    raise SystemExit(f"the worker process running {job.name} died (killed, or out of memory); "
                                     "argus evaluate again resumes from what was stored") from None
                if not outcome.success:
                    failed.append(outcome.run_id)
                    continue
                done.add(job.name)
                ran.append(job.name)
                finished(job, outcome)
        if failed:
            raise SystemExit(f"run {failed[0]} failed; see the Dagster UI (make ui) for its logs")
        return ran

    def __exit__(self, *exc) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)
            self.events.put(None)
            self.listener.join()


_WORKER: dict = {}


def _worker_init(settings: Settings, events) -> None:
    """A worker process: dies with the launcher, opens the evaluation's instance, builds its resources
    once and sends its progress counts to the launcher."""
    import signal

    try:  # Linux: a killed launcher takes its workers with it
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:  # the launcher is already gone
        os._exit(1)
    from assets import ALL_CHECKS, TASK_ASSETS
    from resources import resources_for

    task_keys = {a.key for a in TASK_ASSETS}
    partitioned = [c for c in ALL_CHECKS if c.partitions_def is not None]
    task_checks = [c for c in partitioned if all(k.asset_key in task_keys for k in c.check_keys)]
    _WORKER.update(instance=local_instance(settings), resources=resources_for(settings=settings),
                   task_checks=task_checks, candidate_checks=[c for c in partitioned if c not in task_checks])
    PROGRESS.forward_to(events.put)


def _execute(spec: tuple) -> _Outcome:
    """Execute one run of the plan in this worker (Dagster's in-process run, on the evaluation's instance)."""
    from assets import ALL_ASSETS, ALL_CHECKS, CANDIDATE_ASSETS, TASK_ASSETS
    from assets.alignment import human_alignment
    from assets.leaderboard import leaderboard

    instance, resources = _WORKER["instance"], _WORKER["resources"]
    t0 = time.perf_counter()
    kind = spec[0]
    common = dict(run_config=QUIET, tags={**launcher_tags(), **({JUDGE_TAG: "1"} if kind in ("partition", "firm") else {})},
                  raise_on_error=False)
    if kind == "task":
        checks = _WORKER["task_checks"]
        res = dg.materialize(TASK_ASSETS + checks, selection=TASK_ASSETS + checks, partition_key=spec[1],
                             instance=instance, resources=resources, **common)
    elif kind == "partition":
        checks = _WORKER["candidate_checks"]
        res = dg.materialize(CANDIDATE_ASSETS + TASK_ASSETS + checks, selection=CANDIDATE_ASSETS + checks,
                             partition_key=dg.MultiPartitionKey({"task": spec[1], "model": spec[2]}),
                             instance=instance, resources=resources, **common)
    elif kind == "firm":
        res = _firm_run(instance, resources, spec[1], spec[2], with_inputs=spec[3], **common)
    else:
        res = dg.materialize(ALL_ASSETS + ALL_CHECKS, selection=[leaderboard if kind == "leaderboard" else human_alignment],
                             instance=instance, resources=resources, **common)
    retry = 0
    if kind == "partition" and res.success:
        meta = {m.asset_key.to_user_string(): m.materialization.metadata for m in res.get_asset_materialization_events()}
        retry = (meta["criterion_evidence"]["tool_steps_failed"].value
                 + meta["criterion_scores"]["n_unscored_retryable"].value)
    return _Outcome(res.run_id, res.success, time.perf_counter() - t0, _failed_checks(res) if res.success else [], retry)


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
    if _state(int(pid)) in ("Z", "X"):  # killed, and not yet reaped by whoever adopted it
        return False
    return start in ("?", _start_ticks(int(pid)))


def _state(pid: int) -> str:
    """The process's state letter in ``/proc/<pid>/stat`` (``Z``: a zombie), or ``?``."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


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
    return load_stored(instance or local_instance(settings), "leaderboard")


# ----------------------------------------------------------------------------------------------------
# FIRM-Video and best-of-N (argus evaluate --protocol firm|both, argus export firm, argus best-of-n)
# ----------------------------------------------------------------------------------------------------


def _firm_run(instance: dg.DagsterInstance, resources: dict, task: str, model: str | None = None,
              with_inputs: bool = False, **kw) -> dg.ExecuteInProcessResult:
    """One FIRM-Video run: a task's checklists, or a task x model partition's verdicts and scores (and
    their check). ``with_inputs``: also materialize the input (or candidate) table it reads. ``kw``:
    more of ``dg.materialize``'s arguments (default: quiet console, the CLI's tags)."""
    kw = {"run_config": QUIET, "tags": launcher_tags(), **kw, "instance": instance, "resources": resources}
    from assets import CANDIDATE_ASSETS, FIRM_CANDIDATE_ASSETS, FIRM_CHECKS, FIRM_TASK_ASSETS, TASK_ASSETS
    from assets.candidates import candidate_videos
    from assets.inputs import input_instances

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
    computation), with the comparison against the bench's ``human/<TASK>.csv`` where it exists."""
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
