"""Monocular depth (Depth Anything, DPT, through ``transformers``) and ``depth_probe``."""

from __future__ import annotations

from typing import Any, Sequence

import cv2
import numpy as np

from argus_dagster.infra.media import DENSE_POLICY, Frames
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.evidence.tools.detection import Localizer
from argus_dagster.method.evidence.tools.geometry import (
    box_overlap,
    closeness,
    depth_occlusion,
    fraction,
    front_entity,
    region_closeness,
)
from argus_dagster.method.evidence.tools.models import ModelStore, torch_module
from argus_dagster.method.evidence.tools.vision import VisionModel

DEPTH_FOLDER = "depth"


def probe_frames(fr: Frames, max_frames: int) -> list[int]:
    """Indices of at most ``max_frames`` frames spread evenly over a dense sample."""
    n = len(fr.array)
    return sorted(set(np.linspace(0, n - 1, min(n, max_frames)).round().astype(int).tolist()))


class DepthModel:
    """Depth maps at the frame's own size; ``larger_is_closer`` tells their orientation."""

    def __init__(self, store: ModelStore):
        self.store = store
        self.vm: VisionModel = store.get(DEPTH_FOLDER, lambda f, d: VisionModel(f, d, "AutoModelForDepthEstimation"))
        cfg = self.vm.model.config
        # Relative models predict inverse depth (disparity); metric ones metres.
        self.larger_is_closer = getattr(cfg, "depth_estimation_type", "relative") != "metric"
        self.version = f"{self.vm.model_type}-{'relative' if self.larger_is_closer else 'metric'}"
        self.config = {"weights": store.weights(DEPTH_FOLDER)}

    def maps(self, frames: Sequence[np.ndarray], batch_size: int = 4) -> list[np.ndarray]:
        torch = torch_module()
        out: list[np.ndarray] = []
        for i in range(0, len(frames), batch_size):
            chunk = list(frames[i:i + batch_size])
            inputs = self.vm.inputs(chunk)
            with self.store.on_device():
                pred = self.vm.model(**inputs).predicted_depth.float()
            for f, frame in enumerate(chunk):
                h, w = frame.shape[:2]
                up = torch.nn.functional.interpolate(pred[f][None, None], size=(h, w), mode="bilinear",
                                                     align_corners=False)
                out.append(up[0, 0].cpu().numpy())
        return out


def depth_change(maps: Sequence[np.ndarray]) -> float:
    """Mean absolute change between consecutive depth maps, each scaled to 0-1 (scene-depth stability)."""
    if len(maps) < 2:
        return 0.0
    small = []
    for m in maps:
        s = cv2.resize(m.astype(np.float32), (64, 64), interpolation=cv2.INTER_AREA)
        span = float(s.max() - s.min()) or 1.0
        small.append((s - s.min()) / span)
    return float(np.mean([np.abs(a - b).mean() for a, b in zip(small[:-1], small[1:])]))


class DepthProbe:
    """``depth_probe``: per frame, which of ``query_a`` / ``query_b`` is in front and how much of the
    one behind is hidden; with one query, how close the entity is relative to the scene; always the
    stability of the scene's depth over time. Dense frames, thinned to ``max_frames``."""

    name = "depth_probe"
    max_frames = 16

    def __init__(self, depth: DepthModel, localizer: Localizer | None):
        self.depth = depth
        self.localizer = localizer
        self.version = depth.version + (f"+{localizer.version}" if localizer else "")
        self.config = {"depth": getattr(depth, "config", None), "localizer": getattr(localizer, "config", None)}

    def run(self, args: dict[str, Any], media: MediaStore) -> dict[str, Any]:
        on = args.get("on", "output_video")
        queries = [q for q in (args.get("query_a"), args.get("query_b")) if q and str(q).strip()]
        fr = media.frames(on, DENSE_POLICY)
        idx = probe_frames(fr, self.max_frames)
        frames = [fr.array[i] for i in idx]
        maps = self.depth.maps(frames)
        record: dict[str, Any] = {
            "ok": True, "backend": self.version, "on": on, "n_frames": len(idx),
            "larger_is_closer": self.depth.larger_is_closer,
            "depth_change": round(depth_change(maps), 4),
        }
        if not queries:
            return record
        if self.localizer is None:
            record["entities"] = "not localized: the detector is unavailable"
            return record
        found = self.localizer.detect(frames, [str(q) for q in queries])
        per_frame = []
        for t_i, maps_i, dets in zip(idx, maps, found):
            close = closeness(maps_i, self.depth.larger_is_closer)
            boxes = [d[0].box if d else None for d in dets]
            entry: dict[str, Any] = {"t": round(fr.timestamps[t_i], 3), "found": [b is not None for b in boxes]}
            if boxes[0] is not None:
                # Relative closeness of the entity within the frame: 0 farthest pixel, 1 nearest.
                lo, hi = float(close.min()), float(close.max())
                entry["a_closeness"] = round((region_closeness(close, boxes[0]) - lo) / ((hi - lo) or 1.0), 4)
            if len(boxes) == 2 and boxes[0] is not None and boxes[1] is not None:
                front = front_entity(close, boxes[0], boxes[1])
                entry["front"] = front
                if front in ("a", "b"):
                    fb, bb = (boxes[0], boxes[1]) if front == "a" else (boxes[1], boxes[0])
                    entry["occlusion"] = round(depth_occlusion(close, fb, bb), 4)
                    entry["box_overlap"] = round(box_overlap(fb, bb), 4)
            per_frame.append(entry)
        record["query_a"] = queries[0]
        if len(queries) == 2:
            record["query_b"] = queries[1]
            fronts = [e["front"] for e in per_frame if "front" in e]
            record["n_both_found"] = len(fronts)
            record["a_in_front_fraction"] = fraction(fronts, "a")
            record["b_in_front_fraction"] = fraction(fronts, "b")
            a_frac, b_frac = record["a_in_front_fraction"], record["b_in_front_fraction"]
            record["front"] = (None if a_frac is None else
                               queries[0] if a_frac > 0.5 else queries[1] if (b_frac or 0) > 0.5 else "undetermined")
            occ = [e["occlusion"] for e in per_frame if "occlusion" in e]
            record["occlusion_mean"] = round(float(np.mean(occ)), 4) if occ else None
        closes = [e["a_closeness"] for e in per_frame if "a_closeness" in e]
        record["a_found_fraction"] = round(len(closes) / len(per_frame), 4) if per_frame else 0.0
        record["a_closeness_mean"] = round(float(np.mean(closes)), 4) if closes else None
        record["frames"] = per_frame
        return record
