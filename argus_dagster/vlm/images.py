"""Frames as a VLM receives them: JPEG bytes and data URLs, the longest side at most
:data:`~argus_dagster.infra.media.MAX_SIDE`.

At the quality used here a JPEG is several times smaller than the same frame as PNG, which keeps
requests small; a :class:`~argus_dagster.infra.media.FrameImage` carries its encoding, so a frame sent in
many requests is encoded once.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from argus_dagster.infra.media import JPEG_QUALITY, MAX_SIDE, FrameImage, MediaError, encode_jpeg
from argus_dagster.vlm.reply import VlmError


def encode_image(frame: np.ndarray, max_side: int = MAX_SIDE, quality: int = JPEG_QUALITY) -> bytes:
    """JPEG bytes of an RGB frame with its longest side at most ``max_side``."""
    try:
        return encode_jpeg(frame, max_side, quality)
    except MediaError as exc:
        raise VlmError(str(exc)) from None


def frame_jpeg(frame: np.ndarray | FrameImage) -> bytes:
    """A frame's JPEG bytes; a :class:`FrameImage` reuses its encoding."""
    if isinstance(frame, FrameImage):
        try:
            return frame.jpeg()
        except MediaError as exc:
            raise VlmError(str(exc)) from None
    return encode_image(frame)


def is_image_part(part: Any) -> bool:
    """Whether a message part is a frame (not text)."""
    return isinstance(part, (np.ndarray, FrameImage))


def image_array(part: np.ndarray | FrameImage) -> np.ndarray:
    return part.array if isinstance(part, FrameImage) else part

