"""Controls: what this evaluator can tell apart, measured on this evaluation.

From a sample of each model's own scored videos, control candidates are made and scored like any
candidate, against the same input's frozen rubric:

- ``reversed``: the video played backwards;
- ``frozen``: its first frame held for the whole video;
- ``shuffled``: its frames in a fixed random order;
- ``prompt_swap``: the same model's video of another input (scored against this input's rubric);
- ``source``: for an edit (TV2V, TSV2V), the unedited source video, as if the model had done nothing.

A control is *caught* when it scores at least :data:`CAUGHT_BY` below its original (half a point of the
0-10 final score: a measure's rounding is not telling two videos apart); the criteria that caught it are
those whose score fell by at least :data:`CRITERION_DROP`. A control that would be its original again (a
frozen video frozen, an edit that is its unedited source) is not counted. Per task and kind,
:func:`summarize` gives how many controls were scored (``n``), the share caught, and the criteria that
caught them most often: the table of what this evaluator can and cannot see.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from typing import Any

import numpy as np
import polars as pl

from argus_dagster.method.inputs import EDIT_TASKS

# Every kind, in the order they are shown; ``source`` only for edits.
KINDS = ("frozen", "shuffled", "reversed", "prompt_swap", "source")
# How a kind reads in a sentence ("tells frozen and shuffled apart ... a swapped prompt on 0%").
KIND_WORDS = {"frozen": "frozen", "shuffled": "shuffled", "reversed": "reversed", "prompt_swap": "a swapped prompt",
              "source": "the unedited source"}
# How a kind is named in a table.
KIND_NAMES = {"frozen": "frozen on its first frame", "shuffled": "frames shuffled", "reversed": "played backwards",
              "prompt_swap": "another input's video", "source": "the unedited source"}
# A control scoring this far below its original is caught; a criterion whose score falls this far caught it.
CAUGHT_BY = 0.5
CRITERION_DROP = 1.0
# Frames of a video read to make its controls (longer videos are cut: a control is about order, not length).
MAX_FRAMES = 96

# One row per control: the video scored (``uri``, where it lies; ``sha256``, its content), its original's
# and its own final score, whether it was caught and by which criteria, or why it has no score.
CONTROL_SCORES = {"task": pl.String, "model": pl.String, "input_id": pl.String, "sample": pl.String,
                  "control": pl.String, "uri": pl.String, "sha256": pl.String, "original_score": pl.Float64, "control_score": pl.Float64,
                  "caught": pl.Boolean, "criteria": pl.List(pl.String), "judge": pl.String, "error": pl.String}
# Per task and kind: what the evaluator tells apart.
CONTROLS = {"task": pl.String, "control": pl.String, "n": pl.Int64, "caught_share": pl.Float64,
            "criteria": pl.String, "judge": pl.String}


def kinds_for(task: str) -> tuple[str, ...]:
    """The control kinds of ``task``: the unedited source only for edits."""
    return tuple(k for k in KINDS if k != "source" or task in EDIT_TASKS)


def seed_of(*parts: str) -> int:
    """A seed from names (the same shuffle of the same video on every run)."""
    return int.from_bytes(hashlib.sha256("\0".join(parts).encode()).digest()[:4], "big")


def control_frames(kind: str, frames: np.ndarray, seed: int = 0) -> np.ndarray:
    """The frames of a ``reversed``, ``frozen`` or ``shuffled`` control of ``frames`` (T, H, W, 3). A
    shuffle never leaves the frames in their order (two frames or more)."""
    if kind == "reversed":
        return frames[::-1].copy()
    if kind == "frozen":
        return np.repeat(frames[:1], len(frames), axis=0)
    if kind == "shuffled":
        order = np.random.default_rng(seed).permutation(len(frames))
        if len(frames) > 1 and np.all(order == np.arange(len(frames))):
            order = np.roll(order, 1)
        return frames[order]
    raise ValueError(f"control {kind!r}: not made from the video's own frames")


# Two clips whose frames differ by less than this mean absolute grey level (0-255) are the same video
# (a still video decoded twice differs by its compression, not by what it shows).
SAME_FRAMES = 1.0


def same_frames(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether a control's frames are its original's (within :data:`SAME_FRAMES`): a frozen video
    frozen, a still one reversed or shuffled, is no control of anything."""
    return a.shape == b.shape and float(np.abs(a.astype(np.int16) - b.astype(np.int16)).mean()) < SAME_FRAMES


def swap_partner(input_ids: list[str], input_id: str) -> str | None:
    """Another input of the same model whose video stands in for ``input_id``'s (the next one in
    order, wrapping); None when the model has one input."""
    others = sorted(set(input_ids))
    if len(others) < 2 or input_id not in others:
        return None
    return others[(others.index(input_id) + 1) % len(others)]


def caught_criteria(original: list[dict[str, Any]], control: list[dict[str, Any]], drop: float = CRITERION_DROP) -> list[str]:
    """The criteria whose score on the control fell by at least ``drop`` from the original's (both scored)."""
    before = {r["criterion_id"]: r["score"] for r in original if r.get("score") is not None}
    return sorted(r["criterion_id"] for r in control
                  if r.get("score") is not None and r["criterion_id"] in before
                  and r["score"] <= before[r["criterion_id"]] - drop)


def summarize(rows: pl.DataFrame, top: int = 3) -> pl.DataFrame:
    """Per task and control kind (scored controls only): ``n``, ``caught_share`` and the criteria that
    caught them most often (``motion_smoothness (4 of 4)``), and the judge that scored them."""
    out = []
    scored = rows.filter(pl.col("control_score").is_not_null() & pl.col("original_score").is_not_null())
    for task in sorted(set(scored["task"].to_list())):
        g = scored.filter(pl.col("task") == task)
        for kind in kinds_for(task):
            k = g.filter(pl.col("control") == kind)
            if not k.height:
                continue
            counts = Counter(c for cs in k.filter(pl.col("caught"))["criteria"].to_list() for c in (cs or []))
            best = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
            judges = sorted({j for j in k["judge"].drop_nulls().to_list()})
            out.append({"task": task, "control": kind, "n": k.height,
                        "caught_share": sum(1 for c in k["caught"].to_list() if c) / k.height,
                        "criteria": ", ".join(f"{c} ({n} of {k.height})" for c, n in best) or None,
                        "judge": ", ".join(judges) or None})
    return pl.DataFrame(out, schema=CONTROLS, orient="row") if out else pl.DataFrame(schema=CONTROLS)


def controls_sentence(summary: pl.DataFrame) -> str | None:
    """One task's table in words: ``this evaluator tells frozen and shuffled apart on 100% of inputs,
    reversed on 0%, a swapped prompt on 25%`` (kinds grouped by share, the best first); None without a row."""
    if not summary.height:
        return None
    shares: dict[int, list[str]] = {}
    for r in summary.iter_rows(named=True):
        shares.setdefault(round(100 * r["caught_share"]), []).append(KIND_WORDS.get(r["control"], r["control"]))
    parts = []
    for k, (pct, kinds) in enumerate(sorted(shares.items(), key=lambda kv: -kv[0])):
        names = kinds[0] if len(kinds) == 1 else ", ".join(kinds[:-1]) + " and " + kinds[-1]
        parts.append(f"{names} apart on {pct}% of inputs" if k == 0 else f"{names} on {pct}%")
    return "this evaluator tells " + ", ".join(parts)
