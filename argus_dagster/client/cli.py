"""``argus``: its options parsed (:mod:`argus_dagster.client.arguments`), then the command run and what it
reads printed. demo, evaluate, leaderboard, export, history and diff are here (thin launchers of Dagster
materializations and readers of what they stored); ui starts its children through
:mod:`argus_dagster.client.supervise`; open, align, robustness, evaluations and env are in the modules
named for what they show. The process ends at once after the command (:mod:`argus_dagster.client.quick_exit`)."""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Callable

from argus_dagster.client.arguments import parser
from argus_dagster.client.overview_link import overview_hint
from argus_dagster.client.printing import backbones, storage_failure
from argus_dagster.client.printing import say as _print  # the name the commands below print with
from argus_dagster.client.quick_exit import leave
from argus_dagster.client.selection import chosen as _chosen  # the name the commands below read it with
from argus_dagster.client.selection import read_only_evaluation, selector
from argus_dagster.client.supervise import supervise
from argus_dagster.infra.files import WriteError, write_atomic
from argus_dagster.infra.progress import TerminalLine
from argus_dagster.infra.settings import (DEMO_BENCH, SettingError, argus_home, evaluation_settings, pinned_environment,
                                          record_evaluation, reports_port, served_settings)


def cmd_demo(args: argparse.Namespace) -> int:
    from argus_dagster.client.demo import build_demo_bench  # deferred: start-up time (OpenCV)

    home = argus_home()
    t0 = time.perf_counter()
    _print(f"argus demo: ARGUS_HOME={home}")
    bench, cands = build_demo_bench(home, force=args.rebuild, progress=_print)
    settings = evaluation_settings(bench, cands, name=DEMO_BENCH, profile=args.profile, home=home)
    return overview_hint(_evaluate(settings, None, None, t0, force=args.force), settings)


def cmd_evaluate(args: argparse.Namespace) -> int:
    for label, path in (("--bench", args.bench), ("--candidates", args.candidates)):
        if not os.path.isdir(path):
            _print(f"{label} {path}: not a folder")
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
        return _plan(settings, args.task, args.model)
    status = _evaluate(settings, args.task, args.model, time.perf_counter(), force=args.force,
                       protocol=args.protocol)
    return overview_hint(status, settings)


def _plan(settings, tasks, models) -> int:
    """``argus evaluate --plan``: what Dagster would have run first, asset by asset (nothing runs)."""
    from argus_dagster.client.evaluate import plan_now

    _print(f"evaluation {settings.evaluation}: bench {settings.bench!r}, profile {settings.profile!r}")
    requested = plan_now(tasks, models, progress=_print, settings=settings)
    if not requested:
        _print("nothing to run: every selected partition is up to date")
        return 0
    _print("would run now (what these runs update is asked for after them):")
    for asset, keys in requested.items():
        _print(f"  {asset}: {', '.join(keys) if keys else '(unpartitioned)'}")
    return 0


def _evaluate(settings, tasks, models, t0: float, force: bool = False, protocol: str = "videoargus") -> int:
    from argus_dagster.definitions import build_definitions  # deferred: start-up time (Dagster)
    from argus_dagster.method.leaderboard import format_leaderboard  # deferred: start-up time (polars)
    from argus_dagster.client.evaluate import run_all
    from argus_dagster.client.instance import local_instance
    from argus_dagster.client.results import row_errors
    from argus_dagster.outputs.history_words import error_summary

    try:  # the evaluation's definitions, built once for the message below and every run
        defs = build_definitions(settings)
        evaluators = backbones(defs.resources)
    except SettingError as exc:
        _print(f"argus: profile {settings.profile!r}: {exc}")
        return 2
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
                     instance=instance, defs=defs)
    firm = _print_firm(tasks, models, settings) if protocol in ("firm", "both") else None
    if protocol == "vefx":
        return _print_vefx(settings)
    if lb is None:  # FIRM-Video only
        if firm is not None and firm.height:
            record_evaluation(settings)
            return 0
        return 1
    _print(f"\nLeaderboard of {settings.evaluation} (mean final score, 0-10), {time.perf_counter() - t0:.1f}s in all\n")
    _print(format_leaderboard(_only(lb, tasks)))
    summary = error_summary(row_errors(tasks, models, instance=instance, settings=settings))
    if summary:
        _print(summary)
    if not int(lb["n_videos"].sum() or 0):
        _print("\nno video could be scored: see the errors above")
        return 1
    record_evaluation(settings)  # what `argus leaderboard` and `argus open` show by default
    _print(f"\nReports: {settings.reports_dir}/<TASK>/<model>/index.html; the Dagster UI: argus ui{selector(settings)}")
    return 0


