"""Decoding: frames per second of the project's sampling against decord's raw decode of the same frames.

For each video and sampling policy, ``project`` is :meth:`argus_dagster.infra.media.VideoReader.sample`
(probe the geometry, open, decode the policy's frames with decord scaling them to at most 768 px) and
``raw`` is
``decord.VideoReader(path).get_batch(indices)`` on the same indices, with no resizing (both open the
file each time); ``pool`` is
the time the project's shared frame pool takes to answer the same (video, policy) again, which is
what every criterion after the first, the judge stage and the report pay. Median of ``--repeat`` runs. Prints figures;
asserts nothing.

    .venv/bin/python -m benchmarks.decoding [--repeat 5] [videos ...]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path


def default_videos() -> list[Path]:
    from argus_dagster.client.demo import clip_path

    videos = [clip_path("bigbuckbunny.mp4"), clip_path("bikes.mp4"), clip_path("carphone_pristine.mp4")]
    shared = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "videophy" / "examples"
    videos += sorted(shared.glob("*.mp4"))[:2]
    return [v for v in videos if v.is_file()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("videos", nargs="*", type=Path)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    import decord

    from argus_dagster.infra.frame_pool import FramePool
    from argus_dagster.infra.media import POLICIES, VideoReader, sample_indices

    videos = args.videos or default_videos()
    print(f"{'video':<34}{'size':>11}{'policy':>8}{'frames':>8}{'raw fps':>10}{'project fps':>13}"
          f"{'ratio':>7}{'pool hit us':>13}")
    for v in videos:
        for policy in POLICIES.values():
            raw_t, proj_t, pool_t = [], [], []
            info = VideoReader(str(v)).info
            idx = sample_indices(info, policy)  # the indices the project picks
            for _ in range(args.repeat):
                t0 = time.perf_counter()  # both sides open the file and decode the same frames
                decord.VideoReader(str(v), num_threads=1).get_batch(idx).asnumpy()
                raw_t.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                frames = VideoReader(str(v), max_side=768).sample(policy)
                proj_t.append(time.perf_counter() - t0)
                pool = FramePool(1 << 30)
                pool.get((str(v), policy.name), lambda frames=frames: frames)
                t0 = time.perf_counter()
                pool.get((str(v), policy.name), lambda v=v, policy=policy: VideoReader(str(v), max_side=768).sample(policy))
                pool_t.append(time.perf_counter() - t0)
            n = len(frames.indices)
            raw, proj, pooled = (statistics.median(x) for x in (raw_t, proj_t, pool_t))
            size = f"{info.width}x{info.height}"
            print(f"{v.name[:33]:<34}{size:>11}{policy.name:>8}{n:>8}{n / raw:>10.0f}{n / proj:>13.0f}"
                  f"{raw / proj:>7.2f}{pooled * 1e6:>13.1f}")


if __name__ == "__main__":
    main()
