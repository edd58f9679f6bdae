"""``argus``: demo, evaluate, leaderboard (thin launchers of Dagster materializations), align, open and ui."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from argus_dagster.method.inputs import ALL_TASKS


def _print(msg: str) -> None:
    if sys.stderr.isatty():  # over the progress line, not after it
        sys.stderr.write("\r\033[2K")
    print(msg, flush=True)


def cmd_demo(args: argparse.Namespace) -> int:
    from argus_dagster.client.demo import build_demo_bench
    from argus_dagster.infra.settings import DEMO_BENCH, argus_home, evaluation_settings

    home = argus_home()
    t0 = time.perf_counter()
    _print(f"argus demo: ARGUS_HOME={home}")
    bench, cands = build_demo_bench(home, force=args.rebuild, progress=_print)
    settings = evaluation_settings(bench, cands, name=DEMO_BENCH, profile=args.profile, home=home)
    return _overview_hint(_evaluate(settings, None, None, t0, force=args.force), settings)


def cmd_evaluate(args: argparse.Namespace) -> int:
    from argus_dagster.infra.settings import SettingError, evaluation_settings

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
    return _overview_hint(status, settings)


def _plan(settings, tasks, models) -> int:
    """``argus evaluate --plan``: what Dagster would have run first, asset by asset (nothing runs)."""
    from argus_dagster.client.runner import plan_now

    _print(f"evaluation {settings.evaluation}: bench {settings.bench!r}, profile {settings.profile!r}")
    requested = plan_now(tasks, models, progress=_print, settings=settings)
    if not requested:
        _print("nothing to run: every selected partition is up to date")
        return 0
    _print("would run now (what these runs update is asked for after them):")
    for asset, keys in requested.items():
        _print(f"  {asset}: {', '.join(keys) if keys else '(unpartitioned)'}")
    return 0


def _stored_overview(settings) -> str | None:
    """A presigned link to the overview when the environment keeps the reports on S3, else None."""
    from argus_dagster.definitions import storage_for

    from argus_dagster.infra.storage import is_remote, join

    bench, storage, _ = storage_for(settings=settings)
    reports = bench.reports_path()
    if not is_remote(reports):
        return None
    index = join(reports, "index.html")
    return storage.link(index) if storage.exists(index) else ""


def _overview_hint(status: int, settings) -> int:
    """After a run: where the overview of every result is, and how to look at it in a browser."""
    from argus_dagster.infra.settings import reports_port, served_prefix

    remote = _stored_overview(settings)
    if remote is not None:
        if status == 0 and remote:
            _print(f"Overview of every task (a link valid for a while): {remote}")
        return status
    index = settings.reports_dir / "index.html"
    if status == 0 and index.is_file():
        try:
            where = f" at http://127.0.0.1:{reports_port()}/{served_prefix(settings.reports_dir)}index.html"
        except ValueError:
            where = ""
        _print(f"Overview of every task: {index}; `argus open{_selector(settings)}` serves it{where}")
    return status


def _selector(settings) -> str:
    """The options that name ``settings``' evaluation to a later command (none for the demo's default),
    shell-quoted: a user copies them into a shell."""
    from shlex import quote

    from argus_dagster.infra.settings import DEFAULT_PROFILE, DEMO_BENCH

    out = "" if settings.bench == DEMO_BENCH else f" --bench {quote(settings.bench)}"
    return out + ("" if settings.profile == DEFAULT_PROFILE else f" --profile {quote(settings.profile)}")


def _backbones(res: dict) -> str:
    """Which judge and rubric generator the evaluation's resources ``res`` use (never the key, nor
    credentials in a URL). A profile that needs a VLM where none is configured is a
    :class:`SettingError`, before any run."""
    from argus_dagster.infra.settings import SettingError

    vlm, rubric_vlm = res["vlm"], res["rubric_vlm"]
    if res["tools"].vlm_only and not vlm.configured:  # every criterion asks the VLM: nothing could be scored
        raise SettingError("the VLM-only ablation asks a VLM every criterion, and none is configured; set "
                           "ARGUS_VLM_BASE_URL and ARGUS_VLM_MODEL (or ARGUS_VLM_PATH), see docs/vlm.md")

    def name(v) -> str:
        where = f" at {v.shown_urls()}" if v.backend == "openai" else (f" from {v.model_path}" if v.model_path else "")
        return f"{v.backend}:{v.model_name()}{where}"

    judge = f"VLM judge {name(vlm)}" if vlm.configured else "evidence-only judge (no VLM configured)"
    gen = f"VLM rubric generator {name(rubric_vlm)}" if rubric_vlm.configured else "offline rubric generator"
    mode = "; VLM-only ablation" if res["tools"].vlm_only else ""
    return f"{judge}; {gen}{mode}"


def _evaluate(settings, tasks, models, t0: float, force: bool = False, protocol: str = "videoargus") -> int:
    from argus_dagster.definitions import build_definitions
    from argus_dagster.method.leaderboard import format_leaderboard
    from argus_dagster.infra.progress import TerminalLine
    from argus_dagster.client.runner import error_summary, local_instance, row_errors, run_all
    from argus_dagster.infra.settings import SettingError, record_evaluation

    try:  # the evaluation's definitions, built once for the message below and every run
        defs = build_definitions(settings)
        backbones = _backbones(defs.resources)
    except SettingError as exc:
        _print(f"argus: profile {settings.profile!r}: {exc}")
        return 2
    _print(f"evaluation {settings.evaluation}: bench {settings.bench!r} ({settings.bench_dir}, candidates "
           f"{settings.candidates_dir}), profile {settings.profile!r}\n  its instance, tables and reports: "
           f"{settings.evaluation_dir}")
    _print(backbones)
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
    _print(f"\nReports: {settings.reports_dir}/<TASK>/<model>/index.html; the Dagster UI: argus ui{_selector(settings)}")
    return 0


def _print_firm(tasks, models, settings):
    """FIRM-Video's mean ratings per task and model (1-5), and how many videos each dimension left unscored."""
    from argus_dagster.client.runner import firm_summary

    table = firm_summary(tasks, settings=settings)
    if models and table.height:
        table = table.filter(table["model"].is_in(models))
    _print("\nFIRM-Video (mean ratings 1-5; unscored: videos without a rating, the reason is on their row)\n")
    _print(str(table) if table.height else "no firm_scores stored")
    return table


