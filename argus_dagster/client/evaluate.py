"""argus evaluate as a client of the evaluation's Dagster instance: observe, ask Dagster, launch.

It does what the UI, the sensors and a cluster do, in one process: registers models as
``candidate_models`` partitions, observes the sources (:mod:`assets.sources`), asks Dagster what is
missing or stale (the automation conditions of :mod:`assets.automation`, evaluated on the instance's
records: :func:`~argus_dagster.client.runs.plan`) and has Dagster execute exactly that, as in-process
runs of ranges of partitions (:mod:`argus_dagster.client.runs`) with the evaluation's resources in the
evaluation's instance (``$ARGUS_HOME/benches/<bench>/<profile>/dagster_home``). Nothing here decides
what is up to date: a partition whose inputs, code and evaluator are unchanged, and whose last run
left nothing to retry, is not requested. What makes the runs fast lives in the resources (one VLM
client per process under one bound per machine, the frame pool, the content cache, VLM waits
overlapped with CPU tools inside a stage) and in the ranges: few runs, each keeping the judge's slots
full.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping

import dagster as dg
import polars as pl

from argus_dagster.client.asked import control_runs, judge_noise_runs
from argus_dagster.client.instance import ask_dead_run_sensor, local_instance, pool_notice
from argus_dagster.client.results import load_stored
from argus_dagster.client.runs import (
    CANDIDATE_LEVEL,
    IN_FLIGHT,
    PROTOCOL_SELECTION,
    Plan,
    Replan,
    RunSpec,
    execute,
    feeds,
    frozen_rubrics,
    launch,
    plan,
    retry_left,
    runs_of,
    wait_for_writers,
)
from argus_dagster.definitions import ROLES, build_definitions, observe_sources
from argus_dagster.infra.progress import PROGRESS
from argus_dagster.infra.settings import Settings, load_settings
from argus_dagster.infra.storage import Storage
from argus_dagster.method.bench import task_dir
from argus_dagster.method.candidate_store import (
    S3CandidateStore,
    discover,
    open_store,
    partition_hashes,
    scan,
    unknown_models,
    video_hashes,
)
from argus_dagster.method.inputs import EDIT_TASKS
from argus_dagster.outputs.history_words import evaluator_label, reason_lines, split_partition
from argus_dagster.protocols.alignment.metrics import ALIGNMENT_COLUMNS, format_alignment
from argus_dagster.records.automation import planned_in_flight
from argus_dagster.records.history import COMMAND_TAG, EVALUATOR_TAG
from argus_dagster.records.lineage import latest_record

PROTOCOLS = ("videoargus", "firm", "both", "vefx")


@dataclass(frozen=True)
class Evaluation:
    """What one command works on: the evaluation's settings, instance, definitions and storage, its
    selected tasks and ``(task, model)`` partitions, the candidate store's scan (``known``) and each
    partition's number of videos."""

    settings: Settings
    instance: dg.DagsterInstance
    defs: dg.Definitions
    storage: Storage
    tasks: list[str]
    partitions: set[tuple[str, str]]
    known: dict
    n_videos: dict[tuple[str, str], int]


