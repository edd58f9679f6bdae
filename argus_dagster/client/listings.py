"""``argus evaluations`` and ``argus env``: the evaluations this home records (with what each cost), the
shell exports that pin one of them, and the settings the environment gives."""

from __future__ import annotations

import argparse
import shlex
from datetime import datetime
from pathlib import Path

from argus_dagster.client.printing import say
from argus_dagster.infra.environment import VARIABLES, SettingError, environment
from argus_dagster.infra.settings import Settings, argus_home, find_home, recorded_evaluations, served_settings


def cmd_evaluations(args: argparse.Namespace) -> int:
    """Every evaluation recorded under ARGUS_HOME, the last evaluated first."""
    if args.env:  # for a shell: the variables that pin a UI, daemon or script to one evaluation
        try:  # as the code location serves it: --bench/--profile, else ARGUS_BENCH(_DIR)/ARGUS_PROFILE, else demo
            s = served_settings(args.bench, args.profile)
        except SettingError as exc:
            say(f"argus evaluations: {exc}")
            return 1
        for name, value in (("DAGSTER_HOME", s.dagster_home), ("ARGUS_BENCH", s.bench), ("ARGUS_PROFILE", s.profile),
                            ("ARGUS_BENCH_DIR", s.bench_dir), ("ARGUS_CANDIDATES_DIR", s.candidates_dir)):
            print(f"export {name}={shlex.quote(str(value))}")
        return 0
    home = find_home()
    records = recorded_evaluations(home) if home else []
    if not records:
        say("no evaluation recorded yet: run `argus demo` or `argus evaluate`")
        return 1
    say(f"{'bench':<20} {'profile':<24} {'last evaluated':<20} {'bench hash':<17} {'prompt tok/video':>16} "
        f"{'cached':>6}  bench folder")
    for r in records:
        stamp = float(r.get("last_evaluated") or 0)  # 0: recorded, never scored a video
        when = datetime.fromtimestamp(stamp).strftime("%Y-%m-%d %H:%M:%S") if stamp > 0 else "never"
        costs = evaluation_costs(home, r)
        per_video = "-" if costs["prompt_tokens_per_video"] is None else f"{costs['prompt_tokens_per_video']:.0f}"
        cached = "-" if costs["cached_share"] is None else f"{costs['cached_share']:.0%}"
        say(f"{r['bench']:<20} {r['profile']:<24} {when:<20} {r.get('bench_hash', ''):<17} {per_video:>16} "
            f"{cached:>6}  {r['bench_dir']}")
    return 0


def evaluation_costs(home, record: dict) -> dict:
    """What an evaluation cost (:func:`argus_dagster.method.leaderboard.cost_summary` of its whole ledger),
    from its stored tables, read through the evaluation's storage (local folders, or S3 where the
    environment keeps them there); nothing known where there are none or they cannot be read."""
    from argus_dagster.definitions import storage_for  # deferred: start-up time (Dagster) of argus env and of a home with none
    from argus_dagster.infra.tables import stored_table  # deferred: as above (polars)
    from argus_dagster.method.ledger import LEDGER_STAGES, cost_summary, cost_table  # deferred: as above (polars)

    where = Settings(home, Path(record["bench_dir"]), Path(record["candidates_dir"]), record["bench"], record["profile"])
    try:
        bench, storage, _ = storage_for(settings=where)
        store = storage.storage()
        costs = stored_table(bench.storage_dir, "costs", store)  # the ledger asset's table
        if costs is None:  # an evaluation stored before the ledger was an asset: its stage tables
            costs = cost_table(stages={stage: stored_table(bench.storage_dir, asset, store)
                                       for stage, asset in LEDGER_STAGES.items()})
    except Exception:  # an unreachable store: the listing goes on without its costs
        costs = cost_table()
    return cost_summary(costs)


def cmd_env(args: argparse.Namespace) -> int:
    """Every setting the environment can give, and what this shell sets (secrets masked)."""
    shown = environment().shown()
    say(f"ARGUS_HOME in effect: {argus_home()}\n")
    width = max(len(n) for n in VARIABLES)
    for name, what in VARIABLES.items():
        value = shown.get(name)
        say(f"{name:<{width}}  {'= ' + value if value is not None else '(unset)'}\n{'':<{width}}  {what}")
    return 0
