"""Model weights from disk: one folder per model under the models folder, loaded once, on one device.

The models folder (``ARGUS_MODELS_DIR``) holds one Hugging Face checkpoint folder per model
(``dino/``, ``detector/``, ``depth/``, ``aesthetic/``; ``easyocr/`` holds easyocr's own files).
Nothing is ever downloaded: a folder that is missing raises :class:`ModelUnavailable` naming the path,
and the tool suite reports that tool as unavailable. Loaded models are cached by the store, which the
tool suite owns for the life of the process, and inference on one device runs under the store's lock
so that concurrent criteria never run two forward passes on the same GPU at once.
"""

from __future__ import annotations

import hashlib
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import numpy as np

T = TypeVar("T")

DEVICES = ("cpu", "cuda")


class ModelUnavailable(RuntimeError):
    """A model this environment cannot load; the message names the missing path or device."""


class ModelStore:
    """Models under ``root`` on ``device``, each loaded at most once."""

    def __init__(self, root: str | Path | None, device: str = "cpu"):
        if device not in DEVICES and not device.startswith("cuda:"):
            raise ValueError(f"device {device!r}: expected 'cpu', 'cuda' or 'cuda:N'")
        self.root = Path(root) if root else None
        self.device = device
        self._models: dict[str, Any] = {}
        self._digests: dict[str, str] = {}
        self._load_lock = threading.Lock()
        self._device_lock = threading.Lock()

    def folder(self, name: str, required: tuple[str, ...] = ("config.json",)) -> Path:
        """``root/name``, with the files a checkpoint of that kind must have; else :class:`ModelUnavailable`."""
        if self.root is None:
            raise ModelUnavailable(f"no models folder is configured (set ARGUS_MODELS_DIR; {name}/ goes under it)")
        path = self.root / name
        if not path.is_dir():
            raise ModelUnavailable(f"model folder {path} is missing")
        missing = [f for f in required if not (path / f).exists()]
        if missing:
            raise ModelUnavailable(f"model folder {path} lacks {', '.join(missing)}")
        return path

    def check_device(self) -> None:
        if self.device.startswith("cuda"):
            import torch

            if not torch.cuda.is_available():
                raise ModelUnavailable(f"device {self.device!r} requested but torch sees no CUDA device")

    def get(self, name: str, loader: Callable[[Path, str], T], required: tuple[str, ...] = ("config.json",)) -> T:
        """The model under ``name``, loaded by ``loader(folder, device)`` on first use."""
        with self._load_lock:
            if name not in self._models:
                folder = self.folder(name, required)
                self.check_device()
                self._models[name] = loader(folder, self.device)
            return self._models[name]

    def loaded(self) -> list[str]:
        return sorted(self._models)

    def weights(self, name: str) -> str:
        """The content hash of the checkpoint under ``name`` (every file's relative path and bytes),
        computed once: part of the identity of every tool step the model answers, so another
        checkpoint of the same architecture is a new identity. Where the folder lies does not count."""
        with self._load_lock:
            if f"weights:{name}" not in self._digests:
                folder = self.folder(name, ())
                h = hashlib.sha256()
                for f in sorted(p for p in folder.rglob("*") if p.is_file()):
                    h.update(f"{f.relative_to(folder).as_posix()}\n".encode())
                    with open(f, "rb") as fh:
                        for chunk in iter(lambda: fh.read(1 << 22), b""):
                            h.update(chunk)
                    h.update(b"\n")
                self._digests[f"weights:{name}"] = h.hexdigest()
            return self._digests[f"weights:{name}"]

    @contextmanager
    def on_device(self) -> Iterator[None]:
        """Serialize forward passes on this store's device (and disable autograd)."""
        import torch

        with self._device_lock, torch.inference_mode():
            yield


class VisionModel:
    """An image processor and a model from one checkpoint folder, in eval mode on ``device``."""

    def __init__(self, folder: Path, device: str, auto_model: str = "AutoModel"):
        import transformers

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
    import torch

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
