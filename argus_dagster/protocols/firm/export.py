"""FIRM-Video's reward-model training data as a folder a trainer loads (seed ``001``, §3.3).

``argus export firm --out DIR`` writes

- ``DIR/train.jsonl``: one instance per video and dimension (IF, WC, PQ), only for videos valid on
  all three dimensions ("We retain only videos with valid evaluations across IF, WC, and PQ, yielding
  one training instance per dimension for each video");
- ``DIR/images/...``: every frame an instance shows, as a JPEG file; an instance's ``images`` are
  paths relative to the JSON lines file, in the order of its ``image_roles`` (the condition media
  first, then the video's frames);
- ``DIR/README.md``: a dataset card (counts, filters, sources);
- ``DIR/.argus-export.json``: the files this export wrote. ``DIR`` must be new, empty, or hold an
  earlier export and nothing else (``--force`` writes beside other files); a new export replaces its own
  files and removes the earlier export's files it does not write again, never anything else.

What each instance carries:

- the input the task has: the text (the generation prompt; for TV2V and TSV2V the edit instruction)
  and, for instruction following, the condition media the task is judged against (TI2V: the first
  frame; TS2V: the subject images; TV2V: the source video's frames; TSV2V: both). World coherence and
  perceptual quality judge the output alone, as the protocol does, so their instances show the
  video's frames only;
- the evaluation instruction of Appendix 4 for the dimension, worded for the task;
- the target ``{"reasoning", "score"}``: the score is the stored 1-5 rating; the reasoning is prose
  composed from the verifier's decisions and evidence after the score was fixed (IF: what is met,
  then what is not; WC: the scene, then the violations by target and aspect; PQ: the evaluator's own
  checklist-based rationale), so it verbalizes the decisions and never states the score.

Everything comes from stored tables (``firm_scores``, ``firm_verdicts``, ``input_instances``) and the
media they name; nothing calls a model. A video whose frames cannot be read is left out with the
reason, and the rest are written.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence
from urllib.parse import parse_qs

import cv2
import numpy as np

from argus_dagster.infra.files import write_atomic
from argus_dagster.infra.media import JUDGE_POLICY, MAX_SIDE, VideoReader, load_image, resize_longest
from argus_dagster.infra.names import file_name
from argus_dagster.method.inputs import EDIT_TASKS
from argus_dagster.protocols.firm.prompts import INSTRUCTIONS
from argus_dagster.protocols.firm.types import DIMENSIONS, IF, SHORT, WC

JSONL = "train.jsonl"
CARD = "README.md"
IMAGES = "images"
# What an export wrote, so a later one into the same folder knows its own files from a person's:
# {"kind": "firm", "files": [relative paths]}.
WRITTEN = ".argus-export.json"
KIND = "firm"

# ----------------------------------------------------------------------------------------------------
# Reasoning in prose, from the verifier's decisions
# ----------------------------------------------------------------------------------------------------

_NUMBERS = ("no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")
# Sentences of the stored template rationale that are numbers, not prose: left out of a reasoning.
_SCORE_SENTENCE = re.compile(r"\s*(Importance-weighted [^.]*?: \d\.\d+, rating \d/5\.|Rating \d/5\.)\s*")


def _count(n: int) -> str:
    return _NUMBERS[n] if 0 <= n < len(_NUMBERS) else str(n)


def _sentence(text: str) -> str:
    """``text`` as one sentence: capitalized, ending with a full stop."""
    t = " ".join(str(text or "").split()).strip()
    if not t:
        return ""
    t = t[0].upper() + t[1:]
    return t if t[-1] in ".!?" else t + "."


def _clause(text: str | None) -> str:
    """Evidence as a clause after a colon: no trailing full stop, first letter as written."""
    return " ".join(str(text or "").split()).rstrip(" .")


def _quoted(question: str) -> str:
    return f"\u201c{' '.join(str(question).split())}\u201d"


def _weight_word(importance: int | None) -> str:
    if importance is None:
        return ""
    return "essential " if importance >= 5 else "important " if importance >= 4 else \
        "minor " if importance <= 2 else ""


def if_reasoning(items: Sequence[dict], asked_by: str = "the prompt") -> str:
    """IF reasoning from one video's verdict rows (``question``, ``verdict`` yes = met, ``verifiable``,
    ``evidence``, ``importance``): first what is met, then what is unmet or could not be seen, each
    with the evidence the verifier gave. The seed's order (§3.3). ``asked_by``: what set the
    requirements (the prompt; the edit instruction of an edit)."""
    met = [r for r in items if r.get("verdict") == "yes" and r.get("verifiable")]
    unmet = [r for r in items if r.get("verdict") != "yes" and r.get("verifiable")]
    unseen = [r for r in items if not r.get("verifiable")]
    n = len(items)
    if not n:
        return ""
    if len(met) == n:
        out = [f"The video meets every requirement of {asked_by} ({_count(n)} in all)."]
    elif not met:
        out = [f"The video meets none of the {_count(n)} requirements of {asked_by}."]
    else:
        out = [f"The video meets {_count(len(met))} of the {_count(n)} requirements of {asked_by}."]
    for r in met:
        ev = _clause(r.get("evidence"))
        out.append(f"It satisfies {_quoted(r['question'])}" + (f": {ev}." if ev else "."))
    for r in unmet:
        ev = _clause(r.get("evidence"))
        out.append(f"It fails the {_weight_word(r.get('importance'))}requirement {_quoted(r['question'])}"
                   + (f": {ev}." if ev else "."))
    for r in unseen:
        ev = _clause(r.get("evidence"))
        out.append(f"Whether it satisfies {_quoted(r['question'])} cannot be seen in the frames"
                   + (f" ({ev})" if ev else "") + ", so it does not count as met.")
    return " ".join(out)


def wc_reasoning(scene_summary: str, items: Sequence[dict]) -> str:
    """WC reasoning from one video's verdict rows (``target``, ``aspect``, ``question``, ``verdict`` yes =
    violation, ``verifiable``, ``evidence``): the scene first, then the violations by target and aspect,
    then the targets seen without one, then what could not be judged (seed §3.3)."""
    out = [_sentence(scene_summary)] if (scene_summary or "").strip() else []
    by_target: dict[str, list[dict]] = {}
    for r in items:
        by_target.setdefault(r.get("target") or "the scene", []).append(r)
    violations, clean, unjudged = [], [], []
    for target, rows in by_target.items():
        bad = [r for r in rows if r.get("verifiable") and r.get("verdict") == "yes"]
        if bad:
            parts = []
            for r in bad:
                aspect = (r.get("aspect") or "").replace("_", " ")
                ev = _clause(r.get("evidence")) or _clause(r.get("question"))
                parts.append(f"{aspect}: {ev}" if aspect else ev)
            violations.append(f"For {target}, the frames show a problem of " + "; and of ".join(parts) + ".")
        elif any(r.get("verifiable") for r in rows):
            clean.append(target)
        unjudged += [r for r in rows if not r.get("verifiable")]
    if violations:
        out += violations
    else:
        out.append("No violation of common sense or physics is seen.")
    if clean:
        names = clean[0] if len(clean) == 1 else ", ".join(clean[:-1]) + f" and {clean[-1]}"
        out.append(f"{_sentence(names)[:-1]} {'stays' if len(clean) == 1 else 'stay'} consistent and plausible "
                   "throughout.")
    if unjudged:
        out.append("Left undecided, because the frames do not show enough: "
                   + "; ".join(_clause(r.get("question")) for r in unjudged) + ".")
    return " ".join(out)


def strip_score_sentences(rationale: str) -> str:
    """A stored rationale without the sentences that state a score or rating."""
    return " ".join(_SCORE_SENTENCE.sub(" ", rationale or "").split())


def reasoning(dimension: str, score_row: dict, verdicts: Sequence[dict]) -> str:
    """The target's reasoning for ``dimension`` of one video: composed from its verdict rows (IF, WC),
    or the evaluator's own rationale (PQ); a stored rationale (its score sentence left out) where the
    video has no verdict rows."""
    s = SHORT[dimension]
    own = [v for v in verdicts if v.get("dimension") == dimension]
    if dimension == IF and own:
        return if_reasoning(own, "the edit instruction" if score_row.get("task") in EDIT_TASKS else "the prompt")
    if dimension == WC and own:
        return wc_reasoning(score_row.get("wc_scene") or "", own)
    return strip_score_sentences(score_row.get(f"{s}_rationale") or "")


# ----------------------------------------------------------------------------------------------------
# Evaluation instructions worded for each task (Appendix 4's, which is T2V's)
# ----------------------------------------------------------------------------------------------------

def _layout(roles: Sequence[str]) -> str:
    """Which images are which, in order: e.g. 'Images 1-8 are frames of the source video...'."""
    spans: list[tuple[str, int, int]] = []
    for k, role in enumerate(roles, start=1):
        if spans and spans[-1][0] == role:
            spans[-1] = (role, spans[-1][1], k)
        else:
            spans.append((role, k, k))
    text = []
    for role, a, b in spans:
        what = {"first_frame": "the first frame the video must start from",
                "subject_image": "the subject image(s) the video must show",
                "source_video": "frames of the source video, in temporal order",
                "output_video": "frames of the video to evaluate, in temporal order"}[role]
        text.append(f"image {a} is {what}" if a == b else f"images {a}-{b} are {what}")
    return "The images: " + "; ".join(text) + "."


def task_instruction(task: str, dimension: str, prompt: str, roles: Sequence[str]) -> str:
    """Appendix 4's evaluation instruction for ``dimension``, worded for ``task``: the frame count of the
    video, which image is which, and the task's own text (the edit instruction for TV2V and TSV2V)."""
    n = sum(1 for r in roles if r == "output_video")
    base = INSTRUCTIONS[dimension].format(n=n, prompt=prompt)
    edit = task in EDIT_TASKS
    if dimension == IF and task != "T2V":
        what = {"TI2V": "its text prompt, starting from the given first frame",
                "TS2V": "its text prompt with the subject of the given subject image(s)",
                "TV2V": "its edit instruction applied to the given source video: the requested change is made, "
                        "and what the instruction leaves alone is preserved",
                "TSV2V": "its edit instruction applied to the given source video with the subject of the given "
                         "subject image(s): the requested change is made, and what the instruction leaves alone "
                         "is preserved"}[task]
        base = base.replace("follows its text prompt.", f"follows {what}.")
        if edit:
            base = (base.replace("follows the text prompt,", "carries out the edit instruction,")
                    .replace("Text prompt:", "Edit instruction:").replace("the text prompt, and the dimension",
                                                                          "the edit instruction, and the dimension"))
    elif edit:
        base = base.replace("Text prompt (context only):", "Edit instruction (context only):").replace(
            "The text prompt is provided", "The edit instruction is provided").replace(
            "faithfully the video follows the prompt", "faithfully the video carries out the edit")
    head, _, rest = base.partition("\n")
    return f"{head}\n{_layout(roles)}\n{rest}"


