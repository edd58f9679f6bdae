"""Content-addressed store for per-criterion evidence, so a rerun resumes from what was computed.

A key covers everything that determines the evidence: the video's and the input's content hashes,
the rubric hash and criterion id, the normalized plan and the versions of the tools it runs. Entries
are written atomically, one JSON file each, so an interrupted run leaves only whole entries.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path
from typing import Any


def cache_key(**parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


class EvidenceCache:
    def __init__(self, root: str | Path | None):
        self.root = Path(root) if root else None
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()  # counters are shared by the threads of one stage

    def _path(self, key: str) -> Path:
        assert self.root is not None
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> Any | None:
        if self.root is None:
            return None
        p = self._path(key)
        try:
            value = json.loads(p.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            with self._lock:
                self.misses += 1
            return None
        with self._lock:
            self.hits += 1
        return value

    def put(self, key: str, value: Any) -> None:
        if self.root is None:
            return
        p = self._path(key)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(f".{os.getpid()}.{threading.get_ident()}.part")
        tmp.write_text(json.dumps(value, default=float))
        tmp.replace(p)
