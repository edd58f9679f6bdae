"""``ocr``: recognized text lines on sampled output frames, and how well they match a target.

The default backend is rapidocr (ONNX models bundled in its wheel, no download). The engine loads
once per tool object, which the tool suite keeps for the life of the process.
"""

from __future__ import annotations

import difflib
import re
import threading
from typing import Any

import numpy as np

from argus_dagster.infra.media import JUDGE_POLICY
from argus_dagster.method.evidence.media_store import MediaStore


def normalize_text(s: str) -> str:
    return re.sub(r"[^0-9a-z]+", "", s.lower())


def ocr_record(backend: str, lines: list[dict[str, Any]], per_frame: list[list[str]], target: str) -> dict[str, Any]:
    """The evidence record of any OCR backend: lines read, and with a target, how well it is matched."""
    record: dict[str, Any] = {"ok": True, "backend": backend, "n_frames": len(per_frame), "lines": lines[:50]}
    if target:
        ratios = [match_ratio(target, t) for t in per_frame]
        record.update({
            "target": target,
            "match": round(max(ratios), 4),
            "frames_with_match": round(float(np.mean([r >= 0.8 for r in ratios])), 4),
        })
    return record


def match_ratio(target: str, lines: list[str]) -> float:
    """Best fuzzy match (0-1) of ``target`` against each line and their concatenation."""
    t = normalize_text(target)
    if not t:
        return 0.0
    candidates = [normalize_text(x) for x in lines] + [normalize_text("".join(lines))]
    best = 0.0
    for c in candidates:
        if not c:
            continue
        if t in c:
            return 1.0
        best = max(best, difflib.SequenceMatcher(None, t, c).ratio())
        # Target embedded in a longer line: compare against windows of the target's length.
        for i in range(0, max(1, len(c) - len(t) + 1)):
            best = max(best, difflib.SequenceMatcher(None, t, c[i:i + len(t)]).ratio())
    return best


class RapidOcr:
    name = "ocr"
    version = "rapidocr-1.4.4"
    max_frames = 4

    def __init__(self) -> None:
        self._engine = None
        self._lock = threading.Lock()

    def _load(self):
        with self._lock:
            if self._engine is None:
                from rapidocr_onnxruntime import RapidOCR  # deferred: start-up time (onnxruntime; only an OCR step needs it)

                self._engine = RapidOCR()
        return self._engine

    def run(self, args: dict[str, Any], media: MediaStore) -> dict[str, Any]:
        fr = media.frames(args.get("on", "output_video"), JUDGE_POLICY)
        pick = np.linspace(0, len(fr.array) - 1, min(self.max_frames, len(fr.array))).round().astype(int)
        engine = self._load()
        lines: list[dict[str, Any]] = []
        per_frame: list[list[str]] = []
        for i in sorted(set(pick.tolist())):
            result, _ = engine(np.ascontiguousarray(fr.array[i][..., ::-1]))
            texts = [str(r[1]) for r in (result or [])]
            per_frame.append(texts)
            lines += [{"text": str(r[1]), "conf": round(float(r[2]), 3), "t": round(fr.timestamps[i], 3)}
                      for r in (result or [])]
        return ocr_record("rapidocr", lines, per_frame, str(args.get("target") or ""))