# ----------------------------------------------------------------------------------------------------
# The folder
# ----------------------------------------------------------------------------------------------------


def parse_frame_ref(ref: str) -> tuple[str, int]:
    """``<uri>#frame=<index>&t=<seconds>`` (``firm_scores.frames``) as ``(uri, index)``."""
    uri, sep, frag = ref.rpartition("#")
    idx = parse_qs(frag).get("frame") if sep else None
    if not sep or not idx or not idx[0].isdigit():
        raise ValueError(f"frame reference {ref!r}: expected <uri>#frame=<index>")
    return uri, int(idx[0])


@dataclass
class ExportResult:
    """What an export wrote and what it left out (one line per video, with why)."""

    n_instances: int = 0
    n_videos: int = 0
    left_out: list[str] = field(default_factory=list)
    per_dimension: Counter = field(default_factory=Counter)
    per_task: Counter = field(default_factory=Counter)
    ratings: dict[str, Counter] = field(default_factory=dict)


def _save(array: np.ndarray, path: Path) -> None:
    img = resize_longest(np.asarray(array, dtype=np.uint8), MAX_SIDE)
    ok, buf = cv2.imencode(".jpg", cv2.cvtColor(img, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, 92])
    if not ok:
        raise ValueError(f"{path.name}: the frame could not be encoded as JPEG")
    write_atomic(path, buf.tobytes())