def _print_firm(tasks, models, settings):
    """FIRM-Video's mean ratings per task and model (1-5), and how many videos each dimension left unscored."""
    from argus_dagster.client.results import firm_summary

    table = firm_summary(tasks, settings=settings)
    if models and table.height:
        table = table.filter(table["model"].is_in(models))
    _print("\nFIRM-Video (mean ratings 1-5; unscored: videos without a rating, the reason is on their row)\n")
    _print(str(table) if table.height else "no firm_scores stored")
    return table


def _print_vefx(settings) -> int:
    """VEFX-Bench's leaderboard per task and dimension (IF, RQ, EE, overall; 1-4)."""
    from argus_dagster.client.results import vefx_board
    from argus_dagster.protocols.vefx import format_leaderboard  # deferred: start-up time (OpenCV)

    lb = vefx_board(settings=settings)
    _print("\nVEFX-Bench (mean scores 1-4 per dimension; unscored videos have the reason on their "
           "vefx_scores row)\n")
    _print(format_leaderboard(lb) if lb is not None else "no vefx_leaderboard stored")
    from argus_dagster.client.results import stored_partitions

    unscored = [(key, r) for key, df in stored_partitions("vefx_scores", settings=settings).items()
                for r in df.filter(df["overall"].is_null()).iter_rows(named=True)]
    if unscored:
        _print(f"\n{len(unscored)} video(s) without an overall score (the others are scored):")
        for key, r in unscored[:10]:
            why = r["if_reason"] or r["rq_reason"] or r["ee_reason"] or r["overall_reason"]
            _print(f"  {r['task']} x {r['model']} {r['input_id']!r}: {why[:160]}")
        if len(unscored) > 10:
            _print(f"  ... and {len(unscored) - 10} more")
    if lb is None or not lb["n_scored"].sum():
        return 1
    record_evaluation(settings)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """``argus export leaderboard|videos|criteria|costs``: a stored score table as CSV, JSON or parquet;
    ``argus export firm --out DIR``: FIRM-Video training data (JSON lines, frames as images, a card)."""
    if args.what != "firm":
        return _export_table(args)
    from argus_dagster.client.results import export_firm

    if not args.out:
        _print("argus export firm: give the folder to write with --out")
        return 2
    if args.format not in (None, "json"):
        _print(f"argus export firm: --format {args.format}: firm writes JSON lines only")
        return 2
    try:
        result = export_firm(args.out, args.task, settings=_chosen(args), force=args.force)
    except (OSError, ValueError, WriteError) as exc:
        _print(f"argus export firm: {exc}")
        return 1
    for why in result.left_out[:20]:
        _print(f"left out: {why}")
    if len(result.left_out) > 20:
        _print(f"... and {len(result.left_out) - 20} more left out")
    _print(f"wrote {result.n_instances} instances (one per video and dimension) of {result.n_videos} videos to "
           f"{args.out}/train.jsonl, their frames under {args.out}/images and a dataset card, {args.out}/README.md")
    return 0 if result.n_instances else 1


def _export_table(args: argparse.Namespace) -> int:
    """One stored table of one evaluation, whole (``--task``: those tasks' rows), to ``--out`` (default
    ``<bench>-<profile>-<what>.<format>`` here; ``-`` for standard output, CSV and JSON only)."""
    from argus_dagster.outputs.export import default_out, encode, write_table  # deferred: start-up time (polars)
    from argus_dagster.client.results import stored_export_table

    settings = read_only_evaluation(args)
    if settings is None:
        return 1
    fmt = args.format or "csv"
    table = stored_export_table(args.what, args.task, settings=settings)
    if table is None or not table.height:
        tasks = f" of {', '.join(args.task)}" if args.task else ""
        _print(f"argus export {args.what}: nothing stored{tasks} for {settings.evaluation}: run `argus evaluate` first")
        return 1
    if args.out == "-":
        if fmt == "parquet":
            _print("argus export: parquet is not written to standard output: give --out FILE")
            return 2
        sys.stdout.write(encode(table, fmt).decode("utf-8"))
        sys.stdout.flush()
        return 0
    out = Path(args.out) if args.out else default_out(args.what, fmt, settings.evaluation)
    try:
        write_table(table, fmt, out)
    except WriteError as exc:
        _print(f"argus export {args.what}: {exc}")
        return 2
    _print(f"wrote {table.height} rows of {settings.evaluation}'s {args.what} to {out} ({fmt}; columns: docs/exports.md)")
    return 0


