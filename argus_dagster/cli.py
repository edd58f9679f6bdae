"""``argus``: demo, evaluate, leaderboard (thin launchers of Dagster materializations), align and open."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from argus_dagster.instances import ALL_TASKS


def _print(msg: str) -> None:
    if sys.stderr.isatty():  # over the progress line, not after it
        sys.stderr.write("\r\033[2K")
    print(msg, flush=True)


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import build_demo_bench
    from .settings import argus_home, record_active_bench

    home = argus_home()
    t0 = time.perf_counter()
    _print(f"argus demo: ARGUS_HOME={home}")
    bench, cands = build_demo_bench(home, force=args.rebuild, progress=_print)
    record_active_bench(bench, cands)
    return _overview_hint(_evaluate(None, None, t0, force=args.force))


def cmd_evaluate(args: argparse.Namespace) -> int:
    from .settings import record_active_bench

    for label, path in (("--bench", args.bench), ("--candidates", args.candidates)):
        if not os.path.isdir(path):
            _print(f"{label} {path}: not a folder")
            return 2
    from .settings import argus_home

    recorded = argus_home() / "argus.json"
    before = recorded.read_bytes() if recorded.is_file() else None
    record_active_bench(args.bench, args.candidates)
    _print(f"active bench: {Path(args.bench).resolve()} (candidates {Path(args.candidates).resolve()}), "
           f"recorded in {recorded} for later runs, the UI and the sensor")
    status = 1
    try:
        status = _evaluate(args.task, args.model, time.perf_counter(), force=args.force, vlm_only=args.vlm_only,
                           protocol=args.protocol)
    finally:
        if status != 0:  # a run that scored nothing leaves the previously active bench in place
            recorded.unlink(missing_ok=True) if before is None else recorded.write_bytes(before)
    return _overview_hint(status)


def _overview_hint(status: int) -> int:
    """After a run: where the overview of every result is, and how to look at it in a browser."""
    from .settings import load_settings, reports_port

    index = load_settings().reports_dir / "index.html"
    if status == 0 and index.is_file():
        try:
            where = f" at http://127.0.0.1:{reports_port()}/index.html"
        except ValueError:
            where = ""
        _print(f"Overview of every task: {index}; `argus open` serves it{where}")
    return status


def _backbones(vlm_only: bool = False) -> str:
    """Which judge and rubric generator this run uses (never the key, nor credentials in a URL)."""
    from resources import resources_for

    res = resources_for(vlm_only=vlm_only)
    vlm, rubric_vlm = res["vlm"], res["rubric_vlm"]

    def name(v) -> str:
        where = f" at {v.shown_urls()}" if v.backend == "openai" else (f" from {v.model_path}" if v.model_path else "")
        return f"{v.backend}:{v.model_name()}{where}"

    judge = f"VLM judge {name(vlm)}" if vlm.configured else "evidence-only judge (no VLM configured)"
    gen = f"VLM rubric generator {name(rubric_vlm)}" if rubric_vlm.configured else "offline rubric generator"
    mode = "; VLM-only ablation" if res["tools"].vlm_only else ""
    return f"{judge}; {gen}{mode}"


def _evaluate(tasks, models, t0: float, force: bool = False, vlm_only: bool = False,
              protocol: str = "videoargus") -> int:
    from .leaderboard import format_leaderboard
    from .runner import error_summary, row_errors, run_all
    from .settings import load_settings

    _print(_backbones(vlm_only))
    from .progress import TerminalLine

    with TerminalLine():  # videos scored, VLM requests, elapsed and remaining time, on a terminal
        lb = run_all(tasks=tasks, models=models, progress=_print, force=force, vlm_only=vlm_only, protocol=protocol)
    firm = _print_firm(tasks, models) if protocol != "videoargus" else None
    if lb is None:  # FIRM-Video only
        return 0 if firm is not None and firm.height else 1
    _print(f"\nLeaderboard (mean final score, 0-10), {time.perf_counter() - t0:.1f}s in all\n")
    _print(format_leaderboard(_only(lb, tasks)))
    summary = error_summary(row_errors(tasks, models))
    if summary:
        _print(summary)
    if not int(lb["n_videos"].sum() or 0):
        _print("\nno video could be scored: see the errors above")
        return 1
    _print(f"\nReports: {load_settings().reports_dir}/<TASK>/<model>/index.html; the Dagster UI: make ui")
    return 0


def _print_firm(tasks, models):
    """FIRM-Video's mean ratings per task and model (1-5), and how many videos each dimension left unscored."""
    from .runner import firm_summary

    table = firm_summary(tasks)
    if models and table.height:
        table = table.filter(table["model"].is_in(models))
    _print("\nFIRM-Video (mean ratings 1-5; unscored: videos without a rating, the reason is on their row)\n")
    _print(str(table) if table.height else "no firm_scores stored")
    return table


