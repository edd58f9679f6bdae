"""Text-prompted localization: an open-vocabulary detector on sampled frames, boxes tracked between.

The detector is OWLv2 (or OWL-ViT) through ``transformers``; its image processor has a PIL backend,
so it runs without torchvision. Detection runs on every ``detect_every``-th densely sampled frame and
an OpenCV template match carries each box to the frames in between (forward from the previous
detection, backward from the next), so coverage describes the whole clip, not only detected frames.
"""

from __future__ import annotations

import re
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Sequence, cast

import cv2
import numpy as np

from argus_dagster.infra.media import DENSE_POLICY, JUDGE_POLICY, Frames
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.evidence.tools.geometry import Box, nms
from argus_dagster.method.evidence.tools.models import ModelStore, torch_module, transformers_module
from argus_dagster.method.evidence.vocabulary import crop_id_for

DETECTOR_FOLDER = "detector"
SUPPORTED_DETECTORS = ("owlv2", "owlvit")
MIN_BOX_SIDE = 2.0  # pixels; thinner boxes (clipped at the frame edge) hold no entity


@dataclass(frozen=True)
class Detection:
    score: float
    box: Box

    def record(self) -> dict[str, Any]:
        return {"score": round(self.score, 4), "box": [round(v, 1) for v in self.box]}


class Detector:
    """An OWL-family detector: per frame and text query, scored boxes after non-maximum suppression."""

    def __init__(self, folder, device: str):
        transformers = transformers_module()
        self.device = device
        self.processor = transformers.AutoProcessor.from_pretrained(str(folder), local_files_only=True)
        self.model = transformers.AutoModelForZeroShotObjectDetection.from_pretrained(str(folder), local_files_only=True).to(device).eval()
        self.model_type = self.model.config.model_type
        self.max_text_length = self.model.config.text_config.max_position_embeddings
        if self.model_type not in SUPPORTED_DETECTORS:
            raise ValueError(f"{folder}: detector model_type {self.model_type!r} is not supported "
                             f"(expected one of {SUPPORTED_DETECTORS}: an OWLv2 or OWL-ViT checkpoint)")

    def _boxes(self, pred: np.ndarray, h: int, w: int) -> np.ndarray:
        """Normalized (cx, cy, w, h) to pixel corners. OWLv2 pads the frame to a square at the bottom
        and right before resizing, so its boxes are relative to the longer side."""
        sx, sy = (max(h, w), max(h, w)) if self.model_type == "owlv2" else (w, h)
        cx, cy, bw, bh = pred[:, 0] * sx, pred[:, 1] * sy, pred[:, 2] * sx, pred[:, 3] * sy
        out = np.stack([cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2], axis=1)
        return np.clip(out, 0, [w, h, w, h])

    def detect(self, frames: Sequence[np.ndarray], queries: Sequence[str], threshold: float,
               batch_size: int = 4, iou_threshold: float = 0.5) -> list[list[list[Detection]]]:
        """``result[frame][query]``: detections scoring at least ``threshold``, best first."""
        torch = torch_module()
        out: list[list[list[Detection]]] = []
        for i in range(0, len(frames), batch_size):
            chunk = list(frames[i:i + batch_size])
            batch = self.processor(text=[list(queries)] * len(chunk), images=chunk, return_tensors="pt",
                                   padding=True, truncation=True, max_length=self.max_text_length)
            batch = {k: v.to(self.device) for k, v in batch.items()}
            with torch.inference_mode():
                res = self.model(**batch)
            scores = torch.sigmoid(res.logits.float()).cpu().numpy()  # (B, patches, queries)
            preds = res.pred_boxes.float().cpu().numpy()  # (B, patches, 4)
            for f, frame in enumerate(chunk):
                boxes = self._boxes(preds[f], *frame.shape[:2])
                per_query = []
                for q in range(len(queries)):
                    s = scores[f, :, q]
                    size_ok = ((boxes[:, 2] - boxes[:, 0]) >= MIN_BOX_SIDE) & ((boxes[:, 3] - boxes[:, 1]) >= MIN_BOX_SIDE)
                    idx = np.flatnonzero((s >= threshold) & size_ok)
                    cand = [cast(Box, tuple(map(float, boxes[j]))) for j in idx]  # a row of boxes holds 4 numbers
                    keep = nms(cand, s[idx].tolist(), iou_threshold)
                    per_query.append([Detection(float(s[idx[k]]), cand[k]) for k in keep])
                out.append(per_query)
        return out