def _prepare(tasks, models, progress, instance, settings, defs: dg.Definitions | None = None,
             protocols: tuple[str, ...] = ()) -> Evaluation:
    """Find the models, make them ``candidate_models`` partitions, and observe the sources: what
    changed is recorded with its new data version (:mod:`assets.sources`). ``protocols``: those whose
    assets the definitions built here let Dagster be asked about."""
    settings = settings or load_settings()
    instance = instance or local_instance(settings)
    defs = defs or build_definitions(settings, protocols=protocols)
    resources = defs.resources
    assert resources is not None  # build_definitions always binds the evaluation's resources
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
    observe_sources(instance, resources, task_list, partitions, store.known)
    return Evaluation(settings=settings, instance=instance, defs=defs, storage=storage, tasks=task_list,
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
    _say_reasons(the_plan, ev, progress)
    return {a: sorted(p for p in parts if p is not None) for a, parts in the_plan.requested.items()}


def stored_criteria(ev: Evaluation, the_plan: Plan) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], list[str]]]:
    """What the stored ``criterion_scores`` say the plan's reasons touch: per ``(task, model)`` whose
    criteria are judged again, its criterion judgments; per ``(task, input_id)`` a reason names, the
    criteria its rubric holds now (the rubric a prompt edit writes again)."""
    named = {x for ids in the_plan.inputs_of.values() for x in ids}
    wanted = {p for p in the_plan.requested.get("criterion_scores", set()) if p}
    named_tasks = {task for task, _ in named}
    wanted |= {str(dg.MultiPartitionKey({"task": t, "model": m})) for t, m in ev.partitions if t in named_tasks}
    judgments: dict[tuple[str, str], int] = {}
    rubric_now: dict[tuple[str, str], set[str]] = {}
    for key in sorted(wanted):
        table = load_stored(ev.instance, "criterion_scores", key, storage=ev.storage)
        if table is None or not table.height:
            continue
        task, model = split_partition(key)
        judgments[(task, model)] = table.filter(pl.col("criterion_id").is_not_null()).height
        for r in table.filter(pl.col("criterion_id").is_not_null()).select("input_id", "criterion_id").unique().iter_rows():
            if (task, r[0]) in named:
                rubric_now.setdefault((task, r[0]), set()).add(r[1])
    return judgments, {k: sorted(v) for k, v in rubric_now.items()}


def _say_reasons(the_plan: Plan, ev: Evaluation, progress: Callable[[str], None], prefix: str = "") -> None:
    """Why the plan runs what it runs, each reason with what it touches: partitions, videos and
    criterion judgments, or the inputs it names with their videos and the criteria of their rubrics
    (:func:`~argus_dagster.outputs.history_words.reason_lines`)."""
    per_input: dict[tuple[str, str], int] = {}
    for task, input_id in {x for ids in the_plan.inputs_of.values() for x in ids}:
        per_input[(task, input_id)] = sum(1 for t, m in ev.n_videos if t == task
                                          for i, _ in video_hashes(partition_hashes(ev.known or {}, task, m), [input_id])
                                          if i == input_id)
    judgments, rubric_now = stored_criteria(ev, the_plan)
    lines = reason_lines(the_plan.why, the_plan.requested, ev.n_videos, the_plan.inputs_of, per_input,
                         judgments=judgments, rubric_now=rubric_now)
    if lines:
        progress(f"{prefix}why (what changed: what it runs again):")
        for line in lines:
            progress(f"{prefix}  {line}")


def _say_up_to_date(runs: list[RunSpec], task_list, partitions, n_videos, progress, elapsed,
                    instance: dg.DagsterInstance) -> int:
    """A line for each selected task and partition the first runs leave alone: up to date, or being
    materialized by a run in flight (another command's, the UI's, the daemon's), which it names; returns
    how many are in flight."""
    ran_tasks = {t for run in runs if run.kind == "task" for t in run.keys}
    ran_keys = {k for run in runs if run.kind == "partition" for k in run.keys}
    busy = {p: run_id for run_id, planned in planned_in_flight(instance, IN_FLIGHT).items() for _, p in planned}

    def state(key: str) -> str:
        return f"being materialized by run {busy[key][:8]}" if key in busy else "up to date"

    for task in task_list:
        if task not in ran_tasks:
            progress(f"{elapsed()} {task}: inputs and rubrics {state(task)}")
    for task, model in sorted(partitions):
        key = str(dg.MultiPartitionKey({"task": task, "model": model}))
        if task not in ran_tasks and key not in ran_keys:
            PROGRESS.expect(-n_videos.get((task, model), 0))
            progress(f"{elapsed()} {task} x {model}: {state(key)}")
    return sum(1 for t in task_list if t not in ran_tasks and t in busy) + sum(
        1 for t, m in partitions if str(dg.MultiPartitionKey({"task": t, "model": m})) in busy)


# The progress line's phase while a run of each kind goes: a task's inputs and rubrics, a range of
# partitions (evidence, then judging as their first judgments come in), the leaderboard and overview.
RUN_PHASE = {"task": "rubrics", "partition": "evidence", "leaderboard": "reports", "site": "reports"}