def cmd_export(args: argparse.Namespace) -> int:
    """``argus export firm``: reward-model training instances from the stored firm_scores rows."""
    from .runner import export_firm

    try:
        n, left_out = export_firm(args.out, args.task)
    except (OSError, ValueError) as exc:
        _print(f"argus export firm: {exc}")
        return 1
    for why in left_out[:20]:
        _print(f"left out: {why}")
    if len(left_out) > 20:
        _print(f"... and {len(left_out) - 20} more left out")
    _print(f"wrote {n} instances (one per video and dimension) to {args.out}")
    return 0 if n else 1


def cmd_best_of_n(args: argparse.Namespace) -> int:
    """The best candidate per input by one evaluator, from the stored tables."""
    from .runner import best_of_n_report

    by: str | dict[str, float] = args.by
    if args.mix:
        try:
            by = {k.strip(): float(w) for k, w in (m.split("=", 1) for m in args.mix)}
        except ValueError:
            _print(f"argus best-of-n: --mix {' '.join(args.mix)}: give COLUMN=WEIGHT pairs, e.g. final=1 if=1")
            return 2
    try:
        picks, texts = best_of_n_report(by, args.task)
    except ValueError as exc:
        _print(f"argus best-of-n: {exc}")
        return 1
    if not texts:
        _print("no stored scores: run `argus evaluate` (and --protocol firm or both for if, wc, pq) first")
        return 1
    _print("\n\n".join(texts.values()))
    return 0 if picks.height else 1


def cmd_leaderboard(args: argparse.Namespace) -> int:
    """Read-only: finds the home like git finds its repository, and creates nothing."""
    from .leaderboard import format_leaderboard
    from .runner import current_leaderboard, info_and_above
    from .settings import find_home

    home = find_home()
    if home is None:
        _print(f"no ARGUS_HOME: no .argus folder in {Path.cwd()} or its parents, and ARGUS_HOME is not set; "
               "run `argus demo` or `argus evaluate` there first")
        return 1
    if not (home / "dagster_home").is_dir():
        _print(f"no leaderboard yet in {home}: run `argus demo` or `argus evaluate` first")
        return 1
    with info_and_above():  # reading the stored table logs the IO manager's DEBUG lines
        lb = current_leaderboard()
    if lb is None:
        _print(f"no leaderboard yet in {home}: run `argus demo` or `argus evaluate` first")
        return 1
    _print(format_leaderboard(_only(lb, args.task)))
    return 0


