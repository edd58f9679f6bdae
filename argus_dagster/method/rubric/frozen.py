"""Telling a frozen rubric this project generated, untouched, from one a person wrote or edited.

A generated rubric is frozen with ``generator.frozen_hash``: the hash of its body (everything but the
``generator`` block) as written. While the file still hashes to it, the file is the ``rubrics``
asset's own output; once a person edits it (or writes one without the block), it is an input, and
its content counts in the ``rubric_files`` source's version.
"""

from __future__ import annotations

import hashlib
import json

from argus_dagster.method.rubric.schema import loads_bounded


def body_hash(data: dict) -> str:
    body = {k: v for k, v in data.items() if k != "generator"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def mark_frozen(data: dict) -> dict:
    """``data`` (a rubric as JSON) with ``generator.frozen_hash`` set, as it is written when frozen."""
    return {**data, "generator": {**(data.get("generator") or {}), "frozen_hash": body_hash(data)}}


def written_as_generated(raw: bytes) -> bool:
    """Whether a rubric file is one this project generated and froze, unchanged since (a file frozen
    before the mark existed counts as unchanged)."""
    try:
        data = loads_bounded(raw)
    except (ValueError, UnicodeDecodeError):  # not JSON, or nested deeper than a rubric: not ours
        return False
    generator = data.get("generator") if isinstance(data, dict) else None
    if not isinstance(generator, dict) or "input_hash" not in generator:
        return False
    mark = generator.get("frozen_hash")
    return mark is None or mark == body_hash(data)
