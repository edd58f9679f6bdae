"""Content-addressed store of what the evaluation computed, so nothing is paid for twice.

Its namespaces: ``evidence`` (one record per tool step: criteria that run the same step on the same
video share it), ``judgments`` (one score and rationale per criterion), and one per protocol for its
judges' calls (each protocol names its own). Each key is :func:`argus_dagster.infra.identities.record_key` of the computation's
identity record (:mod:`argus_dagster.infra.identities`: everything that can change the answer, and nothing
declared irrelevant such as an endpoint or a key), so a change to any of it is a miss and nothing else is. Each
entry is one JSON object written whole (a temporary name, then a rename; a single PUT on S3), as
soon as it is computed: a run that is interrupted keeps what it finished and a rerun resumes there.
The location is a local folder or ``s3://bucket/prefix`` (read and written through the storage
resource, :mod:`argus_dagster.infra.storage`); the code above the store is the same for both.

:meth:`ContentCache.get_or_compute` is single-flight: threads asking for the same key at the same
time compute it once. A thread that takes a key looks in the store once more before computing, since
its first miss may predate another thread's publish.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any, Callable, Protocol

from argus_dagster.infra.files import WriteError, write_atomic


def cache_key(**parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


class BlobStore(Protocol):
    location: str

    def read(self, name: str) -> bytes | None: ...

    def write(self, name: str, data: bytes) -> None: ...


class LocalStore:
    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.location = str(self.root)

    def read(self, name: str) -> bytes | None:
        try:
            return (self.root / name).read_bytes()
        except FileNotFoundError:
            return None

    def write(self, name: str, data: bytes) -> None:
        write_atomic(self.root / name, data)


def open_store(location: str | Path, storage=None) -> BlobStore:
    """A local folder as it is; an ``s3://bucket/prefix`` through ``storage``
    (:class:`argus_dagster.infra.storage.Storage`, whose client the storage resource makes)."""
    location = str(location)
    if location.startswith("s3://"):
        if storage is None:
            raise ValueError(f"the content cache {location} is on S3: it needs the storage resource's storage")
        return storage.blobs(location)
    return LocalStore(location)


class _Recent:
    """The entries this process stored lately, by their full name, up to ``budget`` bytes (least
    recently used go first; entries over 64 KB are not kept): a step reading what an earlier step of
    the same process just stored (a cold run's scores step takes every judgment its evidence step made)
    does not open each file again, which is slow on a disk busy writing back a run's pages
    (docs/performance.md, "A run's last steps"). Entries are content-addressed: what another process
    stores under the same name means the same."""

    def __init__(self, budget: int):
        self.budget = budget
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def get(self, name: str) -> bytes | None:
        with self._lock:
            data = self._items.get(name)
            if data is not None:
                self._items.move_to_end(name)
            return data

    def put(self, name: str, data: bytes) -> None:
        if len(data) > 64 * 1024:
            return
        with self._lock:
            old = self._items.pop(name, None)
            self._size += len(data) - (len(old) if old is not None else 0)
            self._items[name] = data
            while self._size > self.budget and self._items:
                self._size -= len(self._items.popitem(last=False)[1])


# A process cache, not the tools resource's own: Dagster builds a run's resources anew for every run,
# and the runs and steps of one process read back what the others stored. Bound: 32 MB of entries.
RECENT = _Recent(32 * 2**20)


class ContentCache:
    """One namespace of the content-addressed store; ``location=None`` caches nothing."""

    def __init__(self, location: str | Path | BlobStore | None, namespace: str = "evidence", storage=None):
        if location is None or isinstance(location, (str, Path)):
            self.store = open_store(location, storage) if location else None
        else:
            self.store = location
        self.namespace = namespace
        self.hits = 0
        self.misses = 0
        self.writes = 0
        self.write_errors: list[str] = []
        self._lock = threading.Lock()  # counters and in-flight keys are shared by a stage's threads
        self._in_flight: dict[str, threading.Event] = {}

    @property
    def enabled(self) -> bool:
        return self.store is not None

    @property
    def location(self) -> str | None:
        return None if self.store is None else f"{self.store.location.rstrip('/')}/{self.namespace}"

    def _name(self, key: str) -> str:
        return f"{self.namespace}/{key[:2]}/{key}.json"

    def _count(self, hit: bool) -> None:
        with self._lock:
            if hit:
                self.hits += 1
            else:
                self.misses += 1

    def _full(self, key: str) -> str:
        assert self.store is not None  # callers return early without a store
        return f"{self.store.location.rstrip('/')}/{self._name(key)}"

    def _read(self, key: str) -> Any | None:
        if self.store is None:
            return None
        data = RECENT.get(self._full(key))
        if data is None:
            data = self.store.read(self._name(key))
        if data is None:
            return None
        try:
            return json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None  # a damaged entry is recomputed and overwritten

    def get(self, key: str) -> Any | None:
        """The stored value of ``key``, or None (not counted as a hit or a miss)."""
        return self._read(key)

    def put(self, key: str, value: Any) -> None:
        """Store ``value``. A local write that fails (a full disk) is recorded in ``write_errors``
        and costs only the reuse: the value computed is still the answer."""
        if self.store is None:
            return
        data = json.dumps(value, default=float).encode()
        try:
            self.store.write(self._name(key), data)
        except WriteError as exc:
            with self._lock:
                self.write_errors.append(str(exc))
            return
        RECENT.put(self._full(key), data)
        with self._lock:
            self.writes += 1

    def get_or_compute(self, key: str, compute: Callable[[], Any],
                       keep: Callable[[Any], bool] = lambda v: True,
                       usable: Callable[[Any], bool] = lambda v: True) -> tuple[Any, bool]:
        """``(value, hit)``; a miss computes, and stores the value when ``keep(value)``. A stored value
        that is not ``usable`` by this caller counts as a miss (and is overwritten when kept).

        While one thread computes a key, others asking for it wait for that result.
        """
        if self.store is None:
            return compute(), False
        while True:
            value = self._read(key)
            if value is not None and usable(value):
                self._count(True)
                return value, True
            with self._lock:
                waiting = self._in_flight.get(key)
                if waiting is None:
                    done = self._in_flight[key] = threading.Event()
                    break
            waiting.wait()  # then read what it stored (or compute, if it kept nothing)
        try:
            # The miss above may predate another thread's publish: it stored the value and left the
            # in-flight table between our read and our taking the key. Look again before computing.
            value = self._read(key)
            if value is not None and usable(value):
                self._count(True)
                return value, True
            self._count(False)
            value = compute()
            if keep(value):
                self.put(key, value)
            return value, False
        finally:
            self._finish(key, done)

    def _finish(self, key: str, done: threading.Event) -> None:
        """Leave the in-flight table (after the value, if kept, is readable) and wake the waiters."""
        with self._lock:
            self._in_flight.pop(key, None)
        done.set()

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "writes": self.writes}
