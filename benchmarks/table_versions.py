"""Storage the kept table versions take: a bench evaluated with the evidence-only judge, then again with
a VLM judge (the loopback OpenAI-compatible server, in a process of its own), and what the tables kept
per version (``storage/_versions``, :class:`resources.storage.StorageIOManager`) weigh against the
current tables, per asset; then the estimate at ``--at`` videos with ``ARGUS_KEEP_VERSIONS`` versions
each (the per-video weight of a version, measured here, times videos times versions).

The bench is the demo's (``--videos 0``, the default) or the scale bench of ``benchmarks.scale``
(``--videos N``: five tasks, at least N videos). Prints figures; asserts nothing.

    .venv/bin/python -m benchmarks.table_versions [--videos 0] [--models 2] [--at 200] [--keep 10]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path


def _sizes(storage_dir: Path) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
    """Per asset: bytes of its current tables, bytes of its kept versions, number of kept versions."""
    current: dict[str, int] = {}
    kept: dict[str, int] = {}
    count: dict[str, int] = {}
    for p in storage_dir.rglob("*.parquet"):
        rel = p.relative_to(storage_dir).parts
        if rel[0] == "_versions":
            kept[rel[1]] = kept.get(rel[1], 0) + p.stat().st_size
            count[rel[1]] = count.get(rel[1], 0) + 1
        else:
            asset = rel[0].removesuffix(".parquet")
            current[asset] = current.get(asset, 0) + p.stat().st_size
    return current, kept, count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--videos", type=int, default=0, help="0: the demo bench; N: the scale bench of at least N videos")
    ap.add_argument("--models", type=int, default=2, help="models per task of the scale bench")
    ap.add_argument("--at", type=int, default=200, help="the videos to estimate for")
    ap.add_argument("--keep", type=int, default=10, help="the versions kept per asset partition to estimate for")
    args = ap.parse_args()

    home = Path(tempfile.mkdtemp(prefix="argus_table_versions_"))
    for k in [k for k in os.environ if k.startswith(("ARGUS_VLM", "ARGUS_RUBRIC", "ARGUS_BENCH", "ARGUS_PROFILE"))]:
        del os.environ[k]
    os.environ.update(ARGUS_HOME=str(home), DAGSTER_HOME=str(home / "dagster_home"))
    try:
        from argus_dagster.client.evaluate import run_all
        from argus_dagster.infra.settings import record_bench

        if args.videos:
            from benchmarks.scale import build_scale_bench

            bench, cands = build_scale_bench(home, args.videos, args.models)
        else:
            from argus_dagster.client.demo import build_demo_bench

            bench, cands = build_demo_bench(home, progress=lambda _: None)
        settings = record_bench(bench, cands)
        t0 = time.perf_counter()
        run_all(progress=lambda _: None, settings=settings)  # the evidence-only judge
        t1 = time.perf_counter()
        from benchmarks.scale import serving

        with serving(0.0) as (_, base_url):
            os.environ.update(ARGUS_VLM_BASE_URL=base_url, ARGUS_VLM_MODEL="another-judge")
            run_all(progress=lambda _: None, settings=settings)  # the judge switched: every partition again
        t2 = time.perf_counter()

        from argus_dagster.infra.tables import stored_table

        scores = stored_table(settings.storage_dir, "video_scores")
        n_videos = scores.height if scores is not None else 0
        current, kept, count = _sizes(settings.storage_dir)
        print(f"bench: {'demo' if not args.videos else f'scale, {args.videos} videos asked'}; {n_videos} videos, "
              f"two passes (evidence-only {t1 - t0:.0f}s, then a VLM judge {t2 - t1:.0f}s)")
        print(f"{'asset':22} {'current KB':>11} {'kept KB':>9} {'versions':>9}")
        for asset in sorted(set(current) | set(kept)):
            print(f"{asset:22} {current.get(asset, 0) / 1024:11.1f} {kept.get(asset, 0) / 1024:9.1f} {count.get(asset, 0):9d}")
        total_current, total_kept = sum(current.values()), sum(kept.values())
        print(f"{'total':22} {total_current / 1024:11.1f} {total_kept / 1024:9.1f} {sum(count.values()):9d}")
        per_video_pass = total_kept / 2 / max(n_videos, 1)
        estimate = per_video_pass * args.at * args.keep
        print(f"kept per video and pass: {per_video_pass / 1024:.1f} KB; at {args.at} videos with {args.keep} "
              f"versions kept: about {estimate / 2**20:.1f} MB of kept tables (beside {total_current / max(n_videos, 1) * args.at / 2**20:.1f} MB of current ones)")
    finally:
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