def cmd_open(args: argparse.Namespace) -> int:
    """Serve ``$ARGUS_HOME/reports`` on loopback and print the overview's URL; read-only like ``leaderboard``."""
    from .serve import make_server, url_of
    from .settings import find_home, reports_port

    home = find_home()
    if home is None:
        _print(f"no ARGUS_HOME: no .argus folder in {Path.cwd()} or its parents, and ARGUS_HOME is not set; "
               "run `argus demo` or `argus evaluate` there first")
        return 1
    reports = home / "reports"
    if not args.before_results and not (reports / "index.html").is_file():
        _print(f"no overview yet in {reports}: run `argus demo` or `argus evaluate` first")
        return 1
    try:
        server = make_server(reports, reports_port() if args.port is None else args.port)
    except (OSError, ValueError) as exc:
        _print(f"argus open: {exc}")
        return 2
    _print(f"serving {reports} at {url_of(server, 'index.html')} (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _only(lb, tasks: list[str] | None):
    """The leaderboard of the tasks asked for (all without ``--task``)."""
    return lb.filter(lb["task"].is_in(tasks)) if tasks else lb


def cmd_align(args: argparse.Namespace) -> int:
    """Human alignment of evaluator scores: the same computation as the ``human_alignment`` asset."""
    from .alignment import ALIGNMENT_LEGEND, format_alignment
    from .ratings import alignment_report, merge_human, merge_scores, read_human, read_scores

    from .files import WriteError, write_atomic

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
    for problem in (human.problems + scores.problems)[:20]:
        _print(f"skipped: {problem}")
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
    from .settings import VARIABLES, argus_home, environment

    shown = environment().shown()
    _print(f"ARGUS_HOME in effect: {argus_home()}\n")
    width = max(len(n) for n in VARIABLES)
    for name, what in VARIABLES.items():
        value = shown.get(name)
        _print(f"{name:<{width}}  {'= ' + value if value is not None else '(unset)'}\n{'':<{width}}  {what}")
    return 0


FORCE_HELP = ("re-materialize partitions that are up to date too (tool steps and judgments still come "
              "from the content cache)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="argus", description="VideoArgus evaluation on Dagster. State lives in $ARGUS_HOME; "
                                "unset, the nearest .argus folder here or in a parent folder, else ./.argus")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="build the demo bench from shipped media and evaluate it")
    d.add_argument("--rebuild", action="store_true", help="rebuild the demo bench media")
    d.add_argument("--force", action="store_true", help=FORCE_HELP)
    d.set_defaults(func=cmd_demo)
    e = sub.add_parser("evaluate", help="evaluate a bench folder and its candidate videos")
    e.add_argument("--bench", required=True, help="folder with <TASK>/manifest.jsonl (or the released layout)")
    e.add_argument("--candidates", required=True, help="folder with <TASK>/<model>/<input_id>.mp4")
    e.add_argument("--task", action="append", type=str.upper, choices=ALL_TASKS,
                   help="only this task (repeatable; any case)")
    e.add_argument("--model", action="append", help="only this model (repeatable)")
    e.add_argument("--vlm-only", action="store_true", help="ablation: every plan becomes one vlm_qa")
    e.add_argument("--force", action="store_true", help=FORCE_HELP)
    e.add_argument("--protocol", choices=("videoargus", "firm", "both"), default="videoargus",
                   help="videoargus (rubrics, evidence, judge; the default), firm (FIRM-Video's checklists: "
                        "instruction following, world coherence, perceptual quality) or both")
    e.set_defaults(func=cmd_evaluate)
    ex = sub.add_parser("export", help="export stored results (firm: FIRM-Video reward-model training JSON lines)")
    ex.add_argument("what", choices=("firm",), help="firm: one instance per video and dimension, for SFT")
    ex.add_argument("--out", required=True, help="the JSON lines file to write")
    ex.add_argument("--task", action="append", type=str.upper, choices=ALL_TASKS, help="only this task (repeatable)")
    ex.set_defaults(func=cmd_export)
    bn = sub.add_parser("best-of-n", help="the best candidate per input by an evaluator, from the stored scores")
    bn.add_argument("--by", choices=("final", "if", "wc", "pq"), default="final",
                    help="final (VideoArgus) or a FIRM-Video rating")
    bn.add_argument("--mix", nargs="+", metavar="COL=W",
                    help="a weighted mix instead of --by (each column put on [0, 1] by its scale), e.g. final=1 pq=1")
    bn.add_argument("--task", action="append", type=str.upper, choices=ALL_TASKS, help="only this task (repeatable)")
    bn.set_defaults(func=cmd_best_of_n)
    lb = sub.add_parser("leaderboard", help="print the current leaderboard")
    lb.add_argument("--task", action="append", type=str.upper, choices=ALL_TASKS, help="only this task (repeatable; any case)")
    lb.set_defaults(func=cmd_leaderboard)
    op = sub.add_parser("open", help="serve the reports (overview, comparison and video pages) on 127.0.0.1 "
                        "and print the URL")
    op.add_argument("--port", type=int, help="the port (default ARGUS_REPORTS_PORT, else 3030; 0 picks a free one)")
    op.add_argument("--before-results", action="store_true",
                    help="serve even before the first results (make ui: pages appear as runs write them)")
    op.set_defaults(func=cmd_open)
    from .alignment import ALIGNMENT_LEGEND

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
                    help="the human rating scale (default: the observed range per dimension)")
    al.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples for the 95%% intervals")
    al.add_argument("--out", help="write the table as CSV here")
    al.set_defaults(func=cmd_align)
    en = sub.add_parser("env", help="the ARGUS_* settings, what each sets, and what this shell sets")
    en.set_defaults(func=cmd_env)
    args = p.parse_args(argv)
    try:
        return args.func(args)
    except Exception as exc:
        full = disk_full(exc)
        if full is None:
            raise
        _print(f"argus {args.command}: {full}")
        return 2


def disk_full(exc: BaseException) -> str | None:
    """One line for a full disk, wherever it surfaced (a file write, or the Dagster instance's
    SQLite database under ``$ARGUS_HOME``); None for any other error."""
    import errno

    from .files import WriteError

    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, WriteError) and "No space left" in str(exc):
            return str(exc)
        if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
            return f"no space left on the disk holding {exc.filename or 'ARGUS_HOME'}: free space there and run again"
        if "database or disk is full" in str(exc):
            from .settings import load_settings

            return (f"no space left on the disk holding the Dagster instance ({load_settings().dagster_home}): "
                    "free space there and run again (what was computed is kept in the content cache)")
        exc = exc.__cause__ or exc.__context__
    return None


if __name__ == "__main__":
    sys.exit(main())