def _print_vefx(settings) -> int:
    """VEFX-Bench's leaderboard per task and dimension (IF, RQ, EE, overall; 1-4)."""
    from argus_dagster.client.runner import vefx_board
    from argus_dagster.infra.settings import record_evaluation
    from argus_dagster.protocols.vefx import format_leaderboard

    lb = vefx_board(settings=settings)
    _print("\nVEFX-Bench (mean scores 1-4 per dimension; unscored videos have the reason on their "
           "vefx_scores row)\n")
    _print(format_leaderboard(lb) if lb is not None else "no vefx_leaderboard stored")
    from argus_dagster.client.runner import stored_partitions

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
    from argus_dagster.infra.files import WriteError
    from argus_dagster.client.runner import export_firm

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
    from argus_dagster.outputs.export import default_out, encode, write_table
    from argus_dagster.infra.files import WriteError
    from argus_dagster.client.runner import stored_export_table

    settings = _read_only_evaluation(args)
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
    from argus_dagster.client.runner import best_of_n_report

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


def _chosen(args: argparse.Namespace):
    """The evaluation ``--bench`` / ``--profile`` name (default: the one evaluated last)."""
    from argus_dagster.infra.settings import load_settings

    return load_settings(bench=getattr(args, "bench", None), profile=getattr(args, "profile", None))


def _read_only_evaluation(args: argparse.Namespace, needs_instance: bool = True):
    """The evaluation a read-only command shows, or None after saying why there is none. Finds the
    home like git finds its repository, and creates nothing."""
    from argus_dagster.infra.settings import SettingError, find_home

    home = find_home()
    if home is None:
        _print(f"no ARGUS_HOME: no .argus folder in {Path.cwd()} or its parents, and ARGUS_HOME is not set; "
               "run `argus demo` or `argus evaluate` there first")
        return None
    try:
        settings = _chosen(args)
    except SettingError as exc:
        _print(f"argus {args.command}: {exc}")
        return None
    if needs_instance and not settings.dagster_home.is_dir():
        _print(f"nothing evaluated yet for {settings.evaluation} in {home}: run `argus demo` or `argus evaluate` first")
        return None
    return settings


