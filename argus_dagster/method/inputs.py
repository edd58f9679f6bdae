"""Input instances and the five tasks (method §1).

The task of an input follows from which conditions are present, never from a label.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class Task(str, enum.Enum):
    T2V = "T2V"
    TI2V = "TI2V"
    TS2V = "TS2V"
    TV2V = "TV2V"
    TSV2V = "TSV2V"

    @property
    def is_editing(self) -> bool:
        return self in (Task.TV2V, Task.TSV2V)


ALL_TASKS: tuple[str, ...] = tuple(t.value for t in Task)
EDIT_TASKS: tuple[str, ...] = tuple(t.value for t in Task if t.is_editing)  # the tasks that edit a source video


def infer_task(*, first_frame: bool, subject_images: bool, source_video: bool) -> Task:
    """Task from the conditions present (method §1 table).

    A first frame together with a source video or subject images is not one of the five settings; it
    is rejected rather than silently mapped.
    """
    if first_frame and (subject_images or source_video):
        raise ValueError(
            "an input with a first frame cannot also carry subject images or a source video; "
            "the five tasks are T2V, TI2V, TS2V, TV2V and TSV2V"
        )
    if source_video:
        return Task.TSV2V if subject_images else Task.TV2V
    if subject_images:
        return Task.TS2V
    if first_frame:
        return Task.TI2V
    return Task.T2V


@dataclass(frozen=True)
class InputInstance:
    """One input: a prompt and optional conditions, as resolved URIs (local paths or s3://)."""

    id: str
    prompt: str
    first_frame: str | None = None
    subject_images: tuple[str, ...] = field(default_factory=tuple)
    source_video: str | None = None
    content_hash: str = ""

    @property
    def task(self) -> Task:
        return infer_task(
            first_frame=self.first_frame is not None,
            subject_images=bool(self.subject_images),
            source_video=self.source_video is not None,
        )

    @property
    def condition_media(self) -> dict[str, str]:
        """Media ids of the method's tool vocabulary that this input provides."""
        media: dict[str, str] = {}
        if self.first_frame:
            media["first_frame"] = self.first_frame
        if self.subject_images:
            media["subject_image"] = self.subject_images[0]
        if self.source_video:
            media["source_video"] = self.source_video
        return media

    def to_row(self) -> dict:
        return {
            "input_id": self.id,
            "prompt": self.prompt,
            "first_frame": self.first_frame,
            "subject_images": list(self.subject_images),
            "source_video": self.source_video,
            "content_hash": self.content_hash,
        }

    @classmethod
    def from_row(cls, row: dict) -> "InputInstance":
        return cls(
            id=row["input_id"],
            prompt=row["prompt"],
            first_frame=row.get("first_frame"),
            subject_images=tuple(row.get("subject_images") or ()),
            source_video=row.get("source_video"),
            content_hash=row.get("content_hash") or "",
        )


def instance_hash(prompt: str, media_hashes: Mapping[str, Any]) -> str:
    """Content identity of an input: its prompt and the bytes of its conditions."""
    blob = json.dumps({"prompt": prompt, "media": media_hashes}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()
