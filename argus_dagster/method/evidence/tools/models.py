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

T = TypeVar("T")

DEVICES = ("cpu", "cuda")


def torch_module():
    """torch, imported on first use: the weight-free tools, the code location and ``argus`` never load it."""
    import torch  # deferred: torch loads only when a model-backed tool loads or runs

    return torch


def transformers_module():
    """transformers, imported on first use (as :func:`torch_module`)."""
    import transformers  # deferred: transformers loads only when a model-backed tool loads

    return transformers


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
            if not torch_module().cuda.is_available():
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
        with self._device_lock, torch_module().inference_mode():
            yield
