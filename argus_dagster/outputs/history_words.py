"""Runs and their results in a person's words: a judge's label, why a partition runs again (the reasons
a plan gives, with what each touches), which inputs of a task moved, what the automation sensor holds
back, and the row errors of an evaluation summed up by kind.

Pure functions of text, tables and dicts: what the client reads from the Dagster instance
(:mod:`argus_dagster.client.results`, :mod:`argus_dagster.client.reasons`) is passed in.
"""

from __future__ import annotations

import re
import time


def evaluator_label(identity: str | dict | None) -> str:
    """A judge's identity in a person's words: ``vlm/openai/Qwen2.5-VL-7B/judge-4`` is
    ``openai:Qwen2.5-VL-7B``, ``evidence-only/5`` is ``evidence-only``; a rubric generator's identity
    (``{"backend", "model", ...}``) is ``backend:model`` (``offline`` for the rules)."""
    if isinstance(identity, dict):
        backend, model = identity.get("backend"), identity.get("model")
        return "offline" if backend == "offline" else f"{backend}:{model}"
    text = str(identity or "")
    if text.startswith("vlm/"):
        parts = text.split("/")
        return f"{parts[1]}:{'/'.join(parts[2:-1])}" if len(parts) >= 4 else text
    return text.split("/")[0] if text else "none"


def split_partition(partition: str | None) -> tuple[str, str]:
    """``(task, model)`` of a task x model key (``model|task``), ``(task, "")`` of a task key."""
    if partition and "|" in partition:
        model, task = partition.split("|", 1)
        return task, model
    return partition or "", ""


# What "inputs" means to a person reading a diff: the sources and the rubrics (an intermediate table's
# new data version follows from these).
SOURCE_INPUTS = ("candidate_files", "bench_files", "rubric_files", "rubrics", "rubric_generator_config",
                 "tool_suite_config", "judge_config", "aggregation_config")
EVALUATOR_PARTS = {"judge_config": "judge", "rubric_generator_config": "rubric generator",
                   "tool_suite_config": "tools", "aggregation_config": "aggregation"}
INPUT_WORDS = {"bench_files": "bench files (manifest, conditions) of", "rubric_files": "frozen rubrics of",
               "candidate_files": "videos of"}


def where(partition: str | None) -> str:
    """A partition in a person's words: ``T2V x model`` of a task x model key, the task of a task key."""
    task, model = split_partition(partition)
    return f"{task} x {model}" if model else task


def input_changes(task: str, before: list[dict] | None, now: list[dict]) -> list[tuple[str, str]]:
    """``(reason, input_id)`` for each input of a task whose manifest row moved between the stored
    ``input_instances`` rows (``before``) and the bench's rows now: "prompt of T2V/apple changed",
    "conditions of T2V/apple changed" (its media), "input T2V/apple added" or "removed"."""
    if before is None:
        return []
    was, is_ = {r["input_id"]: r for r in before}, {r["input_id"]: r for r in now}
    out = []
    for i in sorted(set(was) | set(is_), key=str):
        if i not in was:
            out.append((f"input {task}/{i} added", i))
        elif i not in is_:
            out.append((f"input {task}/{i} removed", i))
        elif (was[i].get("content_hash"), was[i].get("error")) != (is_[i].get("content_hash"), is_[i].get("error")):
            what = "prompt" if was[i].get("prompt") != is_[i].get("prompt") else "conditions"
            out.append((f"{what} of {task}/{i} changed", i))
    return out


def _criteria_words(ids: list[str], most: int = 6) -> str:
    words = [i.replace("_", " ") for i in ids]
    return ", ".join(words[:most]) + (f" and {len(words) - most} more" if len(words) > most else "")


