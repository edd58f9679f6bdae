"""Pure geometry behind the localization tools: boxes, counts, left/right, front/back and occlusion.

Boxes are ``(x0, y0, x1, y1)`` in pixels of the frame they were found in. Depth maps are float
arrays of the frame's size; ``larger_is_closer`` says which way they point (relative models such as
Depth Anything and DPT predict inverse depth, larger = closer; metric models predict metres).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

Box = tuple[float, float, float, float]


def area(b: Box) -> float:
    return max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])


def intersection(a: Box, b: Box) -> float:
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    return max(0.0, w) * max(0.0, h)


def iou(a: Box, b: Box) -> float:
    inter = intersection(a, b)
    union = area(a) + area(b) - inter
    return inter / union if union > 0 else 0.0


def center(b: Box) -> tuple[float, float]:
    return (b[0] + b[2]) / 2.0, (b[1] + b[3]) / 2.0


def nms(boxes: Sequence[Box], scores: Sequence[float], iou_threshold: float = 0.5) -> list[int]:
    """Indices of the boxes kept by greedy non-maximum suppression, best first."""
    order = list(np.argsort(-np.asarray(scores, dtype=float), kind="stable"))
    keep: list[int] = []
    for i in order:
        if all(iou(boxes[i], boxes[k]) <= iou_threshold for k in keep):
            keep.append(int(i))
    return keep


def count_instances(boxes: Sequence[Box], scores: Sequence[float], threshold: float,
                    iou_threshold: float = 0.5) -> int:
    """Distinct instances: boxes scoring at least ``threshold`` after non-maximum suppression."""
    kept = [i for i, s in enumerate(scores) if s >= threshold]
    return len(nms([boxes[i] for i in kept], [scores[i] for i in kept], iou_threshold))


def median_count(counts: Sequence[int]) -> int:
    """The count over frames: the median, rounded half down (a flicker of extras does not count)."""
    if not counts:
        return 0
    return int(np.floor(np.median(np.asarray(counts, dtype=float))))


def horizontal_relation(a: Box, b: Box, frame_width: float, margin: float = 0.02) -> str:
    """``left`` when ``a``'s centre is left of ``b``'s by more than ``margin`` of the frame width,
    ``right`` in the mirror case, ``same`` otherwise."""
    dx = center(a)[0] - center(b)[0]
    if abs(dx) <= margin * frame_width:
        return "same"
    return "left" if dx < 0 else "right"


def shrink(b: Box, factor: float) -> Box:
    """The central part of a box (``factor`` of its width and height): less background at the edges."""
    cx, cy = center(b)
    hw, hh = (b[2] - b[0]) * factor / 2.0, (b[3] - b[1]) * factor / 2.0
    return cx - hw, cy - hh, cx + hw, cy + hh


def _pixels(depth: np.ndarray, b: Box) -> np.ndarray:
    h, w = depth.shape
    x0, y0 = int(np.clip(np.floor(b[0]), 0, w - 1)), int(np.clip(np.floor(b[1]), 0, h - 1))
    x1, y1 = int(np.clip(np.ceil(b[2]), x0 + 1, w)), int(np.clip(np.ceil(b[3]), y0 + 1, h))
    return depth[y0:y1, x0:x1]


def closeness(depth: np.ndarray, larger_is_closer: bool) -> np.ndarray:
    """The depth map oriented so that larger always means closer to the camera."""
    d = depth.astype(np.float64)
    return d if larger_is_closer else -d


def region_closeness(close: np.ndarray, b: Box, inner: float = 0.5) -> float:
    """Median closeness in the central part of a box (the entity, not the background around it)."""
    return float(np.median(_pixels(close, shrink(b, inner))))


def front_entity(close: np.ndarray, a: Box, b: Box, tolerance: float = 0.05) -> str:
    """``a`` or ``b``: which is in front; ``tie`` when their closeness differs by less than
    ``tolerance`` of the map's range."""
    ca, cb = region_closeness(close, a), region_closeness(close, b)
    span = float(close.max() - close.min()) or 1.0
    if abs(ca - cb) <= tolerance * span:
        return "tie"
    return "a" if ca > cb else "b"


def box_overlap(front: Box, back: Box) -> float:
    """Share of the back entity's box covered by the front one's box."""
    return intersection(front, back) / area(back) if area(back) > 0 else 0.0


def depth_occlusion(close: np.ndarray, front: Box, back: Box, tolerance: float = 0.05) -> float:
    """Share of the back entity's box hidden by the front entity.

    A pixel of the back box is hidden when it also lies in the front box and is at least as close as
    the front entity's median closeness (less ``tolerance`` of the map's range): the front entity's
    own pixels, not background that the front box happens to span.
    """
    h, w = close.shape
    span = float(close.max() - close.min()) or 1.0
    level = region_closeness(close, front) - tolerance * span
    ys, xs = np.mgrid[0:h, 0:w]
    in_back = (xs >= back[0]) & (xs < back[2]) & (ys >= back[1]) & (ys < back[3])
    in_front = (xs >= front[0]) & (xs < front[2]) & (ys >= front[1]) & (ys < front[3])
    n_back = int(in_back.sum())
    if n_back == 0:
        return 0.0
    return float((in_back & in_front & (close >= level)).sum() / n_back)


def fraction(values: Sequence[str], wanted: str) -> float | None:
    """Share of ``values`` equal to ``wanted`` (None for no values)."""
    return round(sum(v == wanted for v in values) / len(values), 4) if values else None
