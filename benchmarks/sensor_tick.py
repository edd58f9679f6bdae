"""How long a candidate-store sensor tick takes on a store of MODELS x 5 tasks x VIDEOS files.

    .venv/bin/python benchmarks/sensor_tick.py [--models 50] [--videos 3] [--size-kb 300]

Prints the first tick (every file hashed), a tick with nothing changed, and a tick after one video
changed. Files are random bytes of the given size: the sensor lists and hashes, it never decodes.
"""

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import dagster as dg

from argus_dagster.method.inputs import ALL_TASKS


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", type=int, default=50)
    ap.add_argument("--videos", type=int, default=3)
    ap.add_argument("--size-kb", type=int, default=300)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["ARGUS_HOME"] = str(Path(tmp) / "home")
        from argus_dagster.assets.sensors import candidate_store_sensor
        from argus_dagster.resources import BenchResource

        cands = Path(tmp) / "candidates"
        for task in ALL_TASKS:
            for m in range(args.models):
                d = cands / task / f"model-{m:03d}"
                d.mkdir(parents=True)
                for v in range(args.videos):
                    (d / f"in{v}.mp4").write_bytes(os.urandom(args.size_kb * 1024))
        n_files = len(ALL_TASKS) * args.models * args.videos
        bench = BenchResource(candidates_dir=str(cands))
        with dg.instance_for_test() as instance:
            for task in ALL_TASKS:  # the tasks' rubrics exist, as in a running deployment
                instance.report_runless_asset_event(dg.AssetMaterialization("rubrics", partition=task))

            def tick(cursor):
                ctx = dg.build_sensor_context(instance=instance, cursor=cursor, resources={"bench": bench})
                t0 = time.perf_counter()
                result = candidate_store_sensor(ctx)
                dt = time.perf_counter() - t0
                for req in result.dynamic_partitions_requests or []:
                    instance.add_dynamic_partitions(req.partitions_def_name, list(req.partition_keys))
                return result, dt

            first, t_first = tick(None)
            steady, t_steady = tick(first.cursor)
            (cands / "T2V" / "model-007" / "in1.mp4").write_bytes(os.urandom(args.size_kb * 1024))
            one, t_one = tick(steady.cursor)
            print(f"store: {args.models} models x {len(ALL_TASKS)} tasks x {args.videos} videos = {n_files} files "
                  f"of {args.size_kb} KB; cursor {len(first.cursor) / 1024:.0f} KB")
            print(f"first tick (all hashed):   {t_first:7.3f} s, {len(first.run_requests)} run requests")
            print(f"no change:                 {t_steady:7.3f} s, {len(steady.run_requests or [])} run requests")
            print(f"one video changed:         {t_one:7.3f} s, {len(one.run_requests)} run request(s): "
                  f"{[str(r.partition_key) for r in one.run_requests]}")
            assert json.loads(steady.cursor) == json.loads(first.cursor)


if __name__ == "__main__":
    main()