def default_video_frames(uri: str, indices: list[int], storage=None) -> list[np.ndarray]:
    return list(VideoReader(uri, max_side=MAX_SIDE, storage=storage).get(indices))


def default_condition_frames(input_row: dict, storage=None) -> list[tuple[str, np.ndarray]]:
    """``(role, RGB frame)`` of the input's condition media, as the IF planner and verifier see them:
    the first frame, every subject image, the source video sampled as for the judge (``s3://`` media
    read through ``storage``)."""
    out: list[tuple[str, np.ndarray]] = []
    if input_row.get("first_frame"):
        out.append(("first_frame", load_image(input_row["first_frame"], storage=storage)))
    for uri in input_row.get("subject_images") or []:
        out.append(("subject_image", load_image(uri, storage=storage)))
    if input_row.get("source_video"):
        frames = VideoReader(input_row["source_video"], max_side=MAX_SIDE, storage=storage).sample(JUDGE_POLICY)
        out += [("source_video", f) for f in frames.array]
    return out


def export_dataset(out_dir: str | Path, score_rows: Iterable[dict], verdicts: dict[tuple, list[dict]],
                   inputs: dict[tuple[str, str], dict], *, sources: dict[str, Any] | None = None,
                   video_frames: Callable[[str, list[int]], list[np.ndarray]] = default_video_frames,
                   condition_frames: Callable[[dict], list[tuple[str, np.ndarray]]] = default_condition_frames,
                   force: bool = False) -> ExportResult:
    """Write ``out_dir`` (see the module doc) from stored rows.

    ``score_rows``: ``firm_scores`` rows (with ``task``, ``model``, ``sample`` and ``frames``);
    ``verdicts``: ``firm_verdicts`` rows by ``(task, model, input_id, sample)``; ``inputs``:
    ``input_instances`` rows by ``(task, input_id)``; ``sources``: what the card names as the data's
    origin. ``out_dir`` is new, empty, or holds an earlier export and nothing else (anything, with
    ``force``: :func:`check_out_folder`). The JSON lines file and the card are replaced whole; of the
    earlier export's files (``.argus-export.json`` lists them) those not written again are removed, and
    nothing else is.
    """
    out = Path(out_dir)
    earlier = check_out_folder(out, force)
    written: set[str] = set()
    result = ExportResult(ratings={d: Counter() for d in DIMENSIONS})
    lines: list[str] = []
    conditions_done: dict[tuple[str, str], list[tuple[str, str]] | str] = {}
    for row in score_rows:
        task, model, iid, sample = row["task"], row["model"], row["input_id"], row.get("sample") or ""
        video = f"{task}/{model}/{iid}" + (f"#{sample}" if sample else "")
        missing = [d for d in DIMENSIONS if row.get(f"{SHORT[d]}_rating") is None]
        if missing:
            why = "; ".join(f"{d}: {row.get(f'{SHORT[d]}_reason') or 'unscored'}" for d in missing)
            result.left_out.append(f"{video}: left out, not valid on every dimension ({why})")
            continue
        inp = inputs.get((task, iid))
        if inp is None or not inp.get("prompt"):
            result.left_out.append(f"{video}: left out, no stored input (prompt) for {iid!r}")
            continue
        folder = Path(IMAGES) / file_name(task) / file_name(model) / (file_name(iid) + (
            f"__{file_name(sample)}" if sample else ""))
        try:
            refs = [parse_frame_ref(r) for r in row.get("frames") or []]
            if not refs:
                raise ValueError("no sampled frames stored for this video")
            uris = {u for u, _ in refs}
            if len(uris) != 1:
                raise ValueError(f"frames of {len(uris)} videos in one row")
            arrays = video_frames(refs[0][0], [i for _, i in refs])
            frame_paths = []
            for k, a in enumerate(arrays):
                rel = folder / f"frame_{k:02d}.jpg"
                _save(a, out / rel)
                written.add(rel.as_posix())
                frame_paths.append(rel.as_posix())
        except Exception as exc:  # unreadable media: this video is left out, the rest proceed
            result.left_out.append(f"{video}: left out, its frames cannot be written ({exc})")
            continue
        key = (task, iid)
        cond: list[tuple[str, str]] | str
        if key not in conditions_done:
            try:
                cond = []
                cfolder = Path(IMAGES) / file_name(task) / "_inputs" / file_name(iid)
                for k, (role, a) in enumerate(condition_frames(inp)):
                    rel = cfolder / f"{role}_{k:02d}.jpg"
                    _save(a, out / rel)
                    written.add(rel.as_posix())
                    cond.append((role, rel.as_posix()))
                conditions_done[key] = cond
            except Exception as exc:
                conditions_done[key] = f"its condition media cannot be written ({exc})"
        cond = conditions_done[key]
        if isinstance(cond, str):
            result.left_out.append(f"{video}: left out, {cond}")
            continue
        rows_v = verdicts.get((task, model, iid, sample), [])
        result.n_videos += 1
        for d in DIMENSIONS:
            shown = (cond if d == IF else []) + [("output_video", p) for p in frame_paths]
            roles, paths = [r for r, _ in shown], [p for _, p in shown]
            instr = task_instruction(task, d, inp["prompt"], roles)
            target = {"reasoning": reasoning(d, row, rows_v), "score": int(row[f"{SHORT[d]}_rating"])}
            rec = {"id": f"{video}/{SHORT[d]}", "video_id": video, "task": task, "model": model, "input_id": iid,
                   "sample": sample, "dimension": d, "prompt": inp["prompt"], "instruction": instr,
                   "images": paths, "image_roles": roles, "target": target,
                   "messages": [{"role": "user", "content": "<image>" * len(paths) + instr},
                                {"role": "assistant", "content": json.dumps(target, ensure_ascii=False)}]}
            lines.append(json.dumps(rec, ensure_ascii=False))
            result.per_dimension[d] += 1
            result.per_task[task] += 1
            result.ratings[d][target["score"]] += 1
    result.n_instances = len(lines)
    write_atomic(out / JSONL, ("\n".join(lines) + "\n") if lines else "")
    write_atomic(out / CARD, dataset_card(result, sources or {}))
    written |= {JSONL, CARD}
    write_atomic(out / WRITTEN, json.dumps({"kind": KIND, "files": sorted(written)}, indent=1))
    _remove_stale(out, earlier - written)
    return result


