"""What FIRM-Video's protocol works on: the three dimensions' names, checklists and their items, the
items a planner gave that were left out, verdicts and one video's result on one dimension.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

IF, WC, PQ = "instruction_following", "world_coherence", "perceptual_quality"
DIMENSIONS = (IF, WC, PQ)
SHORT = {IF: "if", WC: "wc", PQ: "pq"}


class ChecklistError(ValueError):
    """A checklist, verdict list or score input that breaks the protocol's rules (the message says which)."""


def checked_importance(m: Any, where: str) -> int:
    """``m`` as an int when it is an integer importance 1-5; else :class:`ChecklistError` naming ``where``."""
    if isinstance(m, bool) or not isinstance(m, (int, float)) or m != int(m) or not 1 <= int(m) <= 5:
        raise ChecklistError(f"{where}: importance {m!r} is not an integer 1-5 (fix: give each item 1..5)")
    return int(m)


@dataclass(frozen=True)
class ChecklistItem:
    """One yes/no question. IF: ``target`` is empty and ``aspect`` is the requirement's kind; WC:
    ``target`` names the grounded entity or action and ``aspect`` what the question checks."""

    id: str
    question: str
    importance: int
    target: str = ""
    aspect: str = ""


@dataclass(frozen=True)
class DroppedItem:
    """A planned item left out of the checklist, and why (``audio: ...``, ``duplicate of r2``, ``no
    questions``). ``importance`` is the planner's, or None where it gave none."""

    question: str
    importance: int | None
    reason: str

    @classmethod
    def from_json(cls, data: Any) -> "DroppedItem":
        if isinstance(data, str):  # "reason: question", as checklists cached before this record kept it
            reason, _, question = data.partition(": ")
            return cls(question or reason, None, reason if question else "")
        return cls(data["question"], data.get("importance"), data["reason"])


@dataclass(frozen=True)
class Checklist:
    """A frozen checklist. Its identity is :attr:`content_hash` (items only); ``maker`` says who made
    it (backend, model, prompt version) and ``dropped`` what the planner gave that was left out; neither
    is part of the identity."""

    dimension: str
    items: tuple[ChecklistItem, ...]
    maker: dict = field(default_factory=dict, compare=False)
    dropped: tuple[DroppedItem, ...] = field(default=(), compare=False)

    @property
    def content_hash(self) -> str:
        body = {"dimension": self.dimension, "items": [asdict(i) for i in self.items]}
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()

    def to_json(self) -> dict:
        return {"dimension": self.dimension, "items": [asdict(i) for i in self.items], "maker": dict(self.maker),
                "dropped": [asdict(d) for d in self.dropped], "content_hash": self.content_hash}

    @classmethod
    def from_json(cls, data: dict) -> "Checklist":
        items = tuple(ChecklistItem(**i) for i in data["items"])
        dropped = tuple(DroppedItem.from_json(d) for d in data.get("dropped") or ())
        c = cls(data["dimension"], items, dict(data.get("maker") or {}), dropped)
        if data.get("content_hash") not in (None, c.content_hash):
            raise ChecklistError("stored checklist: content_hash does not match its items (fix: delete the entry)")
        return c


@dataclass(frozen=True)
class Verdict:
    """One item's answer. IF: ``yes`` = satisfied; WC: ``yes`` = violation. ``evidence`` is the
    verifier's short visual description (or why there is no usable answer)."""

    item_id: str
    yes: bool
    evidence: str
    verifiable: bool = True


@dataclass
class DimensionResult:
    """One video on one dimension: score (IF, WC), rating, rationale, or the reason it has none."""

    dimension: str
    score: float | None = None
    rating: int | None = None
    rationale: str = ""
    reason: str = ""  # why unscored
    verdicts: list[Verdict] = field(default_factory=list)
    checklist_hash: str = ""
    detail: dict = field(default_factory=dict)  # WC grounding, PQ defects

    @property
    def scored(self) -> bool:
        return self.rating is not None

