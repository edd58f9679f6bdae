"""``spatial_relation``: left/right, front/back and counts from boxes (and depth) on dense frames.

``entities`` lists the entities in the order of the claim: ``"cat, dog"`` with ``left_right`` asks
whether the cat is left of the dog, with ``front_back`` whether the cat is in front of the dog.
``holds_fraction`` is the share of frames, among those where both are found, where the claim holds.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from argus_dagster.infra.media import DENSE_POLICY
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.evidence.tools.depth import DepthModel, probe_frames
from argus_dagster.method.evidence.tools.detection import Localizer, split_entities
from argus_dagster.method.evidence.tools.geometry import (
    closeness,
    count_instances,
    fraction,
    front_entity,
    horizontal_relation,
    median_count,
)

RELATIONS = ("left_right", "front_back", "count")
_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve".split())}


def parse_count(value: Any) -> int | None:
    """An expected count from ``3``, ``"3"`` or ``"three"``; None when there is none."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    text = str(value).strip().lower()
    if re.fullmatch(r"\d+", text):
        return int(text)
    return _NUMBER_WORDS.get(text)


class SpatialRelation:
    name = "spatial_relation"
    max_frames = 16

    def __init__(self, localizer: Localizer, depth: DepthModel | None):
        self.localizer = localizer
        self.depth = depth
        self.version = localizer.version + (f"+{depth.version}" if depth else "")
        self.config = {"localizer": getattr(localizer, "config", None), "depth": getattr(depth, "config", None)}

    def run(self, args: dict[str, Any], media: MediaStore) -> dict[str, Any]:
        on = args.get("on", "output_video")
        relation = str(args.get("relation") or "").strip().lower().replace("-", "_").replace(" ", "_")
        if relation not in RELATIONS:
            return {"ok": False, "error": f"spatial_relation: relation {relation!r} is not one of {RELATIONS}"}
        entities = split_entities(args.get("entities"))
        if not entities:
            return {"ok": False, "error": "spatial_relation needs 'entities' (the entities to relate or count)"}
        if relation == "front_back" and self.depth is None:
            return {"ok": False, "unavailable": True,
                    "error": "spatial_relation front_back needs the depth model, which is unavailable"}
        fr = media.frames(on, DENSE_POLICY)
        idx = probe_frames(fr, self.max_frames)
        frames = [fr.array[i] for i in idx]
        found = self.localizer.detect(frames, entities[:2] if relation != "count" else entities[:1])
        record: dict[str, Any] = {"ok": True, "backend": self.version, "on": on, "relation": relation,
                                  "entities": entities[:2] if relation != "count" else entities[:1],
                                  "n_frames": len(idx)}
        if relation == "count":
            counts = [count_instances([d.box for d in dets[0]], [d.score for d in dets[0]],
                                      self.localizer.threshold) for dets in found]
            record.update(counts=counts, count=median_count(counts),
                          count_stable_fraction=round(float(np.mean([c == median_count(counts) for c in counts])), 4))
            expected = parse_count(args.get("expected", args.get("count")))
            if expected is not None:
                record.update(expected=expected, count_error=abs(record["count"] - expected))
            return record
        firsts = [[d[0] if d else None for d in dets] for dets in found]
        record["found_fraction"] = [round(float(np.mean([f[k] is not None for f in firsts])), 4)
                                    for k in range(len(record["entities"]))]
        if len(entities) < 2:
            xs = [round((f[0].box[0] + f[0].box[2]) / 2 / frames[0].shape[1], 4) for f in firsts if f[0]]
            record.update(verdict=None, center_x=xs,
                          note="one entity named: the relation needs two; the entity's horizontal centres are listed")
            return record
        verdicts: list[str] = []
        maps = (self.depth.maps(frames) if relation == "front_back" and self.depth is not None  # front_back has one (above)
                else [None] * len(frames))
        for frame, pair, depth_map in zip(frames, firsts, maps):
            if pair[0] is None or pair[1] is None:
                continue
            if relation == "left_right":
                verdicts.append(horizontal_relation(pair[0].box, pair[1].box, frame.shape[1]))
            else:
                assert self.depth is not None and depth_map is not None  # front_back: the depth model's maps (above)
                front = front_entity(closeness(depth_map, self.depth.larger_is_closer), pair[0].box, pair[1].box)
                verdicts.append({"a": "front", "b": "behind"}.get(front, "same"))
        holds = "left" if relation == "left_right" else "front"
        reverse = "right" if relation == "left_right" else "behind"
        a, b = entities[0], entities[1]
        record.update(
            n_both_found=len(verdicts),
            per_frame=verdicts,
            holds_fraction=fraction(verdicts, holds),
            reversed_fraction=fraction(verdicts, reverse),
        )
        hf, rf = record["holds_fraction"], record["reversed_fraction"]
        word = "left of" if relation == "left_right" else "in front of"
        record["verdict"] = (None if hf is None else f"{a} {word} {b}" if hf > 0.5
                             else f"{b} {word} {a}" if (rf or 0) > 0.5 else "undetermined")
        return record
