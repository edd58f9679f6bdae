"""The floor Dagster's own bookkeeping sets under ``argus evaluate``: the same runs, with assets that do nothing.

``argus evaluate`` on the README's 12-video bench executes three in-process runs on a SQLite
instance: the tasks' inputs and rubrics (2 assets x 5 task partitions, 1 check), one range over the
5 task x model partitions (5 assets, 2 checks) and the leaderboard (1 asset, 2 checks). This builds a
graph of that shape whose assets return at once (partitioned like the real ones: tasks, and tasks x a
dynamic ``model`` dimension), opens a fresh instance as the command does, and times each part in a
process of its own: Python with Dagster imported, the instance opened, and each run (its creation,
planned events, step events, materializations and checks stored, input data versions fetched). What
it prints is time no tool, judge or decoder spends: on top of it come the evaluation's own work and
the sources' observations. Compare it with the judge-latency bound of the bench
(``benchmarks.engine`` prints it: 4.0 s for the 12-video bench at 200 ms and concurrency 8).

Two columns, the processes alternated: the instance as Dagster opens it by default, and as ``argus``
opens an evaluation's (its SQLite files without a disk sync per event,
:mod:`argus_dagster.infra.sqlite`).

    .venv/bin/python -m benchmarks.dagster_floor [--repeat 3]
"""


import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

TASKS = ["T2V", "TI2V", "TS2V", "TV2V", "TSV2V"]
QUIET = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}  # as argus evaluate runs them


def _one(home: str, light: bool) -> dict:
    t0 = time.perf_counter()
    import dagster as dg

    t_import = time.perf_counter() - t0
    tasks = dg.StaticPartitionsDefinition(TASKS)
    models = dg.DynamicPartitionsDefinition(name="candidate_models")
    pairs = dg.MultiPartitionsDefinition({"task": tasks, "model": models})
    single = dg.BackfillPolicy.single_run()

    def chain(names: list[str], parts, first_deps: list) -> list:
        out, prev = [], first_deps
        for name in names:
            @dg.asset(name=name, partitions_def=parts, deps=prev, backfill_policy=single)
            def _asset() -> None:
                return None
            out.append(_asset)
            prev = [_asset]
        return out

    task_assets = chain(["input_instances", "rubrics"], tasks, [])
    pair_assets = chain(["candidate_videos", "criterion_evidence", "criterion_scores", "video_scores",
                         "diagnostic_reports"], pairs, [task_assets[-1]])

    @dg.asset(deps=[pair_assets[-2]])
    def leaderboard() -> None:
        return None

    def check(asset, name):
        @dg.asset_check(asset=asset, name=name)
        def _check() -> dg.AssetCheckResult:
            return dg.AssetCheckResult(passed=True)
        return _check

    checks = {"task": [check(task_assets[-1], "rubrics_valid")],
              "pair": [check(pair_assets[2], "scores_in_range"), check(pair_assets[3], "finals_in_range")],
              "board": [check(leaderboard, "in_range"), check(leaderboard, "intervals")]}
    everything = task_assets + pair_assets + [leaderboard] + [c for cs in checks.values() for c in cs]
    t1 = time.perf_counter()
    if light:
        from argus_dagster.infra.sqlite import sync_lightly

        sync_lightly(home)
    instance = dg.DagsterInstance.get()
    instance.add_dynamic_partitions("candidate_models", ["faithful"])
    t_instance = time.perf_counter() - t1

    def run(selection, chosen_checks, first=None, last=None) -> float:
        t = time.perf_counter()
        tags = {"dagster/asset_partition_range_start": first, "dagster/asset_partition_range_end": last} if first else {}
        result = dg.materialize(everything, selection=selection + chosen_checks, instance=instance, tags=tags,
                                run_config=QUIET)
        assert result.success
        return time.perf_counter() - t

    pair_keys = [str(dg.MultiPartitionKey({"task": t, "model": "faithful"})) for t in TASKS]
    first, last = sorted(pair_keys)[0], sorted(pair_keys)[-1]
    return {"import": t_import, "instance": t_instance,
            "task run": run(task_assets, checks["task"], TASKS[0], TASKS[-1]),
            "partition run": run(pair_assets, checks["pair"], first, last),
            "leaderboard run": run([leaderboard], checks["board"])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes and instances to time")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--light", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(_one(args.child, args.light)))
        return
    rows: dict[bool, list[dict]] = {False: [], True: []}
    for _ in range(args.repeat):
        for light in (False, True):
            home = tempfile.mkdtemp(prefix="argus_dagster_floor_")
            env = {**os.environ, "DAGSTER_HOME": home}
            t0 = time.perf_counter()
            out = subprocess.run([sys.executable, "-m", "benchmarks.dagster_floor", "--child", home]
                                 + (["--light"] if light else []), env=env,
                                 check=True, capture_output=True, text=True).stdout
            got = json.loads(out.strip().splitlines()[-1])
            got["whole process"] = time.perf_counter() - t0
            rows[light].append(got)
    print("Dagster's bookkeeping with assets that do nothing, in the shape of argus evaluate's runs "
          f"(median of {args.repeat} fresh processes each):")
    print(f"  {'':<16}{'defaults':>10}{'as argus':>10}")

    def median(light: bool, part: str) -> float:
        values = sorted(r[part] for r in rows[light])
        return values[len(values) // 2]

    for part in rows[False][0]:
        print(f"  {part:<16}{median(False, part):8.2f} s{median(True, part):8.2f} s")


if __name__ == "__main__":
    main()
