"""Decoded frames shared by the stages and runs of a process, keyed by content."""

from __future__ import annotations

import threading
from collections import OrderedDict

from argus_dagster.infra.media import Frames

DEFAULT_FRAME_POOL_BYTES = 512 * 2**20


class FramePool:
    """Decoded frames shared by every stage of a process, keyed by content (digest, policy).

    The evidence and judge stages of one run, and every criterion of a video, read the same decoded
    frames (and their JPEGs). Least recently used entries go when the pool holds more than
    ``budget_bytes``; a key decodes once even when several threads ask for it at the same time.
    """

    def __init__(self, budget_bytes: int = DEFAULT_FRAME_POOL_BYTES):
        self.budget_bytes = budget_bytes
        self._items: OrderedDict[tuple[str, str], Frames] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()
        self._key_locks: dict[tuple[str, str], threading.Lock] = {}
        self.decodes = 0

    def set_budget(self, budget_bytes: int) -> None:
        """Hold at most ``budget_bytes`` from now on (the least recently used frames go at once)."""
        with self._lock:
            self.budget_bytes = budget_bytes
            self._evict()

    def _evict(self) -> None:  # with the lock held; the newest entry stays, whatever its size
        while self._size > self.budget_bytes and len(self._items) > 1:
            _, old = self._items.popitem(last=False)
            self._size -= old.nbytes

    def get(self, key: tuple[str, str], decode) -> Frames:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in self._items:
                    return self._items[key]
            frames = decode()
            with self._lock:
                self.decodes += 1
                self._items[key] = frames
                self._size += frames.nbytes
                self._evict()
                self._key_locks.pop(key, None)
            return frames


# The process's frame pool: a process cache, not a resource's, because Dagster builds a run's resources
# anew for every run while the stages and the runs of one process (argus evaluate's in-process runs, a
# run's evidence, judge and report steps) read the same frames. Bound: its budget, the storage
# resource's ``frame_pool_mb`` (set when a run sets the resource up).
FRAME_POOL = FramePool()
