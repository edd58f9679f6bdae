"""Strict parsers of FIRM-Video's answers: anything off raises :class:`ParseError`, which
:func:`~argus_dagster.vlm.protocol.chat_json` shows back and asks again.
"""

from __future__ import annotations

import re
from typing import Any, Sequence, cast

from argus_dagster.protocols.firm.audio import audio_reason
from argus_dagster.protocols.firm.prompts import PQ_CHECKLIST
from argus_dagster.protocols.firm.types import ChecklistError, ChecklistItem, DroppedItem, Verdict, checked_importance
from argus_dagster.vlm.parsing import extract_json, scored_object
from argus_dagster.vlm.reply import ParseError


def _obj(text: str, key: str) -> Any:
    data = extract_json(text)
    if not isinstance(data, dict) or key not in data:
        raise ParseError(f'the answer is not a JSON object with a "{key}" field')
    return data[key]


def _int_importance(raw: Any, where: str) -> int:
    if isinstance(raw, str) and raw.strip().isdigit():
        raw = int(raw.strip())
    try:
        return checked_importance(raw, where)
    except ChecklistError as exc:
        raise ParseError(str(exc)) from None


_TEXT_CHARS = 2000  # an answer's text field as stored and shown (a server may ignore max_tokens)


def _text(raw: Any, where: str) -> str:
    if not isinstance(raw, str) or not raw.strip():
        raise ParseError(f"{where}: expected a non-empty string, got {repr(raw)[:80]}")
    text = " ".join(raw.split())
    return text if len(text) <= _TEXT_CHARS else text[:_TEXT_CHARS] + f" ...(cut at {_TEXT_CHARS} characters)"


def parse_if_plan(text: str) -> tuple[list[ChecklistItem], list[DroppedItem]]:
    """``{"requirements": [{"question", "importance", "aspect"?}]}`` → items and what was left out:
    requirements about what is heard (:func:`~argus_dagster.protocols.firm.audio.audio_reason`, the
    safety net behind the planner's instruction) and duplicates, each with its reason."""
    reqs = _obj(text, "requirements")
    if not isinstance(reqs, list) or not reqs:
        raise ParseError('"requirements" must be a non-empty list')
    items: list[ChecklistItem] = []
    dropped: list[DroppedItem] = []
    seen: dict[str, str] = {}
    for k, r in enumerate(reqs, start=1):
        if not isinstance(r, dict):
            raise ParseError(f"requirement {k} is not an object")
        q = _text(r.get("question"), f"requirement {k} question")
        m = _int_importance(r.get("importance"), f"requirement {k}")
        heard = audio_reason(q)
        if heard:
            dropped.append(DroppedItem(q, m, f"audio: {heard}"))
            continue
        if q.lower() in seen:
            dropped.append(DroppedItem(q, m, f"duplicate of {seen[q.lower()]}"))
            continue
        aspect = cast(str, r.get("aspect")) if isinstance(r.get("aspect"), str) else ""
        items.append(ChecklistItem(f"r{len(items) + 1}", q, m, "", aspect.strip()))
        seen[q.lower()] = items[-1].id
    if not items:
        raise ParseError("no visual requirement left after leaving out the audio ones: list what is seen")
    return items, dropped


def parse_verdicts(text: str, ids: Sequence[str], yes_means: str) -> list[Verdict]:
    """``{"answers": [{"id", "answer": "yes"|"no"|"unverifiable", "evidence"}]}`` with every id once.

    ``unverifiable`` (or ``unknown``) is kept as not-verifiable; the caller decides what it counts as.
    """
    answers = _obj(text, "answers")
    if not isinstance(answers, list):
        raise ParseError('"answers" must be a list')
    wanted = set(ids)
    got: dict[str, Verdict] = {}
    for k, a in enumerate(answers, start=1):
        if not isinstance(a, dict):
            raise ParseError(f"answer {k} is not an object")
        iid = str(a.get("id", "")).strip()
        if iid not in wanted:
            raise ParseError(f"answer {k}: id {iid!r} is not one of the questions ({', '.join(ids)})")
        raw = str(a.get("answer", "")).strip().lower()
        if raw not in ("yes", "no", "unverifiable", "unknown"):
            raise ParseError(f'answer for {iid}: "answer" must be "yes" or "no" ({yes_means}), got {raw!r}')
        evidence = " ".join(str(a.get("evidence") or "").split())
        got[iid] = Verdict(iid, raw == "yes", evidence, verifiable=raw in ("yes", "no"))
    missing = [i for i in ids if i not in got]
    if missing:
        raise ParseError(f"no answer for {', '.join(missing)}: answer every question")
    return [got[i] for i in ids]


