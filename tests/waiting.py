"""Waiting on a condition with a deadline, for tests: what a test waits for is an event it can
observe, never a time it hopes is long enough."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(observe: Callable[[], T], timeout_s: float = 60.0, what: str = "", poll_s: float = 0.01) -> T:
    """``observe()``'s first truthy value, checked every ``poll_s`` until ``timeout_s``; after that an
    AssertionError naming ``what`` and the last value observed. The deadline is a bound on a hang,
    not a guess at how long the work takes."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = observe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {timeout_s:g} s for {what or observe}: last saw {value!r}")
        time.sleep(poll_s)
