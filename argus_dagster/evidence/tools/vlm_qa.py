"""``vlm_qa``: a criterion-specific question answered by a VLM on the frames of the media it names."""

from __future__ import annotations

from typing import Any

from ..media_store import MediaStore


class NoVlmQa:
    """The embedded default has no VLM: every call says so explicitly."""

    name = "vlm_qa"
    version = "none"

    def run(self, args: dict[str, Any], media: MediaStore) -> dict[str, Any]:
        return {
            "ok": False,
            "unavailable": True,
            "error": "vlm_qa unavailable: no VLM is configured (set ARGUS_VLM_BASE_URL and ARGUS_VLM_MODEL)",
            "question": args.get("question", ""),
        }
