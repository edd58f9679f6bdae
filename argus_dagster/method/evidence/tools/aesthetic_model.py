"""``aesthetic`` with learned weights: an image embedding and a regression head, 0-100 per frame.

The ``aesthetic/`` folder holds
- an image backbone checkpoint in the Hugging Face layout (``config.json``, weights, and
  ``preprocessor_config.json``): a CLIP model (its projected image features are used) or a
  self-supervised backbone such as DINOv2 (its pooled class token);
- ``head.safetensors``: linear layers ``layers.<i>.weight`` (out x in) and ``layers.<i>.bias``,
  applied in increasing ``<i>`` with no activation between them, ending in one output. The LAION
  improved aesthetic predictor (CLIP ViT-L/14, ``sac+logos+ava1-l14-linearMSE.pth``) has exactly this
  form: its dropout layers hold no weights, so its state dict saved with ``safetensors`` loads as is;
- ``head.json``: ``{"normalize_embedding": true, "score_range": [1, 10]}``: whether the embedding is
  L2-normalized before the head (LAION: yes), and the head's output range, mapped linearly to 0-100.

The classical measures of the embedded default are reported beside the learned score.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file

from argus_dagster.infra.media import JUDGE_POLICY
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.evidence.tools.classical import ClassicalAesthetic
from argus_dagster.method.evidence.tools.models import ModelStore
from argus_dagster.method.evidence.tools.vision import VisionModel, raw_embeddings

AESTHETIC_FOLDER = "aesthetic"
HEAD_FILES = ("config.json", "head.safetensors", "head.json")


class AestheticHead:
    """A chain of linear layers read from ``head.safetensors``, with its ``head.json`` settings."""

    def __init__(self, folder: Path):

        tensors = load_file(str(folder / "head.safetensors"))
        layer_ids = sorted({int(m.group(1)) for k in tensors if (m := re.fullmatch(r"layers\.(\d+)\.weight", k))})
        if not layer_ids:
            raise ValueError(f"{folder / 'head.safetensors'}: no 'layers.<i>.weight' tensors")
        self.layers = [(tensors[f"layers.{i}.weight"].astype(np.float32),
                        tensors.get(f"layers.{i}.bias", np.zeros(tensors[f"layers.{i}.weight"].shape[0])).astype(np.float32))
                       for i in layer_ids]
        for (w1, _), (w2, _) in zip(self.layers[:-1], self.layers[1:]):
            if w1.shape[0] != w2.shape[1]:
                raise ValueError(f"{folder / 'head.safetensors'}: layer shapes {w1.shape} and {w2.shape} do not chain")
        if self.layers[-1][0].shape[0] != 1:
            raise ValueError(f"{folder / 'head.safetensors'}: the last layer must have one output")
        settings = json.loads((folder / "head.json").read_text())
        self.normalize = bool(settings.get("normalize_embedding", True))
        lo, hi = settings.get("score_range", [1, 10])
        if not hi > lo:
            raise ValueError(f"{folder / 'head.json'}: score_range must be [low, high] with high > low")
        self.score_range = (float(lo), float(hi))
        self.in_dim = self.layers[0][0].shape[1]

    def __call__(self, embeddings: np.ndarray) -> np.ndarray:
        x = embeddings.astype(np.float32)
        if self.normalize:
            x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
        for w, b in self.layers:
            x = x @ w.T + b
        return x[:, 0]

    def to_quality(self, raw: np.ndarray) -> np.ndarray:
        lo, hi = self.score_range
        return np.clip(100.0 * (raw - lo) / (hi - lo), 0.0, 100.0)


class LearnedAesthetic:
    name = "aesthetic"

    def __init__(self, store: ModelStore):
        self.store = store

        def load(folder: Path, device: str) -> tuple[VisionModel, AestheticHead]:
            return VisionModel(folder, device), AestheticHead(folder)

        self.model, self.head = store.get(AESTHETIC_FOLDER, load, required=HEAD_FILES)
        self.classical = ClassicalAesthetic()
        self.version = f"learned-{self.model.model_type}-{len(self.head.layers)}L"
        self.config = {"weights": store.weights(AESTHETIC_FOLDER)}

    def run(self, args: dict[str, Any], media: MediaStore) -> dict[str, Any]:
        on = args.get("on", "output_video")
        fr = media.frames(on, JUDGE_POLICY)
        with self.store.on_device():
            emb = raw_embeddings(self.model, list(fr.array))
        if emb.shape[1] != self.head.in_dim:
            return {"ok": False, "error": f"aesthetic head expects {self.head.in_dim}-d embeddings, "
                                          f"the backbone gives {emb.shape[1]} (head and backbone do not match)"}
        raw = self.head(emb)
        quality = self.head.to_quality(raw)
        classical = self.classical.run(args, media)
        return {
            "ok": True,
            "backend": "learned",
            "model": self.version,
            "quality": round(float(quality.mean()), 2),
            "quality_min": round(float(quality.min()), 2),
            "worst_frame_time": round(fr.timestamps[int(np.argmin(quality))], 3),
            "raw_score_mean": round(float(raw.mean()), 4),
            "n_frames": len(quality),
            "technical_quality": classical.get("quality"),
            **{k: v for k, v in classical.items() if k not in ("ok", "backend", "quality", "quality_min", "worst_frame_time")},
        }
