"""The 22 dimensions of method §2. A dimension is a taxonomy label, not a slot."""

from __future__ import annotations

DIMENSIONS: dict[int, str] = {
    1: "object/entity presence",
    2: "attribute binding",
    3: "count/numeracy",
    4: "spatial relations",
    5: "action/interaction",
    6: "scene/environment",
    7: "on-screen text",
    8: "temporal/event order",
    9: "motion",
    10: "camera motion",
    11: "physical plausibility",
    12: "temporal quality",
    13: "visual/frame quality",
    14: "style",
    15: "overall text-video alignment",
    16: "first-frame fidelity",
    17: "subject identity",
    18: "edit following",
    19: "edit locality / source preservation",
    20: "structure and motion preservation",
    21: "inserted-subject identity",
    22: "compositing and harmonization",
}

GENERAL = frozenset(range(1, 16))
NEEDS_FIRST_FRAME = frozenset({16})
NEEDS_SUBJECT = frozenset({17})
NEEDS_SOURCE = frozenset({18, 19, 20, 22})
NEEDS_SOURCE_AND_SUBJECT = frozenset({21})


def applicable(dimension: int, *, first_frame: bool, subject: bool, source: bool) -> bool:
    """Whether a dimension may yield criteria for an input with these conditions (method §4)."""
    if dimension in GENERAL:
        return True
    if dimension in NEEDS_FIRST_FRAME:
        return first_frame
    if dimension in NEEDS_SUBJECT:
        return subject
    if dimension in NEEDS_SOURCE:
        return source
    if dimension in NEEDS_SOURCE_AND_SUBJECT:
        return source and subject
    return False
