"""How the evidence-only judge reads the model-backed tools' records (0-10, with the numbers quoted).

Calibration (linear between the stated points, clamped), as listed in ``argus_dagster.method.judge``:
``dino_sim`` cosine <= 0.2 -> 0, >= 0.8 -> 10; ``sam_track`` coverage of the clip x 10;
``spatial_relation`` share of frames where the stated relation holds x 10, or for a count with an
expected number 10 - 5 x |error|. A record these rules cannot read (a count without an expected
number, a relation with one entity, ``depth_probe``, whose claim direction the record does not carry)
gives no measure.
"""

from __future__ import annotations

import numpy as np


def _lin(x: float, lo: float, hi: float) -> float:
    return float(np.clip((x - lo) / (hi - lo), 0.0, 1.0))


def dino_sim_measure(r: dict) -> tuple[float, str]:
    s = 10 * _lin(r["similarity"], 0.2, 0.8)
    return s, (f"dino_sim[{r.get('backend', '?')}]: {r['a']} vs {r['b']} cosine {r['similarity']:.3f} "
               f"(min {r['similarity_min']:.3f} over {r['n_pairs']} pairs)")


def sam_track_measure(r: dict) -> tuple[float, str]:
    best = r.get("best") or {}
    return 10 * r["coverage"], (f"sam_track: {r['query']!r} found in {r['coverage']:.0%} of {r['n_frames']} frames "
                                f"(detector max score {best.get('score', 0.0):.2f})")


def spatial_relation_measure(r: dict) -> tuple[float, str] | None:
    if r.get("relation") == "count":
        if "expected" not in r:
            return None
        s = max(0.0, 10.0 - 5.0 * r["count_error"])
        return s, (f"spatial_relation: median count of {r['entities'][0]!r} {r['count']} vs expected "
                   f"{r['expected']} (counts {r['counts'][:8]})")
    if r.get("holds_fraction") is None:
        return None
    return 10 * r["holds_fraction"], (f"spatial_relation[{r['relation']}]: {r['verdict']}; the stated order holds in "
                                      f"{r['holds_fraction']:.0%} of {r['n_both_found']} frames with both found")