def cmd_leaderboard(args: argparse.Namespace) -> int:
    """Read-only: one evaluation's leaderboard (``--bench``, ``--profile``; default the last evaluated)."""
    from argus_dagster.method.leaderboard import format_leaderboard
    from argus_dagster.client.runner import current_leaderboard

    settings = _read_only_evaluation(args)
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
        import polars as pl

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
    from argus_dagster.client.history import materializations
    from argus_dagster.client.runner import evaluation_storage, local_instance

    settings = _read_only_evaluation(args)
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
    from argus_dagster.client.history import diff
    from argus_dagster.client.runner import evaluation_storage, local_instance

    settings = _read_only_evaluation(args)
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
    from argus_dagster.client.history import evaluator_label

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


def cmd_robustness(args: argparse.Namespace) -> int:
    """Backbone robustness: a bench's evaluator profiles compared, from their stored scores."""
    from argus_dagster.definitions import robustness_tables, storage_for

    settings = _read_only_evaluation(args, needs_instance=False)
    if settings is None:
        return 1
    bench, storage, _ = storage_for(settings=settings)
    try:
        _, _, _, text, missing = robustness_tables(bench, args.profiles or [], args.key, storage.storage())
    except ValueError as exc:
        _print(f"argus robustness: {exc}")
        return 1
    if missing:
        _print(f"left out (no scores stored): {', '.join(missing)}")
    _print(f"Backbone robustness of bench {settings.bench!r} ({args.key} agreement)\n")
    _print(text)
    return 0


def cmd_evaluations(args: argparse.Namespace) -> int:
    """Every evaluation recorded under ARGUS_HOME, the last evaluated first."""
    from datetime import datetime

    from argus_dagster.infra.settings import find_home, recorded_evaluations

    if args.env:  # for a shell: the variables that pin a UI, daemon or script to one evaluation
        import shlex

        from argus_dagster.infra.settings import SettingError

        from argus_dagster.infra.settings import served_settings

        try:  # as the code location serves it: --bench/--profile, else ARGUS_BENCH(_DIR)/ARGUS_PROFILE, else demo
            s = served_settings(args.bench, args.profile)
        except SettingError as exc:
            _print(f"argus evaluations: {exc}")
            return 1
        for name, value in (("DAGSTER_HOME", s.dagster_home), ("ARGUS_BENCH", s.bench), ("ARGUS_PROFILE", s.profile),
                            ("ARGUS_BENCH_DIR", s.bench_dir), ("ARGUS_CANDIDATES_DIR", s.candidates_dir)):
            print(f"export {name}={shlex.quote(str(value))}")
        return 0
    home = find_home()
    records = recorded_evaluations(home) if home else []
    if not records:
        _print("no evaluation recorded yet: run `argus demo` or `argus evaluate`")
        return 1
    _print(f"{'bench':<20} {'profile':<24} {'last evaluated':<20} {'bench hash':<17} {'prompt tok/video':>16} "
           f"{'cached':>6}  bench folder")
    for r in records:
        stamp = float(r.get("last_evaluated") or 0)  # 0: recorded, never scored a video
        when = datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M:%S") if stamp > 0 else "never"
        costs = _evaluation_costs(home, r)
        per_video = "-" if costs["prompt_tokens_per_video"] is None else f"{costs['prompt_tokens_per_video']:.0f}"
        cached = "-" if costs["cached_share"] is None else f"{costs['cached_share']:.0%}"
        _print(f"{r['bench']:<20} {r['profile']:<24} {when:<20} {r.get('bench_hash', ''):<17} {per_video:>16} "
               f"{cached:>6}  {r['bench_dir']}")
    return 0