def cmd_best_of_n(args: argparse.Namespace) -> int:
    """The best candidate per input by one evaluator, from the stored tables."""
    from argus_dagster.client.results import best_of_n_report

    by: str | dict[str, float] = args.by
    if args.mix:
        try:
            by = {k.strip(): float(w) for k, w in (m.split("=", 1) for m in args.mix)}
        except ValueError:
            _print(f"argus best-of-n: --mix {' '.join(args.mix)}: give COLUMN=WEIGHT pairs, e.g. final=1 if=1")
            return 2
    try:
        picks, texts = best_of_n_report(by, args.task, settings=_chosen(args))
    except ValueError as exc:
        _print(f"argus best-of-n: {exc}")
        return 1
    if not texts:
        _print("no stored scores: run `argus evaluate` (and --protocol firm or both for if, wc, pq) first")
        return 1
    _print("\n\n".join(texts.values()))
    return 0 if picks.height else 1


def cmd_leaderboard(args: argparse.Namespace) -> int:
    """Read-only: one evaluation's leaderboard (``--bench``, ``--profile``; default the last evaluated)."""
    from argus_dagster.method.leaderboard import format_leaderboard  # deferred: start-up time (polars)
    from argus_dagster.client.results import current_leaderboard

    settings = read_only_evaluation(args)
    if settings is None:
        return 1
    try:
        lb = current_leaderboard(settings=settings)
    except Exception as exc:
        # A home this process may not write (a read-only mount, another user's): Dagster cannot open
        # its instance there, but the leaderboard is a table as stored.
        stored = settings.storage_dir / "leaderboard.parquet"
        if storage_failure(exc) is None or not stored.is_file():
            raise
        import polars as pl  # deferred: start-up time

        lb = pl.read_parquet(stored)
    if lb is None:
        _print(f"no leaderboard yet for {settings.evaluation}: run `argus demo` or `argus evaluate` first")
        return 1
    _print(f"Leaderboard of {settings.evaluation}: bench {settings.bench!r} ({settings.bench_dir}), "
           f"profile {settings.profile!r}\n")
    _print(format_leaderboard(_only(lb, args.task)))
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    """Read-only: every materialization of an asset (oldest first): time, run, partition, data version,
    why it ran, and whether its table is still kept."""
    from argus_dagster.client.results import materializations
    from argus_dagster.client.instance import local_instance
    from argus_dagster.client.results import evaluation_storage

    settings = read_only_evaluation(args)
    if settings is None:
        return 1
    rows = materializations(local_instance(settings), args.asset, args.partition)
    if not rows:
        _print(f"no materialization of {args.asset!r} in {settings.evaluation}")
        return 1
    storage = evaluation_storage(settings)
    _print(f"History of {args.asset} in {settings.evaluation} ({len(rows)} materializations, oldest first)")
    _print(f"{'time (UTC)':19}  {'pass':12}  {'run':8}  {'partition':18}  {'data version':16}  {'judge':24}  "
           f"{'table':6}  reason")
    newest = {r.partition: r.storage_id for r in rows}
    for r in rows[-args.limit:] if args.limit else rows:
        kept = "kept" if r.table and (r.kept or newest[r.partition] == r.storage_id) and storage.exists(r.table) else "gone"
        judge = r.tags.get("argus/evaluator") or "-"
        _print(f"{r.time:19}  {r.command[:12]:12}  {r.run_id[:8]:8}  {(r.partition or '-'):18}  "
               f"{(r.data_version or '-')[:16]:16}  {judge[:24]:24}  {kept:6}  {r.reason or '-'}")
    return 0