def _written_before(out: Path) -> set[str] | None:
    """The files an earlier export of this kind recorded in ``out``, or None when it records none."""
    try:
        rec = json.loads((out / WRITTEN).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(rec, dict) or rec.get("kind") != KIND or not isinstance(rec.get("files"), list):
        return None
    return {f for f in rec["files"] if isinstance(f, str)}


def check_out_folder(out: Path, force: bool = False) -> set[str]:
    """Whether an export may write into ``out``: a new or empty folder, or one that holds an earlier
    export of this kind and nothing else (or anything, with ``force``). Returns the files the earlier
    export recorded (the only ones a new export may remove); raises ValueError naming what is there."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out}: a file is there; give a folder (it is created)")
    if not out.is_dir():
        return set()
    before = _written_before(out) or set()
    mine = before | {WRITTEN}
    parents = {p.as_posix() for f in mine for p in Path(f).parents if p != Path(".")}
    foreign = []
    for p in sorted(out.rglob("*")):
        rel = p.relative_to(out).as_posix()
        if rel in mine or (rel in parents and p.is_dir() and not p.is_symlink()) or _is_part(p.name):
            continue
        foreign.append(rel)
    if foreign and not force:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        what = "an earlier export and also " if before else ""
        raise ValueError(f"--out {out}: the folder holds {what}files no firm export wrote ({shown}); give a new "
                         "or empty folder, or --force to write beside them (nothing an export did not write is "
                         "deleted; its own files are replaced)")
    return before


def _is_part(name: str) -> bool:
    return name.startswith(".") and name.endswith(".part")


def _remove_stale(out: Path, stale: set[str]) -> None:
    """Remove the files of an earlier export that this one did not write again (frames of videos it no
    longer has), and the folders they leave empty; nothing else."""
    root = out.resolve()
    for rel in sorted(stale):
        p = out / rel
        try:
            if Path(rel).is_absolute() or ".." in Path(rel).parts or not p.resolve().is_relative_to(root):
                continue
            if p.is_file() and not p.is_symlink():
                p.unlink()
        except OSError:
            continue
        for parent in Path(rel).parents:
            if parent == Path("."):
                break
            try:
                (out / parent).rmdir()  # only when empty
            except OSError:
                break


def _left_out_kinds(left_out: Sequence[str]) -> Counter:
    kinds: Counter = Counter()
    for line in left_out:
        why = line.split(": left out, ", 1)[-1]
        kinds[why.split(" (", 1)[0]] += 1
    return kinds


def dataset_card(result: ExportResult, sources: dict[str, Any]) -> str:
    """The folder's README.md: what it holds, how it was filtered, where it comes from."""
    dims = ", ".join(f"{d} {result.per_dimension[d]}" for d in DIMENSIONS)
    tasks = ", ".join(f"{t} {n // 3} videos" for t, n in sorted(result.per_task.items())) or "none"
    lines = [
        "# FIRM-Video reward-model training data",
        "",
        "Check-before-score supervision (FIRM-Video §3.3): one instance per video and dimension "
        "(instruction following, world coherence, perceptual quality). Each instance holds the task's text "
        "(the prompt; for TV2V and TSV2V the edit instruction), the images it shows (`images`, paths relative "
        f"to `{JSONL}`, in the order of `image_roles`), the evaluation instruction, and the target "
        "`{\"reasoning\", \"score\"}`: a 1-5 rating fixed from verified checklist decisions, and prose that "
        "verbalizes those decisions and their evidence. Instruction-following instances also show the task's "
        "condition media (first frame, subject images, source-video frames); the other two dimensions judge "
        "the video alone.",
        "",
        "## Counts",
        "",
        f"- videos: {result.n_videos}; instances: {result.n_instances} ({dims})",
        f"- tasks: {tasks}",
        *[f"- {d} ratings: " + ", ".join(f"{k}: {result.ratings[d][k]}" for k in range(1, 6))
          for d in DIMENSIONS],
        "",
        "## Filters",
        "",
        "- Only videos with a valid evaluation on all three dimensions are kept (FIRM-Video §3.3).",
        f"- Left out: {len(result.left_out)} videos"
        + ("" if not result.left_out else ": " + "; ".join(f"{n} x {k}" for k, n in
                                                           _left_out_kinds(result.left_out).most_common())),
        "",
        "## Sources",
        "",
        *[f"- {k}: {v}" for k, v in sources.items()],
        "",
        "## Loading",
        "",
        "```python",
        "import datasets",
        f'ds = datasets.load_dataset("json", data_files="{JSONL}")["train"]',
        "```",
        "",
    ]
    return "\n".join(lines)
