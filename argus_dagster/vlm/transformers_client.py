"""The local transformers client: a vision-language model on local disk, loaded once per client.

This module loads ``torch`` and ``transformers``; :mod:`resources.vlm` imports it when it builds a
local client, so loading the definitions does not.
"""

from __future__ import annotations

import functools
import threading
import time
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from PIL import Image
from transformers import AutoModelForImageTextToText, AutoProcessor

from argus_dagster.infra.identities import checkpoint_sha256
from argus_dagster.infra.media import MAX_SIDE, resize_longest
from argus_dagster.vlm.images import image_array, is_image_part
from argus_dagster.vlm.ledger import CallStats
from argus_dagster.vlm.reply import Reply, VlmError


class TransformersClient:
    """A vision-language model on local disk (``AutoModelForImageTextToText`` + ``AutoProcessor``).

    Loaded once; generation is serialized with a lock, because one model on one device gains nothing
    from concurrent ``generate`` calls and would need the memory twice. Greedy decoding.
    """

    backend = "transformers"

    def __init__(self, path: str | Path, device: str = "cpu", max_new_tokens: int = 8192, name: str = ""):
        path = Path(path)
        if not (path / "config.json").is_file():
            raise VlmError(f"local VLM not found: {path / 'config.json'} is missing "
                           "(set ARGUS_VLM_PATH to a folder saved with save_pretrained)")
        self.model = name or path.name
        self.path = path
        self.device = device
        self.max_new_tokens = max_new_tokens
        self.processor = AutoProcessor.from_pretrained(str(path), local_files_only=True)
        # cast: transformers' @wraps(torch.nn.Module.to) on PreTrainedModel.to hides the bound self from mypy
        self.net = cast(Any, AutoModelForImageTextToText.from_pretrained(str(path), local_files_only=True)).to(device).eval()
        self._lock = threading.Lock()

    @functools.cached_property
    def weights(self) -> str | None:
        """The checkpoint's content hash (:func:`~argus_dagster.infra.identities.checkpoint_sha256`): part of
        every cache identity this client's answers have, so new weights under the same name are asked again."""
        return checkpoint_sha256(self.path)

    def chat(self, messages: list[dict], *, max_tokens: int = 1024, temperature: float = 0.0,
             stats: CallStats | None = None, thinking: bool | None = None) -> Reply:
        if stats is None:  # still counted by any open cost_ledger block
            stats = CallStats()
        convo, images = [], []
        for m in messages:
            parts = m["content"] if isinstance(m["content"], list) else [m["content"]]
            content = []
            for p in parts:
                if is_image_part(p):
                    images.append(Image.fromarray(np.ascontiguousarray(resize_longest(image_array(p), MAX_SIDE))))
                    content.append({"type": "image"})
                else:
                    content.append({"type": "text", "text": str(p)})
            convo.append({"role": m["role"], "content": content})
        t0 = time.perf_counter()
        try:
            # The same switch as on servers: a template that knows `enable_thinking` skips the thinking block.
            switch = {} if thinking is None else {"enable_thinking": thinking}
            prompt = self.processor.apply_chat_template(convo, add_generation_prompt=True, tokenize=False, **switch)
            inputs = self.processor(text=prompt, images=images or None, return_tensors="pt").to(self.device)
            with self._lock, torch.inference_mode():
                out = self.net.generate(**inputs, max_new_tokens=min(max_tokens, self.max_new_tokens), do_sample=False)
            n_in = inputs["input_ids"].shape[1]
            text = self.processor.decode(out[0, n_in:], skip_special_tokens=True)
        except Exception as exc:  # a model that cannot take this input: the caller records it
            if stats is not None:
                stats.add_request("local", time.perf_counter() - t0, 0, "error")
            raise VlmError(f"local VLM {self.path}: generation failed: {type(exc).__name__}: {exc}") from exc
        latency = time.perf_counter() - t0
        if stats is not None:
            stats.add_request("local", latency, 0, "ok", images=len(images))
        return Reply(text=text, latency_s=latency, attempts=1, endpoint="local", prompt_tokens=int(n_in),
                     completion_tokens=int(out.shape[1] - n_in))