def propagate_box(prev: np.ndarray, nxt: np.ndarray, box: Box, search: float = 0.5) -> tuple[Box, float] | None:
    """Where ``box`` of frame ``prev`` went in frame ``nxt``: normalized cross-correlation of the box's
    patch within a window ``search`` box-sizes around it. Returns the moved box and the match score
    (-1..1), or None for a box too small to match."""
    h, w = prev.shape[:2]
    x0, y0, x1, y1 = (int(round(v)) for v in box)
    x0, y0, x1, y1 = max(0, x0), max(0, y0), min(w, x1), min(h, y1)
    bw, bh = x1 - x0, y1 - y0
    if bw < 4 or bh < 4:
        return None
    g_prev = cv2.cvtColor(prev, cv2.COLOR_RGB2GRAY)
    g_next = cv2.cvtColor(nxt, cv2.COLOR_RGB2GRAY)
    template = g_prev[y0:y1, x0:x1]
    mx, my = int(bw * search) + 1, int(bh * search) + 1
    wx0, wy0 = max(0, x0 - mx), max(0, y0 - my)
    wx1, wy1 = min(w, x1 + mx), min(h, y1 + my)
    window = g_next[wy0:wy1, wx0:wx1]
    if template.std() < 1e-3:  # a flat patch matches anywhere: keep it in place, score by equality
        same = float(np.abs(g_next[y0:y1, x0:x1].astype(float) - template).mean() < 8.0)
        return (float(x0), float(y0), float(x1), float(y1)), same
    res = cv2.matchTemplate(window, template, cv2.TM_CCOEFF_NORMED)
    _, score, _, (lx, ly) = cv2.minMaxLoc(res)
    nx0, ny0 = wx0 + lx, wy0 + ly
    return (float(nx0), float(ny0), float(nx0 + bw), float(ny0 + bh)), float(score)


def track_boxes(frames: np.ndarray, detected: dict[int, Detection | None], min_match: float = 0.5
                ) -> list[tuple[Detection | None, str]]:
    """A box for every frame from detections on some of them.

    Detection frames keep the detector's answer (present or absent). Every other frame takes the
    better of the box carried forward from the previous detection and backward from the next one;
    a carried box is dropped once its match score falls below ``min_match``. A carried box's score
    is its anchor detection's score times the match score.
    """
    n = len(frames)
    fwd: list[Detection | None] = [None] * n
    bwd: list[Detection | None] = [None] * n
    for direction, out in ((1, fwd), (-1, bwd)):
        order = range(n) if direction == 1 else range(n - 1, -1, -1)
        current: Detection | None = None
        last = None
        for i in order:
            if i in detected:
                current = detected[i]
                out[i] = current
                last = i
                continue
            if current is None or last is None:
                continue
            moved = propagate_box(frames[last], frames[i], current.box)
            if moved is None or moved[1] < min_match:
                current = None
                continue
            current = Detection(current.score * moved[1], moved[0])
            out[i] = current
            last = i
    result: list[tuple[Detection | None, str]] = []
    for i in range(n):
        if i in detected:
            result.append((detected[i], "detected" if detected[i] else "absent"))
            continue
        options = [d for d in (fwd[i], bwd[i]) if d is not None]
        best = max(options, key=lambda d: d.score) if options else None
        result.append((best, "tracked" if best else "lost"))
    return result


def split_entities(entities: Any) -> list[str]:
    """``"a cat, a dog"``, ``"a cat and a dog"`` or a list: the entity names, in the order given."""
    if isinstance(entities, (list, tuple)):
        parts = [str(e) for e in entities]
    else:
        parts = re.split(r"\s*(?:,|;|\||\band\b|\bvs\.?\b)\s*", str(entities or ""))
    return [p.strip() for p in parts if p and p.strip()]


@dataclass
class Track:
    query: str
    frames: Frames
    boxes: list[tuple[Detection | None, str]]

    def best(self) -> tuple[int, Detection] | None:
        found = [(i, d) for i, (d, src) in enumerate(self.boxes) if d is not None and src == "detected"]
        if not found:
            return None
        return max(found, key=lambda x: x[1].score)


class Localizer:
    """The detector plus tracking, shared by ``sam_track``, ``crop_compare``, ``spatial_relation`` and
    ``depth_probe``. Tracks of one candidate are kept for its later steps (``crop_compare`` crops the
    best box ``sam_track`` published) and forgotten with its media store."""

    def __init__(self, store: ModelStore, threshold: float = 0.1, detect_every: int = 4):
        self.store = store
        self.detector: Detector = store.get(DETECTOR_FOLDER, Detector)
        self.threshold = threshold
        self.detect_every = detect_every
        self.version = f"{self.detector.model_type}-t{threshold}"
        # Part of the identity of every step that uses it: each setting changes the tracks found.
        self.config = {"detector": self.detector.model_type, "weights": store.weights(DETECTOR_FOLDER),
                       "threshold": threshold, "detect_every": detect_every}
        self._tracks: weakref.WeakKeyDictionary[MediaStore, dict[tuple[str, str], Track]] = weakref.WeakKeyDictionary()
        self._tracks_lock = threading.Lock()  # candidates may run in parallel threads

    def detect(self, frames: Sequence[np.ndarray], queries: Sequence[str]) -> list[list[list[Detection]]]:
        with self.store.on_device():
            return self.detector.detect(frames, queries, self.threshold)

    def track(self, media: MediaStore, media_id: str, query: str) -> Track:
        with self._tracks_lock:
            board = self._tracks.setdefault(media, {})
        key = (media_id, query.lower())
        if key not in board:
            fr = media.frames(media_id, DENSE_POLICY)
            n = len(fr.array)
            keys = sorted(set(range(0, n, self.detect_every)) | {n - 1})
            found = self.detect([fr.array[i] for i in keys], [query])
            detected = {i: (dets[0][0] if dets[0] else None) for i, dets in zip(keys, found)}
            board[key] = Track(query, fr, track_boxes(fr.array, detected))
        return board[key]

    def published(self, media: MediaStore, media_id: str, query: str) -> Track | None:
        """A track ``sam_track`` made earlier on ``media_id``: the same query, else the only one there."""
        with self._tracks_lock:
            board = dict(self._tracks.get(media, {}))
        if (media_id, query.lower()) in board:
            return board[(media_id, query.lower())]
        on_media = [t for (m, _), t in board.items() if m == media_id]
        return on_media[0] if len(on_media) == 1 else None


