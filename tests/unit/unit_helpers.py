"""Builders shared by the unit tests: rubric/criterion dicts and small synthetic clips.

A plain module (not conftest) so tests can import it by a name no other conftest shadows.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from argus_dagster.method.rubric.schema import Criterion

W, H, N_FRAMES, FPS = 96, 64, 24, 12.0


def criterion_dict(cid: str = "c1", **over: Any) -> dict[str, Any]:
    """A valid criterion dict; keyword arguments override (``evidence_plan`` is merged)."""
    base: dict[str, Any] = {
        "id": cid,
        "dimension": 1,
        "criterion": "A red car is clearly visible.",
        "type": "soft",
        "importance": "high",
        "scoring_rule": "10: clearly present. 5: partly. 0: absent.",
        "hard_cap": None,
        "fail_threshold": 5,
        "failure_modes": ["car missing"],
        "derivable_from": "prompt",
        "evidence_plan": {
            "target_entity": "red car",
            "detector_query": "red car",
            "tool_sequence": [{"tool": "vlm_qa", "args": {"question": "Is there a red car?", "on": "output_video"}}],
            "reference_source": "none",
            "web_search_query": "",
            "aggregation": "mean",
            "notes": "",
        },
    }
    plan = over.pop("evidence_plan", None)
    base.update(over)
    if plan is not None:
        base["evidence_plan"] = {**base["evidence_plan"], **plan}
    return base


def rubric_dict(*criteria: dict[str, Any]) -> dict[str, Any]:
    crits = list(criteria) or [criterion_dict()]
    return {
        "task_understanding": "T2V: a red car drives.",
        "dimensions_considered": [{"dimension": d, "included": d == 1, "reason": "r"} for d in range(1, 23)],
        "criteria": copy.deepcopy(crits),
        "generator": {"backend": "test", "model": "none"},
    }


def make_criterion(cid: str = "c1", **over: Any) -> Criterion:
    return Criterion.model_validate(criterion_dict(cid, **over))


def texture(seed: int = 0, width: int = 2 * W, height: int = H, block: int = 8) -> np.ndarray:
    """A blocky random RGB texture (values 60-190, so brightness offsets of +-40 do not clip)."""
    rng = np.random.default_rng(seed)
    cells = rng.integers(60, 190, (height // block, width // block, 3))
    return np.kron(cells, np.ones((block, block, 1))).astype(np.uint8)


def moving_frames(seed: int = 0, shift: int = 2, n: int = N_FRAMES) -> np.ndarray:
    """A textured pattern sliding ``shift`` px per frame to the left."""
    tex = texture(seed)
    return np.stack([np.roll(tex, -shift * i, axis=1)[:, :W] for i in range(n)])