def _run_and_say(run: RunSpec, instance, resources, progress, elapsed, the_plan: Plan | None = None,
                 replan_after_wait: bool = False) -> None:
    """Launch one run of the plan and say what it did (and why, as the conditions said); a run in flight
    that materializes one of its partitions is waited for first (:func:`~.runs.execute`; with
    ``replan_after_wait``, :class:`~.runs.Replan` is raised after the wait)."""
    the_plan = the_plan or Plan({})
    PROGRESS.phase(RUN_PHASE.get(run.kind, "reports"))  # the progress line's phase, from this run on
    t0 = time.perf_counter()
    result = launch(instance, resources, run, progress, replan_after_wait)
    keys = run.keys
    seconds = f"{time.perf_counter() - t0:.1f}s" + (f" for {len(keys)} partitions" if len(keys) > 1 else "")

    def took(key) -> str:
        why = the_plan.reasons(run.selection, key)
        return f"({seconds}" + (f"; {why}" if why and why != "new" else "") + ")"

    if run.kind == "task":
        frozen = frozen_rubrics(result)
        for task in keys:
            n, folders = frozen.get(task, (0, []))
            progress(f"{elapsed()} {task}: inputs and rubrics {took(task)}"
                     + (f"; {n} new rubric{'s' if n != 1 else ''} frozen in {', '.join(folders)}" if n else ""))
    elif run.kind == "partition":
        retry = retry_left(result)
        for key in keys:
            task, model = split_partition(key)
            left = retry.get(key, 0)
            progress(f"{elapsed()} {task} x {model}: scored {took(key)}"
                     + (f"; {left} failed tool steps or unanswered judgments, retried on the next run" if left else ""))
    elif run.kind == "site":
        ledger = ", with the cost ledger" if "costs" in run.selection else ""
        progress(f"{elapsed()} pages: overview, sample browser, index of evaluations{ledger} {took(None)}")
    else:
        what = " and ".join(w for name, w in (("leaderboard", "leaderboard"), ("costs", "cost ledger"))
                            if name in run.selection)
        pages = " and pages (overview, sample browser, index of evaluations)" if "site" in run.selection else ""
        progress(f"{elapsed()} {what}{pages} {took(None)}")


BOARD = ("leaderboard", "costs")  # the unpartitioned tables a pass brings up to date after its partitions


