"""``argus demo`` and ``argus evaluate``: the evaluation's definitions built, Dagster asked what to run and
the runs launched (:mod:`argus_dagster.client.evaluate`), then the leaderboard, FIRM-Video's ratings or
VEFX-Bench's board printed with the errors recorded on rows. Imported only when one of them runs
(:data:`argus_dagster.client.cli.COMMANDS`)."""

from __future__ import annotations

import argparse
import os
import time

from argus_dagster.client.demo import build_demo_bench
from argus_dagster.client.evaluate import PROTOCOLS_RUN, plan_now, run_all
from argus_dagster.client.instance import local_instance
from argus_dagster.client.overview_link import overview_hint
from argus_dagster.client.printing import backbones, only_tasks
from argus_dagster.client.printing import say as _print  # the name the commands below print with
from argus_dagster.client.results import firm_scores_rows, row_errors, stored_partitions, vefx_board
from argus_dagster.client.selection import selector
from argus_dagster.definitions import build_definitions
from argus_dagster.infra.environment import SettingError
from argus_dagster.infra.names import shown, text_problem
from argus_dagster.infra.progress import TerminalLine
from argus_dagster.infra.settings import (
    DEMO_BENCH,
    Settings,
    argus_home,
    evaluation_settings,
    record_evaluation,
    scored_by,
)
from argus_dagster.method.leaderboard import format_leaderboard
from argus_dagster.outputs.history_words import error_summary, evaluator_label
from argus_dagster.protocols import vefx
from argus_dagster.protocols.firm.tables import firm_summary_table, format_firm_summary, unscored_reasons
from argus_dagster.records.history import EVALUATOR_TAG
from argus_dagster.records.lineage import latest_record


def cmd_demo(args: argparse.Namespace) -> int:
    home = argus_home()
    t0 = time.perf_counter()
    _print(f"argus demo: ARGUS_HOME={home}")
    bench, cands = build_demo_bench(home, force=args.rebuild, progress=_print)
    settings = evaluation_settings(bench, cands, name=DEMO_BENCH, profile=args.profile or "default", home=home)
    status, settings = _evaluate(settings, None, None, t0, force=args.force, controls=args.controls or 0,
                                 named_profile=args.profile is not None)
    return overview_hint(status, settings)


def cmd_evaluate(args: argparse.Namespace) -> int:
    for label, path in (("--bench", args.bench), ("--candidates", args.candidates)):
        if not os.path.isdir(path):
            _print(f"{label} {shown(path)}: not a folder")
            return 2
        problem = text_problem(os.path.abspath(path))  # it names the bench, and is written in its tables
        if problem:
            _print(f"{label} {shown(os.path.abspath(path))}: the folder's path is {problem}; rename the folder")
            return 2
    profile = args.profile or "default"
    if args.vlm_only and "vlm-only" not in profile.split(","):
        profile = "vlm-only" if profile == "default" else f"{profile},vlm-only"
    try:
        settings = evaluation_settings(args.bench, args.candidates, name=args.name, profile=profile,
                                       rubrics_in=args.rubrics_in)
    except SettingError as exc:
        _print(f"argus evaluate: {exc}")
        return 2
    if args.plan:
        if args.profile is None:  # where a new judge's scores would go
            try:
                settings, _ = _beside(settings, build_definitions(settings))
            except SettingError as exc:
                _print(f"argus: profile {settings.profile!r}: {exc}")
                return 2
        return _plan(settings, args.task, args.model)
    status, settings = _evaluate(settings, args.task, args.model, time.perf_counter(), force=args.force,
                                 protocol=args.protocol, repeat=(args.repeat or 0, args.repeat_videos),
                                 controls=args.controls or 0, named_profile=args.profile is not None)
    return overview_hint(status, settings)


def _plan(settings, tasks, models) -> int:
    """``argus evaluate --plan``: what Dagster would have run first, asset by asset (nothing runs)."""
    _print(f"evaluation {settings.evaluation}: bench {settings.bench!r}, profile {settings.profile!r}")
    requested = plan_now(tasks, models, progress=_print, settings=settings)
    if not requested:
        _print("nothing to run: every selected partition is up to date")
        return 0
    _print("would run now (what these runs update is asked for after them):")
    for asset, keys in requested.items():
        _print(f"  {asset}: {', '.join(keys) if keys else '(unpartitioned)'}")
    return 0


def judge_profile(settings: Settings, resources) -> tuple[str, str] | None:
    """The profile a new judge's scores go to when the user named none: where the evaluation was
    scored by another evaluator and the configured judge is a VLM, ``judge=<model>`` (with the profile's
    other parts): an evaluation of its own, named after the judge, beside the old one. None: the
    evaluation itself (never scored, scored by this judge, or the evidence-only judge). With the
    profile, the evaluator that scored the evaluation."""
    if not resources["vlm"].configured:
        return None
    before, now = scored_with(settings), judge_of(resources)
    if before is None or before == now:
        return None
    parts = [p for p in settings.profile.split(",") if p and p != "default" and not p.startswith("judge=")]
    return ",".join([*parts, f"judge={resources['vlm'].model_name()}"]), before


def scored_with(settings: Settings) -> str | None:
    """The evaluator that last scored the evaluation: its record's, else (an evaluation recorded before
    records named it) the one its latest ``video_scores`` run was tagged with; None if never scored."""
    said = scored_by(settings)
    if said is not None or not settings.dagster_home.is_dir():
        return said
    instance = local_instance(settings)
    record = latest_record(instance, "video_scores")
    run = instance.get_run_by_id(record.run_id) if record is not None else None
    return run.tags.get(EVALUATOR_TAG) if run is not None else None


