"""What the embedded default cannot see: a video played backwards.

Builds the demo bench in a temporary ``ARGUS_HOME``, adds a model ``reversed`` whose every video is the
``faithful`` model's played backwards (a rabbit that climbs back into its burrow, a rocket that sinks),
evaluates the generation tasks (T2V, TI2V, TS2V) with the embedded default (no VLM) and prints, per task,
the mean final score and rank of ``faithful`` and ``reversed`` and how many inputs ``reversed`` scores at
or above ``faithful`` on. A VLM judge is what reads the prompt's direction; the default measures motion,
quality and consistency, which a reversal leaves as they were.

    .venv/bin/python -m benchmarks.time_reversal
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import polars as pl

from argus_dagster.client.demo import FPS, build_demo_bench
from argus_dagster.infra.media import VideoReader, write_video
from argus_dagster.infra.tables import stored_table

TASKS = ("T2V", "TI2V", "TS2V")


def _frames(path: Path) -> np.ndarray:
    """Every frame of ``path``, in order (RGB)."""
    reader = VideoReader(str(path))
    try:
        return reader.get(list(range(reader.info.n_frames)))
    finally:
        reader.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--home", type=Path, help="the ARGUS_HOME to build in (default: a temporary one)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        home = args.home or Path(tmp)
        bench, cands = build_demo_bench(home, progress=lambda _m: None)
        for task in TASKS:
            for video in sorted((cands / task / "faithful").glob("*.mp4")):
                write_video(cands / task / "reversed" / video.name, _frames(video)[::-1].copy(), FPS)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ARGUS_")}
        env["ARGUS_HOME"] = str(home)
        cmd = [sys.executable, "-m", "argus_dagster.client.cli", "evaluate", "--bench", str(bench),
               "--candidates", str(cands), "--name", "reversal", *[x for t in TASKS for x in ("--task", t)]]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            print(done.stdout[-3000:], done.stderr[-3000:])
            return 1
        storage = home / "benches" / "reversal" / "default" / "storage"
        lb = stored_table(storage, "leaderboard")
        videos = stored_table(storage, "video_scores")
        print("task   model      mean final  rank (of)  inputs where reversed >= faithful")
        for task in TASKS:
            g = lb.filter(pl.col("task") == task)
            v = videos.filter(pl.col("task") == task)
            per = {m: dict(zip(*v.filter(pl.col("model") == m).select("input_id", "final_score")))
                   for m in ("faithful", "reversed")}
            ties = sum(1 for i, s in per["reversed"].items() if s is not None and per["faithful"].get(i) is not None
                       and s >= per["faithful"][i] - 1e-9)
            for model in ("faithful", "reversed"):
                r = g.filter(pl.col("model") == model).row(0, named=True)
                said = f"{ties} of {len(per['reversed'])}" if model == "reversed" else ""
                print(f"{task:6} {model:10} {r['mean_final']:10.2f}  {r['rank']:>4} ({g.height})  {said}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
