"""Evidence tools behind one interface (method §5).

A tool takes its step's ``args`` and the candidate's :class:`MediaStore` and returns a
JSON-serializable record. It never raises: the executor turns an exception into
``{"ok": false, "error": ...}``. A tool that cannot run in this environment (no VLM, no weights)
returns ``{"ok": false, "unavailable": true, "error": ...}`` naming what is missing.
"""

from __future__ import annotations

from typing import Any, Protocol

from argus_dagster.method.evidence.media_store import MediaStore


class Tool(Protocol):
    name: str
    version: str

    def run(self, args: dict[str, Any], media: MediaStore) -> dict[str, Any]: ...


class UnavailableTool:
    """A tool of the vocabulary that this environment cannot run; says why on every call."""

    version = "unavailable"

    def __init__(self, name: str, reason: str):
        self.name = name
        self.reason = reason

    def run(self, args: dict[str, Any], media: MediaStore) -> dict[str, Any]:
        return {"ok": False, "unavailable": True, "error": f"{self.name} unavailable: {self.reason}"}
