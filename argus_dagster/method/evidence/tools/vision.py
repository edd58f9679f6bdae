"""An image processor and a model from one checkpoint folder, and the image embeddings the model-backed
tools compare. torch and transformers load with the first model, not with this module.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from argus_dagster.method.evidence.tools.models import torch_module, transformers_module


class VisionModel:
    """An image processor and a model from one checkpoint folder, in eval mode on ``device``."""

    def __init__(self, folder: Path, device: str, auto_model: str = "AutoModel"):
        transformers = transformers_module()
        self.folder = folder
        self.device = device
        self.processor = transformers.AutoImageProcessor.from_pretrained(str(folder), local_files_only=True)
        self.model = getattr(transformers, auto_model).from_pretrained(str(folder), local_files_only=True).to(device).eval()
        self.model_type = self.model.config.model_type

    def inputs(self, images: list[np.ndarray], **kwargs) -> dict[str, Any]:
        batch = self.processor(images=list(images), return_tensors="pt", **kwargs)
        return {k: v.to(self.device) for k, v in batch.items()}


def raw_embeddings(vm: VisionModel, images: list[np.ndarray], batch_size: int = 16) -> np.ndarray:
    """Global embeddings (N, D) of RGB images, unnormalized.

    CLIP-style models give their projected image features; self-supervised backbones (DINOv2, DINOv3)
    their pooled output (the normalized class token), or the class token of the last hidden state.
    """
    torch = torch_module()
    out = []
    for i in range(0, len(images), batch_size):
        inputs = vm.inputs(images[i:i + batch_size])
        with torch.inference_mode():
            if hasattr(vm.model, "get_image_features"):
                feats = vm.model.get_image_features(pixel_values=inputs["pixel_values"])
                if not isinstance(feats, torch.Tensor):  # newer transformers return a model output
                    embeds = getattr(feats, "image_embeds", None)
                    feats = embeds if embeds is not None else feats.pooler_output
            else:
                res = vm.model(**inputs)
                pooled = getattr(res, "pooler_output", None)
                feats = pooled if pooled is not None else res.last_hidden_state[:, 0]
        out.append(feats.float().cpu().numpy())
    return np.concatenate(out, axis=0)


def image_embeddings(vm: VisionModel, images: list[np.ndarray], batch_size: int = 16) -> np.ndarray:
    """L2-normalized :func:`raw_embeddings`: cosine similarity is then a dot product."""
    emb = raw_embeddings(vm, images, batch_size)
    return emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
