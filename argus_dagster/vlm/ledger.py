"""The cost ledger: what VLM calls cost, counted per stage and per row.

Every call is counted in a :class:`CallStats` (latency, tokens, retries, bytes, outcome) that the
calling stage turns into metadata; a :func:`cost_ledger` block also counts the calls of one row's work
(a criterion, a judgment, a rubric) for the row's ``COSTS`` columns. Token counts from a server are
read through :func:`usage_counts`, which clamps them to a sane range.
"""

from __future__ import annotations

import contextvars
import threading
from contextlib import contextmanager
from typing import Any, Iterator, NamedTuple

import numpy as np

from argus_dagster.infra.progress import PROGRESS
from argus_dagster.vlm.reply import Reply

# Every CallStats a block opened with ``cost_ledger`` also receives what is recorded in it (one per thread
# and context: the criterion, judgment or rubric whose cost it is).
_LEDGERS: contextvars.ContextVar[tuple] = contextvars.ContextVar("argus_vlm_ledgers", default=())


@contextmanager
def cost_ledger() -> Iterator["CallStats"]:
    """A :class:`CallStats` that also counts every call recorded in this block (in this thread and
    context), whatever stage's stats it is recorded in: the cost of one row's work."""
    ledger = CallStats()
    token = _LEDGERS.set(_LEDGERS.get() + (ledger,))
    try:
        yield ledger
    finally:
        _LEDGERS.reset(token)


class CallStats:
    """Thread-safe counts of the calls one stage made; :meth:`as_metadata` summarizes them and
    :meth:`costs` gives the ledger a table row carries (its ``COSTS`` columns, :mod:`argus_dagster.infra.tables`).

    Tokens are each answer's ``usage`` (parse retries included: every answer was paid for); cached
    tokens are ``usage.prompt_tokens_details.cached_tokens`` where the server reports it (a
    prefix-caching server: the part of the prompt it did not prefill again). Images and bytes count
    what reached a server (every request that got an answer or timed out, retries included).

    ``requests`` counts what a server saw: every request that reached it (answered, refused with a
    status, timed out on this side, or cut by the server closing its connection), retries included,
    each outcome in ``errors``; an attempt that never connected (refused, unresolvable) is in
    ``errors`` and ``unsent``, not in ``requests``. ``request_seconds`` sums the requests' latencies.
    Token counts arrive clamped (:func:`usage_counts`) and sum in Python integers (no wrap)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls = 0            # logical calls (one answer wanted)
        self.requests = 0         # HTTP requests or generate() calls, retries included
        self.retries = 0          # transport retries
        self.parse_retries = 0    # answers asked again because they did not parse
        self.failures = 0         # logical calls that ended without a usable answer
        self.unsent = 0           # attempts that never reached a server (no connection)
        self.latencies: list[float] = []
        self.request_seconds = 0.0  # the requests' latencies summed
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.cached_tokens = 0
        self.images = 0           # images sent
        self.image_bytes = 0      # their JPEG bytes
        self.bytes_sent = 0       # request bodies
        self.request_bytes: list[int] = []
        self.by_endpoint: dict[str, int] = {}
        self.errors: dict[str, int] = {}

    def _ledgers(self) -> list["CallStats"]:
        return [self] + [led for led in _LEDGERS.get() if led is not self]

    def add_request(self, endpoint: str, latency_s: float, nbytes: int, outcome: str, *, images: int = 0,
                    image_bytes: int = 0, reached: bool = True) -> None:
        PROGRESS.request_done()
        for stats in self._ledgers():
            with stats._lock:
                stats.by_endpoint[endpoint] = stats.by_endpoint.get(endpoint, 0) + 1
                if outcome != "ok":
                    stats.errors[outcome] = stats.errors.get(outcome, 0) + 1
                if not reached:  # no server saw it: no request, nothing sent
                    stats.unsent += 1
                    continue
                stats.requests += 1
                stats.latencies.append(latency_s)
                stats.request_seconds += max(0.0, latency_s)
                stats.request_bytes.append(nbytes)
                stats.bytes_sent += nbytes
                stats.images += images
                stats.image_bytes += image_bytes

    def add_call(self, reply: Reply | None, *, failed: bool = False) -> None:
        for stats in self._ledgers():
            with stats._lock:
                stats.calls += 1
                if reply is not None:
                    stats.retries += reply.attempts - 1
                    stats.prompt_tokens += reply.prompt_tokens or 0
                    stats.completion_tokens += reply.completion_tokens or 0
                    stats.cached_tokens += reply.cached_tokens or 0
                if failed:
                    stats.failures += 1

    def add_parse_retry(self) -> None:
        for stats in self._ledgers():
            with stats._lock:
                stats.parse_retries += 1

    def costs(self) -> dict[str, int]:
        """The ledger as a table row's ``COSTS`` columns."""
        with self._lock:
            return {"vlm_requests": self.requests, "vlm_retries": self.retries, "vlm_parse_retries": self.parse_retries,
                    "prompt_tokens": self.prompt_tokens, "cached_tokens": self.cached_tokens,
                    "completion_tokens": self.completion_tokens, "images_sent": self.images,
                    "image_bytes_sent": self.image_bytes, "request_ms": int(round(self.request_seconds * 1000))}

    def as_metadata(self, prefix: str = "vlm") -> dict[str, Any]:
        with self._lock:
            lat = np.asarray(self.latencies) if self.latencies else np.zeros(0)
            sizes = np.asarray(self.request_bytes) if self.request_bytes else np.zeros(0)
            return {
                f"{prefix}_calls": self.calls,
                f"{prefix}_requests": self.requests,
                f"{prefix}_retries": self.retries,
                f"{prefix}_parse_retries": self.parse_retries,
                f"{prefix}_failures": self.failures,
                f"{prefix}_latency_mean_s": round(float(lat.mean()), 4) if lat.size else None,
                f"{prefix}_latency_p95_s": round(float(np.percentile(lat, 95)), 4) if lat.size else None,
                f"{prefix}_prompt_tokens": self.prompt_tokens,
                f"{prefix}_cached_tokens": self.cached_tokens,
                f"{prefix}_cached_share": cached_share(self.cached_tokens, self.prompt_tokens),
                f"{prefix}_request_seconds": round(self.request_seconds, 3),
                f"{prefix}_completion_tokens": self.completion_tokens,
                f"{prefix}_images_sent": self.images,
                f"{prefix}_image_mb_sent": round(self.image_bytes / 1e6, 3),
                f"{prefix}_mb_sent": round(self.bytes_sent / 1e6, 3),
                f"{prefix}_request_kb_mean": round(float(sizes.mean()) / 1024, 1) if sizes.size else None,
                f"{prefix}_requests_by_endpoint": dict(self.by_endpoint),
                f"{prefix}_request_errors": dict(self.errors),
            }



