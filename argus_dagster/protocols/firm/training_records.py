"""FIRM-Video's training instances of one video (seed §3.3): frame references, the Appendix 4
instruction and the target, made as a video is scored or rebuilt from stored ``firm_scores`` rows,
and written as JSON lines. The training data a trainer loads (frames as image files, the condition
media, prose reasoning) is written from the stored tables by :mod:`~argus_dagster.protocols.firm.export`.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Sequence

from argus_dagster.infra.files import write_atomic
from argus_dagster.protocols.firm.prompts import instruction
from argus_dagster.protocols.firm.types import DIMENSIONS, SHORT, DimensionResult


def frame_refs(video_uri: str, frames: Any) -> list[str]:
    """``<uri>#frame=<index>&t=<seconds>`` per sampled frame (what the instance's images are)."""
    idx = getattr(frames, "indices", None) or range(len(frames.array if hasattr(frames, "array") else frames))
    ts = getattr(frames, "timestamps", None) or [None] * len(idx)
    return [f"{video_uri}#frame={i}" + (f"&t={t:.3f}" if t is not None else "") for i, t in zip(idx, ts)]


def export_records(video_id: str, prompt: str, refs: Sequence[str], results: dict[str, DimensionResult], *,
                   require_all: bool = True) -> tuple[list[dict], str]:
    """Training instances of one video (seed §3.3), and why none were made.

    One per dimension: ``id``, ``dimension``, ``prompt``, ``frames`` (references), ``instruction`` (the
    Appendix 4 instruction), ``target`` (``{"reasoning", "score"}``), and the same instance as
    ``messages`` (one ``<image>`` token per frame, then the instruction; the answer is the target JSON)
    with ``images`` for SFT frameworks. With ``require_all`` (the seed keeps only videos valid on all
    three dimensions) a video with an unscored dimension yields none.
    """
    missing = [d for d in DIMENSIONS if not (results.get(d) and results[d].scored)]
    if require_all and missing:
        why = "; ".join(f"{d}: {results[d].reason if d in results else 'not evaluated'}" for d in missing)
        return [], f"{video_id}: left out, not every dimension is scored ({why})"
    out = []
    for d in DIMENSIONS:
        r = results.get(d)
        if not (r and r.scored):
            continue
        instr = instruction(d, prompt, len(refs))
        target = {"reasoning": r.rationale, "score": r.rating}
        out.append({"id": f"{video_id}/{SHORT[d]}", "video_id": video_id, "dimension": d, "prompt": prompt,
                    "frames": list(refs), "instruction": instr, "target": target,
                    "messages": [{"role": "user", "content": "<image>" * len(refs) + instr},
                                 {"role": "assistant", "content": json.dumps(target, ensure_ascii=False)}],
                    "images": list(refs)})
    return out, ""


def export_from_rows(rows: Iterable[dict], prompts: dict[str, str], *, video_prefix: str = "",
                     require_all: bool = True) -> tuple[list[dict], list[str]]:
    """Training instances rebuilt from stored ``firm_scores`` rows (with their ``frames`` column), so
    an export reads the table and calls nothing. Returns the instances and the videos left out, with why.
    A video is named ``<prefix><input_id>``, and ``#<k>`` for sample ``k`` of the input."""
    records, left_out = [], []
    for r in rows:
        iid = r["input_id"]
        video = f"{video_prefix}{iid}" + (f"#{r['sample']}" if r.get("sample") else "")
        if iid not in prompts:
            left_out.append(f"{video}: no prompt for this input")
            continue
        res = {}
        for d in DIMENSIONS:
            s = SHORT[d]
            res[d] = DimensionResult(d, r.get(f"{s}_score"), r.get(f"{s}_rating"), r.get(f"{s}_rationale") or "",
                                     r.get(f"{s}_reason") or "")
        recs, why = export_records(video, prompts[iid], list(r.get("frames") or []), res,
                                   require_all=require_all)
        records += recs
        if why:
            left_out.append(why)
    return records, left_out


def write_export(path: Any, records: Iterable[dict]) -> int:
    """Write instances as JSON lines (whole: a temporary name, then a rename); returns how many."""
    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    write_atomic(path, ("\n".join(lines) + "\n") if lines else "")
    return len(lines)