def _videoargus(ev: Evaluation, progress, elapsed, force: bool, tags: dict[str, str],
                site_along: bool = False) -> tuple[pl.DataFrame | None, bool]:
    """As the daemon's ticks do: ask, launch what is requested, ask again (a task's new rubrics make its
    candidate partitions' inputs updated: the next question requests them), until nothing is; then
    the leaderboard, once, after the partitions it follows (``site_along``: with the pages in the same
    run, when nothing else they show comes after it). Returns the leaderboard and whether the pages
    are settled: this command's last run wrote them (nothing they show has moved since, by this
    command), or it ran nothing and Dagster, asked about the pages with its first question, requested
    none of them."""
    instance, defs, resources = ev.instance, ev.defs, ev.defs.resources
    model_order = list(instance.get_dynamic_partitions("candidate_models"))
    done: set[tuple[str, str | None]] = set()  # (asset, partition) materialized by this command
    board_due: set[str] = set()  # the unpartitioned assets requested beside partitions: run after them
    ran_any = False
    forced = force  # the forced round, kept until it has run (a wait for another run asks again)
    site_last = False  # whether the last run this command made wrote the pages
    # With the pages riding along, the first question asks about them too (one evaluation of the
    # conditions, not two, for a command that finds nothing to do): their answer is kept, not run here.
    pages_asked = site_along
    pages_due = True  # whether the pages were requested when first asked (or never asked)
    while True:
        the_plan = plan(instance, defs, ev.tasks, ev.partitions, forced, done,
                        selection=(*PROTOCOL_SELECTION["videoargus"], *ROLES.site) if pages_asked else None)
        if pages_asked:
            pages_due = any(the_plan.partitions(name) for name in ROLES.site)
            the_plan = replace(the_plan, requested={a: p for a, p in the_plan.requested.items() if a not in ROLES.site})
            pages_asked = False
        if the_plan.waiting and not ran_any:
            progress(f"{elapsed()} {the_plan.waiting}")
        runs = [replace(run, selection=[*run.selection, *ROLES.site]) if run.kind == "leaderboard" and site_along
                else run for run in runs_of(the_plan, model_order, tags)]
        if any(run.kind == "leaderboard" for run in runs) and len(runs) > 1:
            board_due |= {a for run in runs if run.kind == "leaderboard" for a in run.selection} - set(ROLES.site)
            runs = [run for run in runs if run.kind != "leaderboard"]  # after the partitions they follow
        if not runs:
            break
        if not ran_any:
            _say_up_to_date(runs, ev.tasks, ev.partitions, ev.n_videos, progress, elapsed, instance)
            _say_reasons(the_plan, ev, progress, f"{elapsed()} ")
        ran_any = True
        try:
            for run in runs:
                _run_and_say(run, instance, resources, progress, elapsed, the_plan, replan_after_wait=not forced)
                site_last = set(ROLES.site) <= set(run.selection)
                done |= {(a, k) for a in run.selection for k in (run.keys or (None,))}
                board_due -= set(run.selection)
        except Replan:
            continue  # another run materialized what this one would: ask Dagster again
        forced = False
        if not feeds(defs, {a for run in runs for a in run.selection}):
            break  # what ran updates no automated asset: asking again would request nothing new
    # What this command shows follows what it scored: a run in flight that writes the leaderboard (or the
    # ledger) read its inputs when it started, perhaps before this command's runs; wait for it, then ask again.
    if ran_any and not board_due and wait_for_writers(instance, RunSpec("leaderboard", list(BOARD)), progress):
        again = plan(instance, defs, ev.tasks, ev.partitions, selection=BOARD)
        board_due |= {name for name in BOARD if None in again.partitions(name)}
    if load_stored(instance, "leaderboard", storage=ev.storage) is None:
        board_due |= set(BOARD)
    if board_due:
        board_run = RunSpec("leaderboard", [*sorted(board_due), *(ROLES.site if site_along else ())], tags=tags)
        _run_and_say(board_run, instance, resources, progress, elapsed)
        site_last = site_along
    board = load_stored(instance, "leaderboard", storage=ev.storage)
    if not ran_any:
        busy = _say_up_to_date([], ev.tasks, ev.partitions, ev.n_videos, progress, elapsed, instance)
        progress(f"{elapsed()} " + (f"nothing to run here: {busy} being materialized by other runs" if busy
                                    else "every partition up to date (--force re-materializes)"))
        # Nothing ran, and Dagster did not request the pages when asked: no question about them is left.
        return board, site_last or not (pages_due or busy)
    return board, site_last


