"""Process-wide objects built once per configuration, even when many threads ask at once.

``functools.lru_cache`` computes a missing value in every thread that misses at the same time and
hands each its own result: two concurrent partition runs asking for the VLM client of one
configuration would get two clients, each with its own concurrency bound, and together send twice
the requests the endpoint was promised. :func:`once_per_key` builds each value exactly once.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from typing import Callable, Hashable, TypeVar

T = TypeVar("T")


def once_per_key(maxsize: int = 8) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Memoize by positional arguments; concurrent callers of one key wait for the one build.

    A build that raises is not stored (the next call tries again). Least recently used entries beyond
    ``maxsize`` are dropped.
    """

    def wrap(fn: Callable[..., T]) -> Callable[..., T]:
        values: OrderedDict[Hashable, T] = OrderedDict()
        building: dict[Hashable, threading.Lock] = {}
        lock = threading.Lock()

        @functools.wraps(fn)
        def get(*args: Hashable) -> T:
            while True:
                with lock:
                    if args in values:
                        values.move_to_end(args)
                        return values[args]
                    key_lock = building.setdefault(args, threading.Lock())
                with key_lock:
                    with lock:
                        if args in values:  # built by the thread that held the key lock before us
                            values.move_to_end(args)
                            return values[args]
                    value = fn(*args)
                    with lock:
                        values[args] = value
                        while len(values) > maxsize:
                            values.popitem(last=False)
                        building.pop(args, None)
                    return value

        def cache_clear() -> None:
            with lock:
                values.clear()

        get.cache_clear = cache_clear  # type: ignore[attr-defined]
        return get

    return wrap