def cmd_diff(args: argparse.Namespace) -> int:
    """Read-only: two passes of an asset compared (default: the latest two of ``video_scores``)."""
    from argus_dagster.client.diff import diff
    from argus_dagster.client.instance import local_instance
    from argus_dagster.client.results import evaluation_storage

    settings = read_only_evaluation(args)
    if settings is None:
        return 1
    asset, passes = args.asset, list(args.passes)
    if asset not in ("video_scores", "criterion_scores"):  # `argus diff A B`: the passes of video_scores
        asset, passes = "video_scores", [asset] + passes
    if len(passes) > 2:
        _print(f"argus diff: at most two passes, got {len(passes)}")
        return 2
    try:
        d = diff(local_instance(settings), evaluation_storage(settings), asset, *(passes + [None, None])[:2])
    except ValueError as exc:
        _print(f"argus diff: {exc}")
        return 1
    _print(format_diff(d))
    return 0


def _num(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def format_diff(d) -> str:
    """A diff as a person reads it: the passes, the evaluators, per model before and after, what moved."""
    from argus_dagster.outputs.history_words import evaluator_label


    def named(judges: list[str]) -> str:
        return ", ".join(f"{evaluator_label(j)} ({j})" for j in judges) or "none"

    lines = [f"{d.asset}: before = pass {d.before} ({d.before_time} UTC), after = pass {d.after} ({d.after_time} UTC)",
             f"judge before: {named(d.judges[0])}", f"judge after: {named(d.judges[1])}"]
    if d.models.height:
        lines.append("\nper model: mean final score [95% interval] before -> after")
        lines.append(f"  {'task':5} {'model':16} {'before':>22}    {'after':>22}  {'change':>7}")
        for r in d.models.iter_rows(named=True):
            b, a = r["mean_final_before"], r["mean_final_after"]
            change = f"{a - b:+.2f}" if a is not None and b is not None else "-"
            lines.append(f"  {r['task']:5} {r['model']:16} {_num(b):>6} [{_num(r['ci_low_before'])}, {_num(r['ci_high_before'])}]"
                         f" -> {_num(a):>6} [{_num(r['ci_low_after'])}, {_num(r['ci_high_after'])}]  {change:>7}")
    if d.videos.height:
        lines.append("\nvideos that moved most (final score):")
        for r in d.videos.iter_rows(named=True):
            sample = f"#{r['sample']}" if r["sample"] else ""
            delta = f"{r['delta']:+.2f}" if r["delta"] is not None else r["change"]
            lines.append(f"  {r['task']} x {r['model']} {r['input_id']}{sample}: {_num(r['final_before'])} -> "
                         f"{_num(r['final_after'])} ({delta})")
    if d.criteria.height:
        lines.append("\ncriteria that moved most:")
        for r in d.criteria.iter_rows(named=True):
            sample = f"#{r['sample']}" if r["sample"] else ""
            delta = f"{r['delta']:+.2f}" if r["delta"] is not None else r["change"]
            lines.append(f"  {r['task']} x {r['model']} {r['input_id']}{sample} {r['criterion_id']}: "
                         f"{_num(r['before'])} -> {_num(r['after'])} ({delta})")
    lines.append("\nwhat changed between them:")
    lines.append(f"  evaluator: {named(d.judges[0])} -> {named(d.judges[1])}"
                 if d.judges[0] != d.judges[1] else f"  evaluator: the same, {named(d.judges[1])}")
    lines.append(f"  rubrics: {len(d.rubrics_changed)} input{'s' if len(d.rubrics_changed) != 1 else ''} got another rubric"
                 + (f" ({', '.join(f'{t}/{i}' for t, i in d.rubrics_changed[:8])})" if d.rubrics_changed else ""))
    lines.append("  inputs: " + (", ".join(f"{k} ({n} partition{'s' if n != 1 else ''})"
                                           for k, n in sorted(d.inputs_changed.items())) or "none moved"))
    if d.missing:
        lines.append(f"  not kept any more (retention, ARGUS_KEEP_VERSIONS): {', '.join(d.missing)}")
    return "\n".join(lines)


UI_WORKSPACE = """load_from:
  - python_module:
      module_name: argus_dagster.definitions
      location_name: argus_dagster
"""


def cmd_ui(args: argparse.Namespace) -> int:
    """The Dagster UI (``dagster dev``: webserver and daemon) on one evaluation's instance, and the
    reports server beside it, each pinned to that evaluation (``--bench``/``--profile``, else
    ``ARGUS_BENCH``/``ARGUS_PROFILE``, else the demo). The webserver listens on an internal loopback
    port behind :class:`argus_dagster.client.ui.HostProxy` (a loopback ``Host`` or ``--host`` only).
    Ctrl-C (SIGINT), SIGTERM or SIGHUP stops everything; a kill -9 of this process ends its children too
    (:mod:`argus_dagster.client.supervise`); a port taken is said at once."""
    from argus_dagster.client.instance import ensure_instance_yaml
    from argus_dagster.client.ui import HostProxy, answered_hosts, free_loopback_port, port_taken  # deferred: start-up time (the reports server's module)

    try:
        settings = served_settings(args.bench, args.profile)
        port = reports_port() if args.reports_port is None else args.reports_port
    except (SettingError, ValueError) as exc:
        _print(f"argus ui: {exc}")
        return 2
    dagster = Path(sys.executable).parent / "dagster"
    if not dagster.is_file():
        found = shutil.which("dagster")
        if found is None:
            _print("argus ui: the dagster command is not installed beside this Python (pip install dagster-webserver)")
            return 2
        dagster = Path(found)
    taken = port_taken("127.0.0.1", port)
    if taken is not None:
        _print(f"argus ui: the reports server's port {port} on 127.0.0.1 is taken ({taken}): pass --reports-port "
               "or set ARGUS_REPORTS_PORT")
        return 2
    internal = free_loopback_port()
    try:
        proxy = HostProxy(args.host, args.port, internal, answered_hosts(args.host))
    except OSError as exc:
        _print(f"argus ui: the Dagster UI's port {args.port} on {args.host} is taken ({exc.strerror or exc}): "
               "pass --port")
        return 2
    ensure_instance_yaml(settings.dagster_home)
    workspace = settings.dagster_home / "workspace.yaml"  # the code location, wherever argus is installed
    write_atomic(workspace, UI_WORKSPACE)
    env = pinned_environment(settings, port)
    commands = {  # the reports server finds the evaluation in the environment, as the code location does
        "reports server": [sys.executable, "-m", "argus_dagster.client.cli", "open", "--before-results", "--port", str(port)],
        "Dagster UI": [str(dagster), "dev", "-w", str(workspace), "-h", "127.0.0.1", "-p", str(internal)],
    }
    _print(f"argus ui: evaluation {settings.evaluation} (bench {settings.bench_dir}); its instance {settings.dagster_home}\n"
           f"  the Dagster UI at http://{args.host}:{proxy.port}/ (with the daemon), the reports beside it; "
           "Ctrl-C stops both")

    def stopped(name: str, status: int) -> None:
        _print(f"argus ui: the {name} stopped (exit status {status}); stopping the other")

    return supervise(commands, env, proxy, stopped)


def _only(lb, tasks: list[str] | None):
    """The leaderboard of the tasks asked for (all without ``--task``)."""
    return lb.filter(lb["task"].is_in(tasks)) if tasks else lb


# Each command's name (``args.command``) and what runs it: a function above, or ``module:function`` of the
# module that holds the command, imported only when that command runs.
COMMANDS: dict[str, Callable[[argparse.Namespace], int] | str] = {
    "demo": cmd_demo,
    "evaluate": cmd_evaluate,
    "export": cmd_export,
    "best-of-n": cmd_best_of_n,
    "leaderboard": cmd_leaderboard,
    "history": cmd_history,
    "diff": cmd_diff,
    "open": "argus_dagster.client.serve_reports:cmd_open",
    "ui": cmd_ui,
    "align": "argus_dagster.client.agreement:cmd_align",
    "robustness": "argus_dagster.client.agreement:cmd_robustness",
    "evaluations": "argus_dagster.client.listings:cmd_evaluations",
    "env": "argus_dagster.client.listings:cmd_env",
}


def command(name: str) -> Callable[[argparse.Namespace], int]:
    """What runs the command ``name`` (:data:`COMMANDS`); a command's own module is imported here, so
    ``argus --help`` and every other command start without it (Dagster, polars, the page templates)."""
    run = COMMANDS[name]
    if isinstance(run, str):
        module, function = run.split(":")
        run = getattr(importlib.import_module(module), function)
    return run


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return command(args.command)(args)
    except Exception as exc:
        failure = storage_failure(exc)
        if failure is None:
            raise
        _print(f"argus {args.command}: {failure}")
        return 2


def entry() -> None:
    """The ``argus`` command: :func:`main`, then out of the process at once (:func:`leave`); a command
    that fails ends the ordinary way."""
    leave(main())


if __name__ == "__main__":
    entry()
