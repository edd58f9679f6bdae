"""``argus``: demo, evaluate, leaderboard. A thin launcher of Dagster materializations."""

from __future__ import annotations

import argparse
import os
import sys
import time

from argus_dagster.instances import ALL_TASKS


def _print(msg: str) -> None:
    print(msg, flush=True)


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import build_demo_bench
    from .settings import argus_home, record_active_bench

    home = argus_home()
    t0 = time.perf_counter()
    _print(f"argus demo: ARGUS_HOME={home}")
    bench, cands = build_demo_bench(home, force=args.rebuild, progress=_print)
    record_active_bench(bench, cands)
    return _evaluate(None, None, t0)


def cmd_evaluate(args: argparse.Namespace) -> int:
    from .settings import record_active_bench

    for label, path in (("--bench", args.bench), ("--candidates", args.candidates)):
        if not os.path.isdir(path):
            _print(f"{label} {path}: not a folder")
            return 2
    os.environ["ARGUS_VLM_ONLY"] = "1" if args.vlm_only else os.environ.get("ARGUS_VLM_ONLY", "")
    record_active_bench(args.bench, args.candidates)
    return _evaluate(args.task, args.model, time.perf_counter())


def _evaluate(tasks, models, t0: float) -> int:
    from .leaderboard import format_leaderboard
    from .runner import run_all

    lb = run_all(tasks=tasks, models=models, progress=_print)
    _print(f"\nLeaderboard (mean final score, 0-10), {time.perf_counter() - t0:.1f}s in all\n")
    _print(format_leaderboard(lb))
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from .leaderboard import format_leaderboard
    from .runner import current_leaderboard

    lb = current_leaderboard()
    if lb is None:
        _print("no leaderboard yet: run `argus demo` or `argus evaluate` first")
        return 1
    if args.task:
        lb = lb.filter(lb["task"].is_in(args.task))
    _print(format_leaderboard(lb))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="argus", description="VideoArgus evaluation on Dagster (state in $ARGUS_HOME, default .argus)")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="build the demo bench from shipped media and evaluate it")
    d.add_argument("--rebuild", action="store_true", help="rebuild the demo bench media")
    d.set_defaults(func=cmd_demo)
    e = sub.add_parser("evaluate", help="evaluate a bench folder and its candidate videos")
    e.add_argument("--bench", required=True, help="folder with <TASK>/manifest.jsonl (or the released layout)")
    e.add_argument("--candidates", required=True, help="folder with <TASK>/<model>/<input_id>.mp4")
    e.add_argument("--task", action="append", choices=ALL_TASKS, help="only this task (repeatable)")
    e.add_argument("--model", action="append", help="only this model (repeatable)")
    e.add_argument("--vlm-only", action="store_true", help="ablation: every plan becomes one vlm_qa")
    e.set_defaults(func=cmd_evaluate)
    lb = sub.add_parser("leaderboard", help="print the current leaderboard")
    lb.add_argument("--task", action="append", choices=ALL_TASKS)
    lb.set_defaults(func=cmd_leaderboard)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