def run_all(tasks: list[str] | None = None, models: list[str] | None = None,
            progress: Callable[[str], None] = print, instance: dg.DagsterInstance | None = None,
            force: bool = False, protocol: str = "videoargus",
            settings: Settings | None = None, defs: dg.Definitions | None = None,
            run_tags: dict[str, str] | None = None, repeat: tuple[int, int] = (0, 0),
            controls: int = 0) -> pl.DataFrame | None:
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
    (FIRM-Video's ``firm_checklists``, ``firm_verdicts`` and ``firm_scores``, with the input and
    candidate tables they read), ``both`` (FIRM-Video's loop, then VideoArgus's, whose reports link
    each video's FIRM-Video page) or ``vefx``
    (VEFX-Bench's ``vefx_scores`` of the TV2V and TSV2V partitions and ``vefx_leaderboard``). A
    protocol goes through the same loop (:func:`_protocol`): Dagster says which of its partitions are
    missing or out of date, and an up-to-date protocol runs nothing (``--force`` runs it again; the
    content cache answers what it computed before). ``defs``: the evaluation's definitions when the
    caller built them already (with the protocol's conditions: ``build_definitions(protocols=...)``).
    ``run_tags``: added to every run of the pass (the ``evaluate`` job's names its own run).
    ``repeat``: ``(K, N)`` (``--repeat K --repeat-videos N``): after VideoArgus's loop, N videos of each
    partition judged K times more (``judge_noise``), then the leaderboard again, which reads them.
    ``controls``: N (``--controls N``): control candidates of N videos of each partition, then their
    table (``control_scores``, ``controls``), before the pages, which show it.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol {protocol!r}: expected one of {PROTOCOLS}")
    ev = _prepare(tasks, models, progress, instance, settings, defs, PROTOCOLS_RUN[protocol])
    instance, resources = ev.instance, ev.defs.resources
    assert resources is not None  # build_definitions always binds the evaluation's resources
    PROGRESS.reset(sum(ev.n_videos.values()))
    t_start = time.perf_counter()

    def elapsed() -> str:
        return f"[{time.perf_counter() - t_start:6.1f}s]"

    tags = {**command_tags(resources), **(run_tags or {})}  # one pass: every run of it, whichever loop launches it
    for name in PROTOCOLS_RUN[protocol]:  # first: each video's report then links its FIRM-Video page
        _protocol(ev, name, progress, elapsed, force, tags)
    human = sorted(resources["bench"].human_files(ev.storage))
    # The pages ride along with the leaderboard's run when nothing they show follows it (no alignment).
    asked = bool(repeat[0] or controls)  # then the pages follow what these add
    board, site_written = (_videoargus(ev, progress, elapsed, force, tags, site_along=not human and not asked)
                           if protocol in ("videoargus", "both") else (None, False))
    if repeat[0] and board is not None:
        board = judge_noise_runs(ev, repeat, progress, elapsed, tags)
    if controls and board is not None:
        control_runs(ev, controls, progress, elapsed, tags)
    if human:  # people's ratings are there: say how well the scores agree with them
        # Always recomputed (one short run): the ratings themselves may have changed.
        execute(instance, resources, RunSpec("alignment", ["human_alignment"], tags=tags))
        table = load_stored(instance, "human_alignment", storage=ev.storage)
        assert table is not None  # the alignment run above stored it
        progress(f"{elapsed()} human alignment (ratings: {', '.join(f'{t}.csv' for t in human)})")
        for (task,), rows in table.group_by("task", maintain_order=True):
            progress(f"\n{task}\n" + format_alignment(rows.select(ALIGNMENT_COLUMNS)))
    if not site_written:  # else its last run wrote them, or it ran nothing and they were not requested
        _site(ev, progress, elapsed, force, tags)
    return board


def _site(ev: Evaluation, progress, elapsed, force: bool, tags: dict[str, str]) -> None:
    """The pages, once, after everything they show: Dagster says whether the ``site`` asset is missing
    or one of its inputs moved (this command's runs, or another's), and one run writes it."""
    latest = latest_record(ev.instance, ROLES.site[0])
    if force and latest is not None:  # forced once: not again when this command's own run wrote them
        run = ev.instance.get_run_by_id(latest.run_id)
        force = run is None or run.tags.get(COMMAND_TAG) != tags.get(COMMAND_TAG)
    # The cost ledger with them, where a protocol's run moved a stage it sums (FIRM-Video, VEFX-Bench).
    asked = ("costs", *ROLES.site)
    while True:
        the_plan = plan(ev.instance, ev.defs, ev.tasks, ev.partitions, force, selection=asked)
        wanted = [name for name in asked if None in the_plan.partitions(name)]
        if wanted == ["costs"]:  # the pages show the ledger: they follow it in the same run
            wanted += list(ROLES.site)
        if wanted:  # one run; after another's run that writes them, ask again: it may have done the work
            try:
                _run_and_say(RunSpec("site", wanted, tags=tags), ev.instance, ev.defs.resources, progress, elapsed,
                             the_plan, replan_after_wait=True)
            except Replan:
                continue
            return
        # Nothing asked: the pages are up to date, or another run writes them (or what they show) now,
        # with what it read when it started, perhaps before this command's last run. Wait for it, then
        # ask again: what it missed makes the pages stale by Dagster's records, and this command writes them.
        if not wait_for_writers(ev.instance, RunSpec("site", [*asked, *_page_inputs(ev.defs)]), progress):
            return


def _page_inputs(defs: dg.Definitions) -> list[str]:
    """The unpartitioned assets the pages show (the leaderboard, the ledger, human alignment, ...)."""
    graph = defs.resolve_asset_graph()
    return sorted(k.to_user_string() for name in ROLES.site for k in graph.get(dg.AssetKey(name)).parent_keys
                  if graph.get(k).partitions_def is None)


# The protocols each --protocol runs before VideoArgus's loop (or alone), each a loop of its own.
PROTOCOLS_RUN = {"videoargus": (), "both": ("firm",), "firm": ("firm",), "vefx": ("vefx",)}
# What a protocol's run did, in words: per task, per task x model, or once.
PROTOCOL_WORDS = {"firm": {"task": "FIRM-Video checklists", "partition": "FIRM-Video scores"},
                  "vefx": {"task": "inputs", "partition": "VEFX scores", "board": "VEFX leaderboard"}}
PROTOCOL_NAMES = {"firm": "FIRM-Video", "vefx": "VEFX-Bench"}


def _protocol(ev: Evaluation, name: str, progress, elapsed, force: bool, tags: dict[str, str]) -> None:
    """A protocol's loop, as VideoArgus's: ask Dagster which of the protocol's assets (and the input
    and candidate tables they read) are missing or out of date (:data:`~.runs.PROTOCOL_SELECTION`,
    whose conditions the command line's definitions give them), launch that, ask again, until
    nothing is requested. VEFX-Bench judges edits: the other tasks are said and left out."""
    instance, defs, resources = ev.instance, ev.defs, ev.defs.resources
    assert resources is not None  # build_definitions always binds the evaluation's resources
    tasks, partitions = ev.tasks, ev.partitions
    if name == "vefx":
        for task in [t for t in tasks if t not in EDIT_TASKS]:
            progress(f"{elapsed()} {task}: skipped, VEFX-Bench's protocol judges edits (TV2V, TSV2V)")
        tasks = [t for t in tasks if t in EDIT_TASKS]
        partitions = {(t, m) for t, m in partitions if t in EDIT_TASKS}
    selection = PROTOCOL_SELECTION[name]
    model_order = list(instance.get_dynamic_partitions("candidate_models"))
    done: set[tuple[str, str | None]] = set()
    ran_any, words = False, PROTOCOL_WORDS[name]
    forced = force
    while tasks:
        the_plan = plan(instance, defs, tasks, partitions, forced, done, selection)
        runs = runs_of(the_plan, model_order, tags, protocol=name)
        if not runs:
            break
        if not ran_any:
            _say_reasons(the_plan, ev, progress, f"{elapsed()} ")
        ran_any = True
        try:
            for run in runs:
                t0 = time.perf_counter()
                launch(instance, resources, run, progress, replan_after_wait=not forced)
                seconds = f"{time.perf_counter() - t0:.1f}s" + (f" for {len(run.keys)} partitions" if len(run.keys) > 1 else "")
                level = ("partition" if any(n in CANDIDATE_LEVEL for n in run.selection) and run.keys
                         else "task" if run.keys else "board")
                for key in run.keys or (None,):
                    task, model = split_partition(key) if key else ("", "")
                    where = f"{task} x {model}" if model else task
                    what = words.get(level) or ", ".join(run.selection)
                    progress(f"{elapsed()} " + (f"{where}: " if where else "") + f"{what} ({seconds})")
                done |= {(a, k) for a in run.selection for k in (run.keys or (None,))}
        except Replan:
            continue
        forced = False
        if not feeds(defs, {a for run in runs for a in run.selection}, selection):
            break
    progress(f"{elapsed()} {PROTOCOL_NAMES[name]} " + ("done" if ran_any else "up to date (--force runs it again)"))


def command_tags(resources: Mapping[str, Any]) -> dict[str, str]:
    """The tags of every run of one command: its id (its runs are one pass, :mod:`~.results`) and the
    judge it evaluates with."""
    return {COMMAND_TAG: uuid.uuid4().hex[:12],
            EVALUATOR_TAG: evaluator_label(resources["judge"].identity(resources["vlm"]))}


def _count_videos(candidates: Path | str, task: str, model: str, storage: Storage) -> int:
    if str(candidates).startswith("s3://"):
        return sum(1 for e in S3CandidateStore(str(candidates), storage).entries() if e.task == task and e.model == model)
    folder = task_dir(candidates, task)
    return sum(1 for p in (folder / model).iterdir() if p.is_file()) if folder and (folder / model).is_dir() else 0
