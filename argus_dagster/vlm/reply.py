"""What one VLM call gives back (:class:`Reply`), and the two ways a call fails.

A message is ``{"role": ..., "content": [part, ...]}`` where a part is text (``str``) or an RGB frame
(``numpy`` array, H x W x 3, uint8, or a :class:`~argus_dagster.infra.media.FrameImage`, which carries its
JPEG so a frame sent in many requests is encoded once); every client answers a list of them with a
:class:`Reply` or raises :class:`VlmError`.
"""

from __future__ import annotations

from dataclasses import dataclass

# A client keeps at most this many characters of an answer (a longer one is cut, and its Reply says where).
DEFAULT_MAX_ANSWER_CHARS = 200_000


class VlmError(RuntimeError):
    """A call that did not produce an answer (retries exhausted, a non-retryable status, no model)."""


class ParseError(ValueError):
    """An answer that is empty or does not contain what the caller asked for."""


@dataclass
class Reply:
    """One answer: its text, what it took (latency, attempts, the endpoint as shown) and the tokens a
    server reported."""

    text: str
    latency_s: float
    attempts: int
    endpoint: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cut: int | None = None  # the answer was longer than the client keeps: cut at this many characters
    cached_tokens: int | None = None  # prompt tokens the server took from its prefix cache, where it says
