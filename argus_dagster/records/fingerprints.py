"""A pass's fingerprint as recorded (the ``fingerprint`` metadata of ``criterion_scores``, made by
:func:`argus_dagster.resources.fingerprint.fingerprint`): its digest, and what differs between two."""

import hashlib
import json
from typing import Any


def digest(value: Any) -> str:
    """A short digest of a JSON-able value: equal for equal values."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:12]


def fingerprint_id(fp: dict[str, Any]) -> str:
    """A fingerprint's digest: equal for equal fingerprints."""
    return digest(fp)


def flatten(fp: dict[str, Any] | None, prefix: str = "") -> dict[str, Any]:
    """``{"judge.model": ..., "packages.torch": ...}``: every field of a fingerprint by its path."""
    out: dict[str, Any] = {}
    for k, v in (fp or {}).items():
        if isinstance(v, dict):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def differences(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[tuple[str, Any, Any]]:
    """``(field, before, after)`` for every field of two fingerprints that differs, by path."""
    fa, fb = flatten(a), flatten(b)
    return [(k, fa.get(k), fb.get(k)) for k in sorted(set(fa) | set(fb)) if fa.get(k) != fb.get(k)]
