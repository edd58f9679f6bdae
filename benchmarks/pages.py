"""How the pages grow with models and inputs: the sample browser (``samples.html``) and the overview
(``index.html``) written from synthetic stored tables, one task of MODELS x INPUTS videos with eight
criteria each, at each shape asked (``MODELSxINPUTS``; default 200 models x 500 inputs, a bench grown
in models, and 5 models x 10,000 inputs, one grown in inputs). Prints, per shape and page, the seconds
to build and write it and its bytes; asserts nothing.

    .venv/bin/python -m benchmarks.pages [--shape 200x500 --shape 5x10000] [--criteria 8]

Scores are seeded uniform draws; the leaderboard is built once per shape (the asset's work, not the
page's) and stored beside the scores, as the overview reads it.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from argus_dagster.infra.tables import COSTS, CRITERION_SCORES, LEADERBOARD, VIDEO_SCORES
from argus_dagster.method.leaderboard import build_leaderboard
from argus_dagster.outputs.overview import write_overview
from argus_dagster.outputs.samples import write_samples


def synthetic_tables(n_models: int, n_inputs: int, n_criteria: int, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """``video_scores`` and ``criterion_scores`` of one task: every model's video of every input
    scored (one in fifty an error with no score), ``n_criteria`` criteria each."""
    rng = np.random.default_rng(seed)
    n = n_models * n_inputs
    models = np.repeat([f"model-{m:03d}" for m in range(n_models)], n_inputs)
    inputs = np.tile([f"prompt-{i:05d}" for i in range(n_inputs)], n_models)
    final = np.round(rng.uniform(0, 10, n), 2)
    failed = rng.random(n) < 0.02
    scored = pl.when(pl.Series(failed)).then(None).otherwise(pl.Series(final))
    videos = pl.DataFrame({
        "task": ["T2V"] * n, "model": models, "input_id": inputs, "sample": [""] * n, "cap_alpha": [1.0] * n,
        "caps_fired": [[]] * n, "n_scored": np.full(n, n_criteria), "n_criteria": np.full(n, n_criteria),
        "weight_scored": [1.0] * n, "judge": ["evidence-only"] * n, "needs_vlm": [[]] * n,
    }).with_columns(scored.alias("base_score"), scored.alias("final_score"),
                    pl.when(pl.Series(failed)).then(pl.lit("decode failed")).alias("error"),
                    *[pl.lit(0).alias(c) for c in VIDEO_SCORES if c in COSTS])
    k = n_criteria
    criteria = pl.DataFrame({
        "task": ["T2V"] * (n * k), "model": np.repeat(models, k), "input_id": np.repeat(inputs, k),
        "sample": [""] * (n * k), "criterion_id": np.tile([f"c{j}" for j in range(k)], n),
        "dimension": np.tile(np.arange(k) % 16 + 1, n), "type": ["soft"] * (n * k), "importance": ["medium"] * (n * k),
        "score": np.round(rng.uniform(0, 10, n * k), 1), "judge": ["evidence-only"] * (n * k),
    })
    criteria = criteria.with_columns(pl.lit(None, CRITERION_SCORES[c]).alias(c) for c in CRITERION_SCORES
                                     if c not in criteria.columns)
    return videos.select(list(VIDEO_SCORES)).cast(VIDEO_SCORES), criteria.select(list(CRITERION_SCORES)).cast(CRITERION_SCORES)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shape", action="append", help="MODELSxINPUTS (repeatable); default 200x500 and 5x10000")
    ap.add_argument("--criteria", type=int, default=8, help="criteria per video")
    args = ap.parse_args()
    shapes = [tuple(int(x) for x in s.lower().split("x")) for s in (args.shape or ["200x500", "5x10000"])]
    print(f"{'models':>6} {'inputs':>6} {'videos':>7}  {'page':<12} {'seconds':>8} {'bytes':>12}")
    for n_models, n_inputs in shapes:
        with tempfile.TemporaryDirectory(prefix="argus_pages_") as tmp:
            storage, reports = Path(tmp) / "storage", Path(tmp) / "reports"
            storage.mkdir()
            reports.mkdir()
            videos, criteria = synthetic_tables(n_models, n_inputs, args.criteria)
            videos.write_parquet(storage / "video_scores.parquet")
            criteria.write_parquet(storage / "criterion_scores.parquet")
            build_leaderboard(videos, bench="synthetic").cast(LEADERBOARD).write_parquet(storage / "leaderboard.parquet")
            for name, write in (("samples.html", write_samples), ("index.html", write_overview)):
                t0 = time.perf_counter()
                path = write(reports, storage, bench="synthetic")
                seconds = time.perf_counter() - t0
                print(f"{n_models:>6} {n_inputs:>6} {videos.height:>7}  {name:<12} {seconds:>8.2f} "
                      f"{Path(path).stat().st_size:>12,}", flush=True)


if __name__ == "__main__":
    main()