def reason_lines(why: dict[tuple[str, str | None], list[str]], requested: dict[str, set],
                 n_videos: dict[tuple[str, str], int], inputs_of: dict[str, set] | None = None,
                 per_input: dict[tuple[str, str], int] | None = None, *,
                 judgments: dict[tuple[str, str], int] | None = None,
                 rubric_now: dict[tuple[str, str], list[str]] | None = None) -> list[str]:
    """Each reason a plan gives, with what it touches: ``judge: evidence-only -> openai:X: 9 partitions,
    32 videos, 410 criterion judgments as stored now`` (``why``: per (asset, partition) its reasons; ``requested``:
    the plan's partitions per asset; ``n_videos``: per (task, model) its videos; ``judgments``: per
    (task, model) its stored criterion judgments, counted where the reason makes ``criterion_scores``
    run). A reason about inputs (``inputs_of``: its ``(task, input_id)``s) counts them and their
    videos (``per_input``) and names the criteria of their rubrics now (``rubric_now``), which are
    written again: ``prompt of T2V/apple changed: 1 input, 5 videos; its rubric (now: subject present,
    action) is written again``. The lookahead ("an input runs first") is not a reason of its own."""
    inputs_of, per_input, judgments, rubric_now = inputs_of or {}, per_input or {}, judgments or {}, rubric_now or {}
    judged: dict[str, set] = {}  # a reason -> the (task, model)s whose criterion_scores it runs
    for p in requested.get("criterion_scores", set()):
        for text in why.get(("criterion_scores", p), []) if p is not None else []:
            judged.setdefault(text, set()).add(split_partition(p))
    touched: dict[str, tuple[set, set]] = {}
    for asset, parts in requested.items():
        for p in parts:
            if p is None:
                continue
            for text in why.get((asset, p), []):
                if text == "an input runs first":
                    continue
                tasks, keys = touched.setdefault(text, (set(), set()))
                task, model = split_partition(p)
                (keys if model else tasks).add((task, model) if model else task)
    lines = []
    for text, (tasks, keys) in touched.items():
        if text in inputs_of:
            n = sum(per_input.get(k, 0) for k in inputs_of[text])
            k = len(inputs_of[text])
            line = f"{text}: {k} input{'s' if k != 1 else ''}, {n} video{'s' if n != 1 else ''}"
            now = sorted({c for key in inputs_of[text] for c in rubric_now.get(key, [])})
            if now and "rubrics" in requested:
                line += (f"; {'its rubric' if k == 1 else 'their rubrics'} (now: {_criteria_words(now)}) "
                         f"{'is' if k == 1 else 'are'} written again")
            lines.append(line)
            continue
        videos = {k for k in n_videos if k in keys or k[0] in tasks}
        counts = ([f"{len(tasks)} task{'s' if len(tasks) != 1 else ''}"] if tasks else []) + (
            [f"{len(keys)} partition{'s' if len(keys) != 1 else ''}"] if keys else [])
        n = sum(n_videos[k] for k in videos)
        line = f"{text}: {', '.join(counts)}, {n} video{'s' if n != 1 else ''}"
        c = sum(judgments.get(k, 0) for k in judged.get(text, set()))
        if c:
            line += f", {c} criterion judgment{'s' if c != 1 else ''} as stored now"
        lines.append(line)
    return lines


RETRIED = {"rubrics": "rubrics the generator failed to make", "criterion_evidence": "failed tool steps",
           "criterion_scores": "unanswered judgments"}


def retry_wait_text(waiting: dict[tuple[str, str | None], float]) -> str:
    """What the automation sensor holds back (``{(asset, partition): when it may be retried}``), in
    words: "N partitions wait to retry (what failed), next at HH:MM; argus evaluate retries them now";
    empty when nothing waits."""
    if not waiting:
        return ""
    n = len({p for _, p in waiting})
    what = ", ".join(RETRIED[a] for a in RETRIED if any(asset == a for asset, _ in waiting))
    when = time.strftime("%H:%M", time.localtime(min(waiting.values())))
    return (f"{n} partition{'s' if n != 1 else ''} wait{'s' if n == 1 else ''} to retry ({what}), next at {when}; "
            "argus evaluate retries them now")


_PREFIX = re.compile(r"^(input invalid: |line \d+: |line \d+ (?=field )|[^\s:]*/[^\s:]*: )+")
_QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
_NUMBERS = re.compile(r"(?<![\w-])\d[\d,.]*")


def error_kind(error: str) -> str:
    """What kind of error ``error`` is, the same for every row of that kind: its text up to the first
    colon or semicolon (after ``field …:``, the next), without the manifest line or file path it opens
    with, quoted names as ``…`` and numbers as ``N`` (``line 7: input 'a' is listed again (first on
    line 1); ...`` is ``input … is listed again (first on line N)``)."""
    text = _NUMBERS.sub("N", _QUOTED.sub("…", _PREFIX.sub("", error.strip())))
    parts = re.split(r"[:;]", text)
    kind = parts[0].strip()
    if kind.endswith("field …") and len(parts) > 1:
        kind += ": " + parts[1].strip()
    return kind[:80] or "error"


def error_summary(errors: list[tuple[str, str, str]], first: int = 3) -> str:
    """How many rows carry an error, of which kind (:func:`error_kind`), and the first few of each kind
    with where they are and their ids; empty when there is none."""
    if not errors:
        return ""
    kinds: dict[str, list[tuple[str, str, str]]] = {}
    for where, iid, error in errors:
        kinds.setdefault(error_kind(error), []).append((where, iid, error))
    lines = [f"\n{len(errors)} row{'s' if len(errors) != 1 else ''} with an error (they are not scored; "
             "the rest are):"]
    for kind, rows in sorted(kinds.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"  {len(rows)} x {kind}")
        for where, iid, error in rows[:first]:
            lines.append(f"      {where} {iid!r}: {_clipped(error, 160)}")
        if len(rows) > first:
            lines.append(f"      ... and {len(rows) - first} more")
    return "\n".join(lines)


def _clipped(text: str, most: int) -> str:
    """``text`` in at most ``most`` characters: a long one keeps its start and its end (an error opens
    with the file's path and ends with the reason, which a deep folder must not push out)."""
    if len(text) <= most:
        return text
    head = most // 3
    return f"{text[:head]} … {text[-(most - head - 3):]}"
