"""What a VLM-configured run asks of its endpoint: requests per video and criterion, bytes, time.

Starts the loopback OpenAI-compatible test server with a fixed latency per request, builds the demo
bench in a temporary ARGUS_HOME and runs the graph with the judge, ``vlm_qa`` and the rubric generator
on that server. Prints figures; asserts nothing.

    .venv/bin/python -m benchmarks.vlm_calls [--latency 0.2] [--concurrency 8] [--models faithful frozen]
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time

import polars as pl


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.2, help="server latency per request, seconds")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--models", nargs="+", default=["faithful", "frozen"])
    args = ap.parse_args()

    from tests.servers.openai_server import FakeVlmServer, kind_of

    home = tempfile.mkdtemp(prefix="argus_vlm_bench_")
    os.environ.update(ARGUS_HOME=home, DAGSTER_HOME=os.path.join(home, "dagster_home"))
    with FakeVlmServer(latency_s=args.latency) as srv:
        os.environ.update(ARGUS_VLM_BASE_URL=srv.base_url, ARGUS_VLM_MODEL="bench-model",
                          ARGUS_VLM_CONCURRENCY=str(args.concurrency))
        import dagster as dg

        from argus_dagster.assets import ALL_ASSETS
        from argus_dagster.client.demo import build_demo_bench
        from argus_dagster.client.evaluate import run_all
        from argus_dagster.client.instance import local_instance
        from argus_dagster.infra.settings import record_bench
        from argus_dagster.resources import resources_for

        bench, cands = build_demo_bench(home, progress=lambda m: None)
        record_bench(bench, cands)
        t0 = time.perf_counter()
        lb = run_all(models=args.models, progress=lambda m: None)
        wall = time.perf_counter() - t0
        defs = dg.Definitions(assets=ALL_ASSETS, resources=resources_for())
        inst = local_instance()
        scores = pl.concat([defs.load_asset_value("criterion_scores", instance=inst,
                                                  partition_key=dg.MultiPartitionKey({"task": t, "model": m}))
                            for t in sorted(set(lb["task"])) for m in args.models])
        reqs = srv.requests
    n_videos = int(lb["n_videos"].sum())
    n_crit = scores.height
    by_kind: dict[str, list[int]] = {}
    for r in reqs:
        by_kind.setdefault(kind_of(r["body"]), []).append(r["bytes"])
    print(f"server latency {args.latency * 1000:.0f} ms, concurrency {args.concurrency}; "
          f"{n_videos} videos, {n_crit} criteria, {len(set(lb['task']))} tasks, models {args.models}")
    print(f"{'request kind':<14}{'requests':>10}{'per video':>11}{'per criterion':>15}{'mean KB':>10}{'max KB':>9}")
    for kind, sizes in sorted(by_kind.items()):
        print(f"{kind:<14}{len(sizes):>10}{len(sizes) / n_videos:>11.2f}{len(sizes) / n_crit:>15.2f}"
              f"{sum(sizes) / len(sizes) / 1024:>10.1f}{max(sizes) / 1024:>9.1f}")
    print(f"{'all':<14}{len(reqs):>10}{len(reqs) / n_videos:>11.2f}{len(reqs) / n_crit:>15.2f}"
          f"{sum(r['bytes'] for r in reqs) / len(reqs) / 1024:>10.1f}")
    print(f"wall time {wall:.1f} s for the graph (rubrics included): {wall / n_videos:.2f} s per video; "
          f"lower bound from latency alone {len(reqs) * args.latency / args.concurrency:.1f} s")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB; "
          f"unscored criteria {scores['score'].null_count()}")


if __name__ == "__main__":
    main()
