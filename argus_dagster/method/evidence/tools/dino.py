"""``dino_sim``: cosine similarity of self-supervised image embeddings (DINOv2/DINOv3) of two media."""

from __future__ import annotations

from typing import Any

import numpy as np

from argus_dagster.infra.media import JUDGE_POLICY
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.evidence.tools.models import ModelStore
from argus_dagster.method.evidence.tools.vision import VisionModel, image_embeddings

DINO_FOLDER = "dino"


def aligned_pairs(n_a: int, n_b: int) -> list[tuple[int, int]]:
    """Index pairs comparing two sequences: an image against every frame, two videos at equal relative times."""
    if n_a == 1 or n_b == 1:
        return [(0 if n_a == 1 else i, 0 if n_b == 1 else i) for i in range(max(n_a, n_b))]
    n = min(n_a, n_b)
    ia = np.linspace(0, n_a - 1, n).round().astype(int)
    ib = np.linspace(0, n_b - 1, n).round().astype(int)
    return list(zip(ia.tolist(), ib.tolist()))


class DinoSim:
    """Similarity of identity and appearance, robust to pose and lighting (method §5 ``dino_sim``).

    An image (a crop, a subject image, a reference) against a video is compared with each judge
    frame: the mean tells how well the identity holds, the minimum where it drifts.
    """

    name = "dino_sim"

    def __init__(self, store: ModelStore):
        self.store = store
        self.model = store.get(DINO_FOLDER, lambda folder, device: VisionModel(folder, device))
        self.version = f"{self.model.model_type}-{self.model.model.config.hidden_size}"
        self.config = {"weights": store.weights(DINO_FOLDER)}

    def embed(self, media: MediaStore, media_id: str) -> tuple[np.ndarray, tuple[float, ...]]:
        fr = media.frames(media_id, JUDGE_POLICY)
        with self.store.on_device():
            return image_embeddings(self.model, list(fr.array)), fr.timestamps

    def run(self, args: dict[str, Any], media: MediaStore) -> dict[str, Any]:
        a_id, b_id = args["a"], args["b"]
        ea, ta = self.embed(media, a_id)
        eb, tb = self.embed(media, b_id)
        pairs = aligned_pairs(len(ea), len(eb))
        sims = np.array([float(ea[i] @ eb[j]) for i, j in pairs])
        worst = pairs[int(np.argmin(sims))]
        return {
            "ok": True,
            "backend": self.version,
            "a": a_id,
            "b": b_id,
            "n_pairs": len(pairs),
            "similarity": round(float(sims.mean()), 4),
            "similarity_min": round(float(sims.min()), 4),
            "similarity_max": round(float(sims.max()), 4),
            "worst_time": round((ta[worst[0]] if len(ea) > 1 else tb[worst[1]]), 3),
        }