# No context window holds more tokens than this: a larger count from a server is an error of its,
# read as this bound, so that no sum of counts can leave a 64-bit column.
MAX_TOKENS_PER_ANSWER = 100_000_000


def _count(usage: Any, name: str) -> int | None:
    """A token count from a completion's ``usage``, when it is a number (a server may send anything),
    clamped to ``0..MAX_TOKENS_PER_ANSWER``."""
    value = usage.get(name) if isinstance(usage, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
        return None
    return int(min(max(value, 0), MAX_TOKENS_PER_ANSWER))


class UsageCounts(NamedTuple):
    """A completion's token counts, each clamped (None: the server did not say)."""
    prompt: int | None
    completion: int | None
    cached: int | None


def usage_counts(usage: Any) -> UsageCounts:
    """Prompt, completion and cached-prompt tokens of a completion's ``usage``, each clamped to a sane
    range: non-negative, at most :data:`MAX_TOKENS_PER_ANSWER`, and the cached at most the prompt (a
    server that says it cached more than it was sent is read as having cached all of it; without a
    prompt count, no cached count is kept)."""
    usage = usage if isinstance(usage, dict) else {}
    prompt, completion = _count(usage, "prompt_tokens"), _count(usage, "completion_tokens")
    cached = _count(usage.get("prompt_tokens_details"), "cached_tokens")
    if cached is not None:
        cached = None if prompt is None else min(cached, prompt)
    return UsageCounts(prompt, completion, cached)


def cached_share(cached: int | None, prompt: int | None) -> float | None:
    """The share of prompt tokens a server took from its cache, 0-1 (rounded to 4 places); None
    without prompt tokens. Counts from anywhere (a stored table) are clamped here too."""
    if not prompt or prompt <= 0:
        return None
    return round(min(max(cached or 0, 0), prompt) / prompt, 4)