def parse_grounding(text: str) -> dict:
    """``{"scene_summary", "entities": [{"name", "importance"}], "actions": [...]}``."""
    data = extract_json(text)
    if not isinstance(data, dict):
        raise ParseError("the answer is not a JSON object")
    summary = _text(data.get("scene_summary"), "scene_summary")
    targets: list[dict[str, Any]] = []
    for kind in ("entities", "actions"):
        lst = data.get(kind)
        if not isinstance(lst, list):
            raise ParseError(f'"{kind}" must be a list')
        for k, t in enumerate(lst, start=1):
            if not isinstance(t, dict):
                raise ParseError(f"{kind} {k} is not an object")
            targets.append({"kind": "entity" if kind == "entities" else "action",
                            "name": _text(t.get("name"), f"{kind} {k} name"),
                            "importance": _int_importance(t.get("importance"), f"{kind} {k}")})
    if not targets:
        raise ParseError("no entity and no action grounded: list what the video shows")
    names = [t["name"].lower() for t in targets]
    if len(set(names)) != len(names):
        raise ParseError("target names must be unique")
    return {"scene_summary": summary, "targets": targets}


def parse_wc_questions(text: str, target_names: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """``{"targets": [{"target", "questions": [{"question", "aspect"}]}]}`` → questions per known target
    (unknown targets are an error; missing ones are the caller's coverage check)."""
    lst = _obj(text, "targets")
    if not isinstance(lst, list):
        raise ParseError('"targets" must be a list')
    known = {n.lower(): n for n in target_names}
    out: dict[str, list[tuple[str, str]]] = {}
    for k, t in enumerate(lst, start=1):
        if not isinstance(t, dict):
            raise ParseError(f"target {k} is not an object")
        name = _text(t.get("target"), f"target {k}")
        if name.lower() not in known:
            raise ParseError(f"target {name!r} is not one of the grounded targets ({', '.join(target_names)})")
        qs = t.get("questions")
        if not isinstance(qs, list):
            raise ParseError(f"target {name!r}: \"questions\" must be a list")
        out[known[name.lower()]] = [(_text(q.get("question") if isinstance(q, dict) else q, f"{name} question"),
                                     (q.get("aspect") or "") if isinstance(q, dict) else "") for q in qs]
    return out


# A stated score: "score of 4", "rating: 2", "rated 5", "0.85" (a checklist score). Counts such as
# "3 out of 5 requirements" are decisions, not scores, and pass.
_SCORE_WORDS = re.compile(r"\b((score|rating)\s*(of|is|:|=)?\s*[0-5](\.\d+)?\b|rated\s+[1-5]|0\.\d{2,4})",
                          re.IGNORECASE)


def parse_rationale(text: str) -> str:
    """``{"rationale": "..."}``; a rationale that states a score is refused (the score is fixed elsewhere)."""
    out = _text(_obj(text, "rationale"), "rationale")
    if _SCORE_WORDS.search(out):
        raise ParseError("the rationale states a score or rating: verbalize the decisions only")
    return out


def parse_pq(text: str) -> dict:
    """``{"defects": [{"id", "present": "yes"|"no", "evidence"}], "rationale", "score": 1-5}``."""
    data, score = scored_object(text, 5)
    rationale = _text(data.get("rationale"), "rationale")
    defects = data.get("defects")
    if not isinstance(defects, list):
        raise ParseError('"defects" must be a list')
    known = {d for d, _ in PQ_CHECKLIST}
    found = []
    for k, d in enumerate(defects, start=1):
        if not isinstance(d, dict) or d.get("id") not in known:
            raise ParseError(f"defect {k}: id must be one of {sorted(known)}")
        present = str(d.get("present", "")).strip().lower()
        if present not in ("yes", "no"):
            raise ParseError(f'defect {d["id"]}: "present" must be "yes" or "no"')
        evidence = " ".join(str(d.get("evidence") or "").split())
        found.append({"id": d["id"], "present": present == "yes", "evidence": evidence})
    return {"score": score, "rationale": rationale, "defects": found}