class SamTrack:
    """``sam_track``: per sampled frame, whether the queried entity is there, its score and box;
    coverage over the clip; the best box, published for ``crop_compare``."""

    name = "sam_track"

    def __init__(self, localizer: Localizer):
        self.localizer = localizer
        self.version = localizer.version
        self.config = {"localizer": getattr(localizer, "config", None)}

    def run(self, args: dict[str, Any], media: MediaStore) -> dict[str, Any]:
        on, query = args.get("on", "output_video"), str(args.get("query") or "").strip()
        if not query:
            return {"ok": False, "error": "sam_track needs a non-empty 'query' (the entity to find)"}
        track = self.localizer.track(media, on, query)
        n = len(track.boxes)
        found = [d is not None for d, _ in track.boxes]
        detected = [(d, s) for d, s in track.boxes if s in ("detected", "absent")]
        best = track.best()
        return {
            "ok": True,
            "backend": self.version,
            "query": query,
            "on": on,
            "n_frames": n,
            "n_detected_frames": len(detected),
            "coverage": round(sum(found) / n, 4) if n else 0.0,
            "detected_coverage": round(sum(d is not None for d, _ in detected) / len(detected), 4) if detected else 0.0,
            "max_score": round(max((d.score for d, s in detected if d), default=0.0), 4),
            "frames": [{"t": round(t, 3), "found": d is not None, "source": src,
                        **(d.record() if d else {})} for t, (d, src) in zip(track.frames.timestamps, track.boxes)],
            "best": ({"t": round(track.frames.timestamps[best[0]], 3), **best[1].record()} if best else None),
        }


def crop(frame: np.ndarray, box: Box, pad: float = 0.1) -> np.ndarray:
    """The box's region of ``frame`` with ``pad`` of its size around it, clipped to the frame."""
    h, w = frame.shape[:2]
    px, py = (box[2] - box[0]) * pad, (box[3] - box[1]) * pad
    x0, y0 = int(np.clip(np.floor(box[0] - px), 0, w - 1)), int(np.clip(np.floor(box[1] - py), 0, h - 1))
    x1, y1 = int(np.clip(np.ceil(box[2] + px), x0 + 1, w)), int(np.clip(np.ceil(box[3] + py), y0 + 1, h))
    return np.ascontiguousarray(frame[y0:y1, x0:x1])


class CropCompare:
    """``crop_compare``: crops the entity from ``crop_from`` (the best box of an earlier ``sam_track``
    on it, else a fresh detection on its judge frames) and registers ``output_crop``/``source_crop``."""

    name = "crop_compare"

    def __init__(self, localizer: Localizer):
        self.localizer = localizer
        self.version = localizer.version
        self.config = {"localizer": getattr(localizer, "config", None)}

    def run(self, args: dict[str, Any], media: MediaStore) -> dict[str, Any]:
        source = args.get("crop_from", "output_video")
        region = str(args.get("region") or "").strip()
        track = self.localizer.published(media, source, region) if region else None
        best = track.best() if track is not None else None
        if track is not None and best is not None:
            i, det = best
            frame, t, origin = track.frames.array[i], track.frames.timestamps[i], f"sam_track:{track.query}"
        else:
            if not region:
                return {"ok": False, "error": "crop_compare needs 'region' (the entity to crop) or an earlier sam_track"}
            fr = media.frames(source, JUDGE_POLICY)
            found = self.localizer.detect(list(fr.array), [region])
            cands = [(i, per[0][0]) for i, per in enumerate(found) if per[0]]
            if not cands:
                return {"ok": False, "error": f"crop_compare: no {region!r} found in {source} "
                                              f"(detector threshold {self.localizer.threshold})"}
            i, det = max(cands, key=lambda x: x[1].score)
            frame, t, origin = fr.array[i], fr.timestamps[i], "detection"
        image = crop(frame, det.box)
        media_id = crop_id_for(source)
        media.register(media_id, image)
        return {
            "ok": True,
            "backend": self.version,
            "registered": media_id,
            "region": region,
            "crop_from": source,
            "origin": origin,
            "t": round(t, 3),
            "crop_size": [int(image.shape[1]), int(image.shape[0])],
            **det.record(),
        }