def _evaluation_costs(home, record: dict) -> dict:
    """What an evaluation cost (:func:`argus_dagster.method.leaderboard.cost_summary` of its whole ledger),
    from its stored tables, read through the evaluation's storage (local folders, or S3 where the
    environment keeps them there); nothing known where there are none or they cannot be read."""
    from argus_dagster.definitions import storage_for
    from argus_dagster.method.leaderboard import cost_summary, cost_table, stored_cost_table
    from argus_dagster.infra.settings import Settings

    where = Settings(home, Path(record["bench_dir"]), Path(record["candidates_dir"]), record["bench"], record["profile"])
    try:
        bench, storage, _ = storage_for(settings=where)
        costs = stored_cost_table(bench.storage_dir, storage.storage())
    except Exception:  # an unreachable store: the listing goes on without its costs
        costs = cost_table()
    return cost_summary(costs)


def cmd_open(args: argparse.Namespace) -> int:
    """Serve an evaluation's reports on loopback and print the overview's URL; read-only like ``leaderboard``."""
    from argus_dagster.outputs.overview import write_evaluations_index
    from argus_dagster.outputs.serve import REPORTS_ONLY, make_server, url_of
    from argus_dagster.infra.settings import SettingError, evaluations_root, find_home, reports_port, served_prefix

    if args.before_results and find_home() is not None:
        try:
            settings = _chosen(args)
        except SettingError as exc:
            _print(f"argus open: {exc}")
            return 1
    else:
        settings = _read_only_evaluation(args, needs_instance=False)
        if settings is None:
            return 1
    remote = _stored_overview(settings)
    if remote is not None:  # the reports are objects: a presigned link opens the overview
        _print(f"{settings.evaluation}'s overview: {remote}" if remote else
               f"no overview yet for {settings.evaluation} on S3: run `argus evaluate` first")
        return 0 if remote else 1
    reports = settings.reports_dir
    if not args.before_results and not (reports / "index.html").is_file():
        _print(f"no overview yet in {reports}: run `argus demo` or `argus evaluate` first")
        return 1
    root = evaluations_root(reports)  # $ARGUS_HOME/benches: every evaluation's reports, and their index
    reports.mkdir(parents=True, exist_ok=True) if args.before_results else None
    try:
        server = make_server(root or reports, reports_port() if args.port is None else args.port,
                             REPORTS_ONLY if root else None)
    except (OSError, ValueError) as exc:
        _print(f"argus open: {exc}")
        return 2
    page = url_of(server, served_prefix(reports) + "index.html")
    _print(f"serving {settings.evaluation}'s reports ({reports}) at {page} (Ctrl-C stops)")
    if root is not None:
        try:
            write_evaluations_index(root)  # as of now: the evaluations recorded in this home
            _print(f"every evaluation of this home: {url_of(server, 'index.html')}")
        except OSError as exc:  # a read-only home: its reports are served all the same
            _print(f"argus open: the index of every evaluation is not refreshed ({storage_failure(exc) or exc})")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


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
    (:data:`argus_dagster.client.ui.WATCHER`); a port taken is said at once."""
    import signal
    import subprocess

    from argus_dagster.infra.files import write_atomic
    from argus_dagster.client.runner import ensure_instance_yaml
    from argus_dagster.infra.settings import SettingError, pinned_environment, reports_port, served_settings
    from argus_dagster.client.ui import WATCHER, HostProxy, answered_hosts, die_with_parent, free_loopback_port, port_taken

    try:
        settings = served_settings(args.bench, args.profile)
        port = reports_port() if args.reports_port is None else args.reports_port
    except (SettingError, ValueError) as exc:
        _print(f"argus ui: {exc}")
        return 2
    dagster = Path(sys.executable).parent / "dagster"
    if not dagster.is_file():
        import shutil

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
    children: dict[str, subprocess.Popen] = {}
    watcher = None

    def interrupted(signum, frame):
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupted) for sig in (signal.SIGTERM, signal.SIGHUP)}
    status = 0
    try:
        proxy.serve_in_thread()
        for name, cmd in commands.items():  # each in a session of its own: stopped here, with all it started
            children[name] = subprocess.Popen(cmd, env=env, start_new_session=True, stdin=subprocess.DEVNULL,
                                              preexec_fn=die_with_parent(os.getpid()))
        watcher = subprocess.Popen([sys.executable, "-c", WATCHER, str(os.getpid()), *(str(p.pid) for p in children.values())],
                                   start_new_session=True, stdin=subprocess.DEVNULL)
        while all(p.poll() is None for p in children.values()):
            time.sleep(0.5)
        name, ended = next((n, p) for n, p in children.items() if p.poll() is not None)
        _print(f"argus ui: the {name} stopped (exit status {ended.returncode}); stopping the other")
        status = 1
    except KeyboardInterrupt:
        pass
    finally:
        proxy.close()
        _stop_children(children)
        if watcher is not None:
            watcher.kill()
            watcher.wait()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return status


def _stop_children(children: dict, grace_s: float = 30.0) -> None:
    """Interrupt each child's process group (as Ctrl-C would), wait for them, then kill what is left of
    each group: nothing they started outlives them."""
    import signal

    for p in children.values():
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace_s
    for p in children.values():
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except Exception:
            pass
        try:
            os.killpg(p.pid, signal.SIGKILL)  # the group: a webserver or daemon its parent left behind
        except (ProcessLookupError, PermissionError):
            pass
        p.wait()


def _only(lb, tasks: list[str] | None):
    """The leaderboard of the tasks asked for (all without ``--task``)."""
    return lb.filter(lb["task"].is_in(tasks)) if tasks else lb


def cmd_align(args: argparse.Namespace) -> int:
    """Human alignment of evaluator scores: the same computation as the ``human_alignment`` asset."""
    from argus_dagster.protocols.alignment.metrics import ALIGNMENT_LEGEND, format_alignment
    from argus_dagster.protocols.alignment.ratings import alignment_report, merge_human, merge_scores, read_human, read_scores

    from argus_dagster.infra.files import WriteError, write_atomic

    def read(reader, option: str, path: str, **kw):
        """One input file; whatever goes wrong reading it is said with its option and path."""
        try:
            return reader(path, **kw)
        except Exception as exc:  # a corrupt parquet, bad JSON, wrong encoding: name the file
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if path not in text:
                text = f"{path}: {type(exc).__name__}: {text}"
            raise ValueError(f"{option} {text}") from None

    try:
        human = merge_human([read(read_human, "--human", h) for h in args.human])
        scores = merge_scores([read(read_scores, "--scores", s, task=args.task) for s in args.scores])
        table = alignment_report(human, scores, dimensions=args.dimension, n_boot=args.n_boot,
                                 human_scale=tuple(args.human_scale) if args.human_scale else None)
    except (OSError, ValueError) as exc:
        _print(f"argus align: {exc}")
        return 2
    problems = human.problems + scores.problems
    for problem in problems[:20]:  # each says what became of its rows: skipped, refused or combined
        _print(f"note: {problem}")
    if len(problems) > 20:
        _print(f"note: {len(problems) - 20} more lines like these")
    _print(format_alignment(table))
    if table.height:
        _print("\n" + ALIGNMENT_LEGEND)
    if args.out:
        try:
            write_atomic(args.out, table.write_csv())
        except WriteError as exc:
            _print(f"argus align: --out {exc}")
            return 2
        _print(f"\nwrote {table.height} rows to {args.out}")
    return 0 if table.height else 1


def cmd_env(args: argparse.Namespace) -> int:
    """Every setting the environment can give, and what this shell sets (secrets masked)."""
    from argus_dagster.infra.settings import VARIABLES, argus_home, environment

    shown = environment().shown()
    _print(f"ARGUS_HOME in effect: {argus_home()}\n")
    width = max(len(n) for n in VARIABLES)
    for name, what in VARIABLES.items():
        value = shown.get(name)
        _print(f"{name:<{width}}  {'= ' + value if value is not None else '(unset)'}\n{'':<{width}}  {what}")
    return 0


PROFILE_HELP = ("the evaluator profile, stored apart from every other: default, vlm-only, judge=<model>, "
                "rubric=<model>, or parts joined by ','")


def _evaluation_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bench", help="a recorded bench's name (default: the one evaluated last; see argus evaluations)")
    parser.add_argument("--profile", help="its evaluator profile (default: the one evaluated last)")


FORCE_HELP = ("re-materialize partitions that are up to date too (tool steps and judgments still come "
              "from the content cache)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="argus", description="VideoArgus evaluation on Dagster. State lives in $ARGUS_HOME; "
                                "unset, the nearest .argus folder here or in a parent folder, else ./.argus")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="build the demo bench from shipped media and evaluate it")
    d.add_argument("--rebuild", action="store_true", help="rebuild the demo bench media")
    d.add_argument("--force", action="store_true", help=FORCE_HELP)
    d.add_argument("--profile", default="default", help=PROFILE_HELP)
    d.set_defaults(func=cmd_demo)
    e = sub.add_parser("evaluate", help="evaluate a bench folder and its candidate videos")
    e.add_argument("--bench", required=True, help="folder with <TASK>/manifest.jsonl (or the released layout)")
    e.add_argument("--candidates", required=True, help="folder with <TASK>/<model>/<input_id>.mp4")
    e.add_argument("--task", action="append", type=str.upper, choices=ALL_TASKS,
                   help="only this task (repeatable; any case)")
    e.add_argument("--model", action="append", help="only this model (repeatable)")
    e.add_argument("--name", help="the bench's name (default: name in its bench.json, else its folder's name)")
    e.add_argument("--profile", default="default", help=PROFILE_HELP)
    e.add_argument("--vlm-only", action="store_true", help="ablation: every plan becomes one vlm_qa (adds vlm-only "
                   "to the profile)")
    e.add_argument("--force", action="store_true", help=FORCE_HELP)
    e.add_argument("--rubrics-in", choices=("bench", "home"), default="bench",
                   help="where new rubrics are frozen: bench (its <TASK>/rubrics/, the default, where it is "
                        "writable) or home ($ARGUS_HOME/benches/<bench>/rubrics/: the bench folder is left as it is)")
    e.add_argument("--plan", action="store_true", help="observe the sources and say what Dagster would run now, "
                   "asset by asset, as the automation sensor would request it; nothing runs")
    e.add_argument("--protocol", choices=("videoargus", "firm", "both", "vefx"), default="videoargus",
                   help="videoargus (rubrics, evidence, judge; the default), firm (FIRM-Video's checklists: "
                        "instruction following, world coherence, perceptual quality), both, or vefx "
                        "(VEFX-Bench's 1-4 rubrics for edits, TV2V and TSV2V: instruction following, rendering "
                        "quality, edit exclusivity and their mean)")
    e.set_defaults(func=cmd_evaluate)
    ex = sub.add_parser("export", help="write stored results: a score table as CSV, JSON or parquet, or "
                        "FIRM-Video reward-model training data")
    ex.add_argument("what", choices=("leaderboard", "videos", "criteria", "costs", "firm"),
                    help="leaderboard (per task and model), videos (per video), criteria (per video and "
                         "criterion), costs (the VLM cost ledger per task and model: requests, tokens, cached "
                         "tokens, images, bytes, retries), or firm (one training instance per video and "
                         "dimension, for SFT)")
    ex.add_argument("--format", choices=("csv", "json", "parquet"),
                    help="csv (default; lists joined by '; '), json (one object per row) or parquet (as stored)")
    ex.add_argument("--out", help="the file to write (default <bench>-<profile>-<what>.<format> here; '-': "
                    "standard output); for firm, the folder to write (required): train.jsonl, images/ (the "
                    "frames each instance shows) and README.md (a dataset card)")
    ex.add_argument("--task", action="append", type=str.upper, choices=ALL_TASKS, help="only this task (repeatable)")
    ex.add_argument("--force", action="store_true", help="firm: write into a folder that holds other files "
                    "(they are kept; only the export's own files are replaced)")
    _evaluation_options(ex)
    ex.set_defaults(func=cmd_export)
    bn = sub.add_parser("best-of-n", help="the best candidate per input by an evaluator, from the stored scores")
    bn.add_argument("--by", choices=("final", "if", "wc", "pq", "if_score", "wc_score"), default="final",
                    help="final (VideoArgus), a FIRM-Video rating (ties broken by its score), or a FIRM-Video score")
    bn.add_argument("--mix", nargs="+", metavar="COL=W",
                    help="a weighted mix instead of --by (each column put on [0, 1] by its scale), e.g. final=1 pq=1")
    bn.add_argument("--task", action="append", type=str.upper, choices=ALL_TASKS, help="only this task (repeatable)")
    _evaluation_options(bn)
    bn.set_defaults(func=cmd_best_of_n)
    lb = sub.add_parser("leaderboard", help="print one evaluation's leaderboard (default: the one scored last)")
    lb.add_argument("--task", action="append", type=str.upper, choices=ALL_TASKS, help="only this task (repeatable; any case)")
    _evaluation_options(lb)
    lb.set_defaults(func=cmd_leaderboard)
    hi = sub.add_parser("history", help="every materialization of an asset: time, run, data version, why it ran")
    hi.add_argument("asset", nargs="?", default="video_scores", help="the asset (default video_scores)")
    hi.add_argument("--partition", help="only this partition (a task, or model|TASK)")
    hi.add_argument("--limit", type=int, default=0, help="only the latest N")
    _evaluation_options(hi)
    hi.set_defaults(func=cmd_history)
    df = sub.add_parser("diff", help="two passes of an asset compared: per model before and after, what moved "
                        "and what changed (default: the latest two of video_scores)")
    df.add_argument("asset", nargs="?", default="video_scores", help="video_scores (default) or criterion_scores")
    df.add_argument("passes", nargs="*", default=[], metavar="A B",
                    help="the passes to compare, each a pass, run id or data version (or their start) as "
                         "argus history lists them; B defaults to the latest")
    _evaluation_options(df)
    df.set_defaults(func=cmd_diff)
    op = sub.add_parser("open", help="serve the reports (overview, comparison and video pages) on 127.0.0.1 "
                        "and print the URL")
    op.add_argument("--port", type=int, help="the port (default ARGUS_REPORTS_PORT, else 3030; 0 picks a free one)")
    op.add_argument("--before-results", action="store_true",
                    help="serve even before the first results (argus ui: pages appear as runs write them)")
    _evaluation_options(op)
    op.set_defaults(func=cmd_open)
    ui = sub.add_parser("ui", help="the Dagster UI (webserver and daemon) on one evaluation's instance, and the "
                        "reports server beside it (Ctrl-C stops both)")
    ui.add_argument("--bench", help="a recorded bench's name (default ARGUS_BENCH, else the demo; see argus evaluations)")
    ui.add_argument("--profile", help="its evaluator profile (default ARGUS_PROFILE, else default)")
    ui.add_argument("--host", default="127.0.0.1", help="the Dagster UI's address (default 127.0.0.1); it answers "
                    "requests whose Host is this name or loopback only")
    ui.add_argument("--port", type=int, default=3000, help="the Dagster UI's port (default 3000)")
    ui.add_argument("--reports-port", type=int, help="the reports server's port (default ARGUS_REPORTS_PORT, else 3030)")
    ui.set_defaults(func=cmd_ui)
    from argus_dagster.protocols.alignment.metrics import ALIGNMENT_LEGEND

    al = sub.add_parser("align", help="agreement of evaluator scores with human ratings (SRCC, KRCC, PLCC, ...)",
                        epilog=ALIGNMENT_LEGEND, formatter_class=argparse.RawDescriptionHelpFormatter)
    al.add_argument("--human", action="append", required=True,
                    help="human ratings: CSV/JSONL/parquet with input_id, model, score[, dimension][, rater], "
                         "or T2VScore's / AIGVE's annotation JSON (repeatable)")
    al.add_argument("--scores", action="append", required=True,
                    help="evaluator scores: video_scores/criterion_scores parquet (or their storage folder), "
                         "or a table input_id, model, evaluator, score (repeatable)")
    al.add_argument("--dimension", action="append", help="only this human dimension (repeatable)")
    al.add_argument("--task", type=str.upper, choices=ALL_TASKS, help="the task, where the scores hold several (any case)")
    al.add_argument("--human-scale", nargs=2, type=float, metavar=("LO", "HI"),
                    help="the human rating scale of every dimension (default: the scale the ratings declare in "
                         "scale_min/scale_max columns, else the dimension's nominal scale: 1-4 for VEFX's, 1-5 for "
                         "FIRM-Video's and T2VScore's; never the observed range)")
    al.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples for the 95%% intervals")
    al.add_argument("--out", help="write the table as CSV here")
    al.set_defaults(func=cmd_align)
    rb = sub.add_parser("robustness", help="a bench's evaluator profiles compared: rank agreement, criterion "
                        "agreement, models that move (from their stored scores)")
    rb.add_argument("--bench", help="a recorded bench's name (default: the one evaluated last)")
    rb.add_argument("--profiles", nargs="+", metavar="PROFILE",
                    help="the profiles to compare (default: every profile of the bench with stored scores)")
    rb.add_argument("--key", choices=("criterion", "dimension"), default="criterion",
                    help="criterion (profiles that share rubrics) or dimension (rubrics that differ)")
    rb.set_defaults(func=cmd_robustness)
    ev = sub.add_parser("evaluations", help="the evaluations recorded here (bench x profile), the last evaluated first")
    ev.add_argument("--env", action="store_true", help="print the shell exports that pin one evaluation "
                    "(DAGSTER_HOME, ARGUS_BENCH, ARGUS_PROFILE, its folders), as argus ui sets them: --bench/"
                    "--profile, else ARGUS_BENCH(_DIR)/ARGUS_PROFILE, else the demo (what the code location serves)")
    _evaluation_options(ev)
    ev.set_defaults(func=cmd_evaluations)
    en = sub.add_parser("env", help="the ARGUS_* settings, what each sets, and what this shell sets")
    en.set_defaults(func=cmd_env)
    args = p.parse_args(argv)
    try:
        return args.func(args)
    except Exception as exc:
        failure = storage_failure(exc)
        if failure is None:
            raise
        _print(f"argus {args.command}: {failure}")
        return 2


def _instance_home() -> str:
    from argus_dagster.infra.settings import argus_home, load_settings

    try:
        return str(load_settings().dagster_home)
    except ValueError:  # a setting that cannot be used: the home is still worth naming
        return f"under {argus_home()}"


def storage_failure(exc: BaseException) -> str | None:
    """One line for a storage failure, wherever it surfaced (a file write, or the Dagster instance's
    SQLite database under ``$ARGUS_HOME``): a full disk, a read-only file system or database, a
    folder without permission, a disk I/O error. It names the path and what to do; None for any
    other error."""
    import errno

    from argus_dagster.infra.files import WriteError

    writable = "make it writable, or set ARGUS_HOME to a folder that is, and run again"
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        text = str(exc)
        if isinstance(exc, WriteError):
            return text
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            return f"no space left on the disk holding {exc.filename or 'ARGUS_HOME'}: free space there and run again"
        if isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return f"cannot write {exc.filename or 'under ARGUS_HOME'}: {exc.strerror or exc}: {writable}"
        if "database or disk is full" in text:
            return (f"no space left on the disk holding the Dagster instance ({_instance_home()}): "
                    "free space there and run again (what was computed is kept in the content cache)")
        if "disk I/O error" in text:
            return (f"the Dagster instance's database ({_instance_home()}) could not be read or written (SQLite: "
                    "disk I/O error, most often a full disk): free space there, or move ARGUS_HOME to a local "
                    "disk, and run again (what was computed is kept in the content cache)")
        if "readonly database" in text or "unable to open database file" in text:
            return f"the Dagster instance's database ({_instance_home()}) cannot be written: {writable}"
        exc = exc.__cause__ or exc.__context__
    return None


def entry() -> None:
    """The ``argus`` command: :func:`main`, then out of the process at once.

    What must happen when a process ends still happens (the exit handlers run, the output is flushed);
    the interpreter's teardown of every module it imported (Dagster, polars, numpy: some 2,000 of
    them, a third to half a second after every command) is skipped. A command that fails, leaves a
    thread at work, or runs under a profiler or tracer (``python -m cProfile``, coverage: they write
    their results at the ordinary exit) ends the ordinary way."""
    import atexit
    import threading

    rc = main()
    if sys.getprofile() is not None or sys.gettrace() is not None or any(
            t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread()):
        sys.exit(rc)
    atexit._run_exitfuncs()  # logging's shutdown, multiprocessing's children, and any others registered
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can reach it
            pass
    os._exit(rc)


if __name__ == "__main__":
    entry()