def judge_of(resources) -> str:
    """The evaluator label of the judge ``resources`` configure (``openai:Qwen3-VL-8B``, ``evidence-only``)."""
    return evaluator_label(resources["judge"].identity(resources["vlm"]))


def _beside(settings: Settings, defs, protocol: str = "videoargus"):
    """``(settings, defs)`` of the evaluation a new judge's scores go to (:func:`judge_profile`), said
    in one line; the evaluation given where it is its own judge's."""
    moved = judge_profile(settings, defs.resources)
    if moved is None:
        return settings, defs
    (profile, scored), before = moved, settings
    settings = evaluation_settings(before.bench_dir, before.candidates_dir, name=before.bench, profile=profile,
                                   home=before.home, rubrics_in=before.rubrics_in)
    defs = build_definitions(settings, protocols=PROTOCOLS_RUN[protocol])
    _print(f"the judge {judge_of(defs.resources)} is not the one {before.evaluation} was scored with "
           f"({scored}): its scores are the evaluation {settings.evaluation}, beside it "
           f"(--profile {before.profile} re-scores {before.evaluation} instead)")
    return settings, defs


def _evaluate(settings, tasks, models, t0: float, force: bool = False, protocol: str = "videoargus",
              repeat: tuple[int, int] = (0, 0), controls: int = 0, named_profile: bool = True) -> tuple[int, Settings]:
    """Bring the evaluation up to date and print its results; ``(exit status, the evaluation scored)``.
    Without a profile named (``named_profile=False``), a judge other than the one the evaluation was
    scored with scores an evaluation of its own (:func:`judge_profile`), said in one line."""
    try:  # the evaluation's definitions, built once for the message below and every run
        defs = build_definitions(settings, protocols=PROTOCOLS_RUN[protocol])  # --protocol: asked of Dagster too
        assert defs.resources is not None  # build_definitions always binds the evaluation's resources
        if not named_profile:
            settings, defs = _beside(settings, defs, protocol)
        assert defs.resources is not None
        evaluators = backbones(defs.resources)
    except SettingError as exc:
        _print(f"argus: profile {settings.profile!r}: {exc}")
        return 2, settings
    _print(f"evaluation {settings.evaluation}: bench {settings.bench!r} ({settings.bench_dir}, candidates "
           f"{settings.candidates_dir}), profile {settings.profile!r}\n  its instance, tables and reports: "
           f"{settings.evaluation_dir}")
    _print(evaluators)
    if settings.rubrics_in == "home":
        _print(f"new rubrics are frozen under {settings.frozen_rubrics_dir} (--rubrics-in home: the bench folder "
               "is not written)")
    record_evaluation(settings, evaluated=False)  # listed now; the default for later commands once it scores
    with TerminalLine():  # videos scored, VLM requests, elapsed and remaining time, on a terminal
        instance = local_instance(settings)  # opened once for the runs and the summary (most of a second)
        lb = run_all(tasks=tasks, models=models, progress=_print, force=force, protocol=protocol, settings=settings,
                     instance=instance, defs=defs, repeat=repeat, controls=controls)
    firm = _print_firm(tasks, models, settings) if protocol in ("firm", "both") else None
    if protocol == "vefx":
        return _print_vefx(settings), settings
    if lb is None:  # FIRM-Video only
        if firm is not None and firm.height:
            record_evaluation(settings)
            return 0, settings
        return 1, settings
    _print(f"\nLeaderboard of {settings.evaluation} (mean final score, 0-10), {time.perf_counter() - t0:.1f}s in all\n")
    _print(format_leaderboard(only_tasks(lb, tasks)))
    summary = error_summary(row_errors(tasks, models, instance=instance, settings=settings))
    if summary:
        _print(summary)
    if not int(lb["n_videos"].sum() or 0):
        _print("\nno video could be scored: see the errors above")
        return 1, settings
    # what `argus leaderboard` and `argus open` show by default, and the judge that scored it
    record_evaluation(settings, evaluator=judge_of(defs.resources))
    _print(f"\nReports: {settings.reports_dir}/<TASK>/<model>/index.html; the Dagster UI: argus ui{selector(settings)}")
    return 0, settings


def _print_firm(tasks, models, settings):
    """FIRM-Video's mean ratings per task and model (1-5), how many videos each dimension left unscored
    and why, in 120 columns (:func:`argus_dagster.protocols.firm.tables.format_firm_summary`)."""
    rows = firm_scores_rows(tasks, models, settings=settings)
    table = firm_summary_table(rows)
    _print("\nFIRM-Video (mean ratings 1-5 per task and model; unscored: videos without a rating)\n")
    _print(format_firm_summary(table, unscored_reasons(rows)) if table.height else "no firm_scores stored")
    return table


def _print_vefx(settings) -> int:
    """VEFX-Bench's leaderboard per task and dimension (IF, RQ, EE, overall; 1-4)."""
    lb = vefx_board(settings=settings)
    _print("\nVEFX-Bench (mean scores 1-4 per dimension; unscored videos have the reason on their "
           "vefx_scores row)\n")
    _print(vefx.format_leaderboard(lb) if lb is not None else "no vefx_leaderboard stored")

    unscored = [(key, r) for key, df in stored_partitions("vefx_scores", settings=settings).items()
                for r in df.filter(df["overall"].is_null()).iter_rows(named=True)]
    if unscored:
        _print(f"\n{len(unscored)} video(s) without an overall score (the others are scored):")
        for _, r in unscored[:10]:
            why = r["if_reason"] or r["rq_reason"] or r["ee_reason"] or r["overall_reason"]
            _print(f"  {r['task']} x {r['model']} {r['input_id']!r}: {why[:160]}")
        if len(unscored) > 10:
            _print(f"  ... and {len(unscored) - 10} more")
    if lb is None or not lb["n_scored"].sum():
        return 1
    record_evaluation(settings)
    return 0
