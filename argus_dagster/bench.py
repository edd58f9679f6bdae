"""Reading a bench: ``<TASK>/manifest.jsonl`` with media paths relative to the manifest's folder.

The released VideoArgusBench layout (``<task>/manifest.jsonl`` with lower-case task folders and
``<task>/rubrics/<id>.json``) reads unchanged; common field spellings of other releases are accepted.
Every row comes back, bad ones with an ``error`` that names the input, the field and the problem, so
the rest of the task proceeds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .instances import InputInstance, Task, infer_task, instance_hash
from .media import file_digest

VIDEO_SUFFIXES = (".mp4", ".webm", ".mov", ".mkv", ".avi")
_ALIASES = {
    "id": ("id", "input_id", "sample_id", "instance_id", "uid"),
    "prompt": ("prompt", "instruction", "text", "caption", "edit_instruction"),
    "first_frame": ("first_frame", "first_frame_image", "image", "input_image", "image_path"),
    "subject_images": ("subject_images", "subject_image", "subjects", "reference_images", "ref_images"),
    "source_video": ("source_video", "src_video", "video", "input_video", "video_path"),
}


def task_dir(root: str | Path, task: str) -> Path | None:
    """The folder of ``task`` in a bench: ``T2V/`` or the released lower-case ``t2v/``."""
    for name in (task, task.lower()):
        d = Path(root) / name
        if d.is_dir():
            return d
    return None


def _field(raw: dict, name: str) -> Any:
    for key in _ALIASES[name]:
        if raw.get(key) not in (None, "", []):
            return raw[key]
    return None


def resolve_media(base: Path, rel: Any, *, input_id: str, field: str) -> str:
    """A condition path resolved against the manifest's folder; never outside it."""
    if not isinstance(rel, str) or not rel.strip():
        raise ValueError(f"input {input_id!r} field {field!r}: expected a relative path, got {rel!r}")
    root = base.resolve()
    path = (root / rel).resolve()
    if path != root and root not in path.parents:
        raise ValueError(f"input {input_id!r} field {field!r}: path {rel!r} points outside the bench folder {root}")
    if not path.is_file():
        raise ValueError(f"input {input_id!r} field {field!r}: file {rel!r} not found under {root}")
    return str(path)


def parse_manifest_row(raw: Any, base: Path, line_no: int) -> InputInstance:
    if not isinstance(raw, dict):
        raise ValueError(f"line {line_no}: expected a JSON object")
    input_id = _field(raw, "id")
    if input_id is None:
        raise ValueError(f"line {line_no}: missing field 'id'")
    input_id = str(input_id)
    prompt = _field(raw, "prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError(f"input {input_id!r} field 'prompt': missing or empty")
    ff = _field(raw, "first_frame")
    subj = _field(raw, "subject_images")
    src = _field(raw, "source_video")
    subj_list = [subj] if isinstance(subj, str) else list(subj or [])
    first_frame = resolve_media(base, ff, input_id=input_id, field="first_frame") if ff else None
    subjects = tuple(resolve_media(base, s, input_id=input_id, field="subject_images") for s in subj_list)
    source = resolve_media(base, src, input_id=input_id, field="source_video") if src else None
    hashes = {"first_frame": file_digest(first_frame) if first_frame else None,
              "subject_images": [file_digest(s) for s in subjects],
              "source_video": file_digest(source) if source else None}
    return InputInstance(input_id, prompt, first_frame, subjects, source, instance_hash(prompt, hashes))


def read_task(bench_dir: str | Path, task: str) -> list[dict[str, Any]]:
    """One row per manifest line of ``task``: the instance's fields, or an ``error``."""
    d = task_dir(bench_dir, task)
    if d is None or not (d / "manifest.jsonl").is_file():
        return []
    rows: list[dict[str, Any]] = []
    lines = (d / "manifest.jsonl").read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        empty = {"input_id": f"line-{n}", "prompt": "", "first_frame": None, "subject_images": [],
                 "source_video": None, "content_hash": ""}
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            rows.append({**empty, "task": task, "error": f"line {n}: not valid JSON ({exc.msg})"})
            continue
        try:
            inst = parse_manifest_row(raw, d, n)
            inferred = inst.task.value
            if inferred != task:
                raise ValueError(f"input {inst.id!r}: listed under {task} but its conditions make it {inferred}")
            rows.append({**inst.to_row(), "task": task, "error": None})
        except ValueError as exc:
            rid = str(_field(raw, "id")) if isinstance(raw, dict) and _field(raw, "id") is not None else empty["input_id"]
            rows.append({**empty, "input_id": rid, "task": task, "error": str(exc)})
    return rows


def bench_rubric_path(bench_dir: str | Path, task: str, input_id: str) -> Path | None:
    d = task_dir(bench_dir, task)
    return (d / "rubrics" / f"{input_id}.json") if d is not None else None


def find_candidate(candidates_dir: str | Path, task: str, model: str, input_id: str) -> Path | None:
    d = task_dir(candidates_dir, task)
    if d is None:
        return None
    for suffix in VIDEO_SUFFIXES:
        p = d / model / f"{input_id}{suffix}"
        if p.exists():
            return p
    return None


def discover_models(candidates_dir: str | Path) -> dict[str, list[str]]:
    """``{model: [tasks it has videos for]}`` from ``candidates/<TASK>/<model>/``."""
    found: dict[str, list[str]] = {}
    for task in Task:
        d = task_dir(candidates_dir, task.value)
        if d is None:
            continue
        for m in sorted(p for p in d.iterdir() if p.is_dir()):
            if any(f.suffix.lower() in VIDEO_SUFFIXES for f in m.iterdir()):
                found.setdefault(m.name, []).append(task.value)
    return found


__all__ = ["read_task", "discover_models", "find_candidate", "bench_rubric_path", "infer_task"]
