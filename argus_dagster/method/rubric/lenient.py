"""Reading rubrics as they are written in the wild (method §3 and the released rubrics).

Released and hand-written rubrics spell fields loosely: a cap ``"6"``, an importance ``High``, a type
``HARD``, ``failure_modes`` as one sentence, a null ``evidence_plan``, a ``derivable_from`` outside the
schema. Strict validation would take such an input out of every model's scores for one field, so a
loaded rubric goes through :func:`coerce_rubric` first: what has one obvious meaning is coerced, what
is missing gets the schema's default, and each change is logged (the ``rubrics`` table keeps the log).
Only what cannot be read is rejected: a file that is not JSON (or nested deeper than a rubric nests), a
rubric without criteria, and, one at a time, a criterion without text or with more than
:data:`MAX_CRITERION_TEXT` characters of it (the others stand).
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from argus_dagster.method.rubric.schema import Criterion, Rubric, RubricError, parse_rubric, read_json_file
from argus_dagster.method.rubric.taxonomy import DIMENSIONS

CAPS = (2, 4, 6)
_IMPORTANCE = {"high": "high", "h": "high", "critical": "high", "very high": "high", "highest": "high",
               "medium": "medium", "med": "medium", "m": "medium", "moderate": "medium", "normal": "medium",
               "low": "low", "l": "low", "minor": "low", "lowest": "low"}
_TYPE = {"hard": "hard", "hard constraint": "hard", "must": "hard", "required": "hard",
         "soft": "soft", "soft constraint": "soft", "should": "soft", "optional": "soft"}
_NULL = ("", "none", "null", "n/a", "na", "no", "no cap", "-")
_REFERENCE = {"subject": "subject_image", "subject_image": "subject_image", "subject_images": "subject_image",
              "subject image": "subject_image", "reference_image": "subject_image", "first_frame": "first_frame",
              "first frame": "first_frame", "image": "first_frame", "source_video": "source_video",
              "source video": "source_video", "source": "source_video", "video": "source_video",
              "web_search": "web_search", "web search": "web_search", "web": "web_search", "search": "web_search",
              "none": "none", "": "none", "null": "none"}
_TEXT_ALIASES = ("criterion", "description", "requirement", "text", "question")
# A criterion's text is one requirement; a longer one is rejected (the others stand), so it never
# reaches a judge's request or a page whole.
MAX_CRITERION_TEXT = 4_000
_DIMENSION_NAMES = {v.lower(): k for k, v in DIMENSIONS.items()}
DEFAULT_SCORING_RULE = ("10: the criterion is fully met in every sampled frame. 5: partly met, or met only in "
                        "some frames. 0: not met at all. Integer 0-10.")


def _key(v: Any) -> str:
    return re.sub(r"[\s_-]+", " ", str(v)).strip().lower()


class _Log:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, where: str, field: str, old: Any, new: Any, why: str = "") -> None:
        self.lines.append(f"{where} field {field!r}: {json.dumps(old, default=str)[:80]} -> "
                          f"{json.dumps(new, default=str)[:80]}" + (f" ({why})" if why else ""))


def _dimension(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)) and float(v).is_integer():
        return int(v) if 1 <= int(v) <= 22 else None
    if isinstance(v, str):
        m = re.fullmatch(r"\s*(?:dim(?:ension)?\.?\s*|d)?(\d{1,2})(?:\s*[:.\-)].*)?\s*", v, re.IGNORECASE)
        if m and 1 <= int(m.group(1)) <= 22:
            return int(m.group(1))
        return _DIMENSION_NAMES.get(v.strip().lower())
    return None


def _cap(v: Any) -> tuple[int | None, bool]:
    """(cap, readable): a number 2, 4 or 6 in any spelling; null spellings are no cap."""
    if v is None or (isinstance(v, str) and v.strip().lower() in _NULL):
        return None, True
    if isinstance(v, bool):
        return None, False
    if isinstance(v, str):
        m = re.fullmatch(r"\s*(?:cap\s*)?(\d+(?:\.0+)?)\s*(?:/\s*10)?\s*", v, re.IGNORECASE)
        if not m:
            return None, False
        v = float(m.group(1))
    if isinstance(v, (int, float)) and float(v).is_integer() and int(v) in CAPS:
        return int(v), True
    return None, False


def _strings(v: Any) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        return [v.strip()] if v.strip() else []
    if isinstance(v, dict):
        return [f"{k}: {x}" for k, x in v.items()]
    if isinstance(v, (list, tuple)):
        return [str(x).strip() for x in v if x is not None and str(x).strip()]
    return [str(v)]


def _plan(raw: Any, where: str, log: _Log) -> dict[str, Any]:
    if raw is None:
        log(where, "evidence_plan", None, {}, "missing: plan normalization gives it a vlm_qa step")
        return {}
    if isinstance(raw, list):
        log(where, "evidence_plan", "a list of steps", {"tool_sequence": "..."}, "read as the tool sequence")
        raw = {"tool_sequence": raw}
    if not isinstance(raw, dict):
        log(where, "evidence_plan", raw, {}, "not an object; kept as notes")
        return {"notes": str(raw)}
    plan = dict(raw)
    seq = plan.get("tool_sequence")
    if seq is None and isinstance(plan.get("tools"), list):
        seq = plan.pop("tools")
        log(where, "evidence_plan.tool_sequence", None, "tools", "read from 'tools'")
    if isinstance(seq, dict):
        log(where, "evidence_plan.tool_sequence", "one step object", [seq], "wrapped in a list")
        seq = [seq]
    elif isinstance(seq, str):
        log(where, "evidence_plan.tool_sequence", seq, [], "not a list of steps")
        plan["notes"] = f"{plan.get('notes') or ''} tool_sequence: {seq}".strip()
        seq = []
    elif seq is not None and not isinstance(seq, list):
        log(where, "evidence_plan.tool_sequence", seq, [], "not a list of steps")
        seq = []
    steps = []
    for s in seq or []:
        if isinstance(s, str) and s.strip():  # a bare tool name
            log(where, "evidence_plan.tool_sequence", s, {"tool": s.strip(), "args": {}}, "bare tool name")
            s = {"tool": s.strip(), "args": {}}
        steps.append(s)
    plan["tool_sequence"] = steps
    ref = plan.get("reference_source")
    if ref is not None and not isinstance(ref, str):
        ref = str(ref)
    if ref is not None:
        new = _REFERENCE.get(_key(ref).replace(" ", "_")) or _REFERENCE.get(_key(ref))
        if new is None:
            log(where, "evidence_plan.reference_source", ref, "none", "unknown source")
            new = "none"
        elif new != ref:
            log(where, "evidence_plan.reference_source", ref, new)
        plan["reference_source"] = new
    for text in ("target_entity", "detector_query", "web_search_query", "aggregation", "notes"):
        v = plan.get(text)
        if v is not None and not isinstance(v, str):
            plan[text] = ", ".join(_strings(v)) if isinstance(v, (list, tuple)) else str(v)
            log(where, f"evidence_plan.{text}", v, plan[text])
    return plan


def _criterion(raw: dict[str, Any], n: int, log: _Log) -> dict[str, Any]:
    """A criterion dict the schema accepts, or raises ValueError naming why it cannot be read."""
    c = dict(raw)
    cid = c.get("id")
    where = f"criterion {cid!r}" if cid not in (None, "") else f"criterion #{n}"
    text = c.get("criterion")
    if not (isinstance(text, str) and text.strip()):
        alias = next((k for k in _TEXT_ALIASES[1:] if isinstance(c.get(k), str) and c[k].strip()), None)
        if alias is None:
            raise ValueError(f"{where} field 'criterion': no text saying what to verify (add a 'criterion' sentence)")
        c["criterion"] = c[alias].strip()
        log(where, "criterion", None, c["criterion"], f"read from {alias!r}")
    if len(c["criterion"]) > MAX_CRITERION_TEXT:
        raise ValueError(f"{where} field 'criterion': {len(c['criterion']):,} characters (at most "
                         f"{MAX_CRITERION_TEXT:,}: one requirement, said in a sentence or two)")
    if cid in (None, ""):
        c["id"] = f"criterion_{n}"
        log(where, "id", cid, c["id"], "missing")
        where = f"criterion {c['id']!r}"
    elif not isinstance(cid, str):
        c["id"] = str(cid)

    dim = _dimension(c.get("dimension"))
    if dim is None:
        log(where, "dimension", c.get("dimension"), 15, "missing or not 1-22: overall text-video alignment")
        dim = 15
    elif dim != c.get("dimension"):
        log(where, "dimension", c.get("dimension"), dim)
    c["dimension"] = dim

    cap, readable = _cap(c.get("hard_cap"))
    if not readable:
        log(where, "hard_cap", c.get("hard_cap"), None, "not 2, 4 or 6: no cap")
    elif cap != c.get("hard_cap") and "hard_cap" in c:
        log(where, "hard_cap", c.get("hard_cap"), cap)
    c["hard_cap"] = cap

    raw_type = c.get("type")
    kind = _TYPE.get(_key(raw_type)) if isinstance(raw_type, str) else None
    if isinstance(raw_type, bool):  # {"hard": true} style flags
        kind = "hard" if raw_type else "soft"
    if kind is None:
        kind = "hard" if cap is not None else "soft"
        log(where, "type", raw_type, kind, "missing or unknown: hard only when it has a cap")
    elif kind != raw_type:
        log(where, "type", raw_type, kind)
    c["type"] = kind

    raw_imp = c.get("importance")
    imp = None
    if isinstance(raw_imp, str):
        imp = _IMPORTANCE.get(_key(raw_imp))
    elif isinstance(raw_imp, (int, float)) and not isinstance(raw_imp, bool) and raw_imp in (1, 2, 3):
        imp = {1: "low", 2: "medium", 3: "high"}[int(raw_imp)]  # the method's weights
    if imp is None:
        log(where, "importance", raw_imp, "medium", "missing or unknown")
        imp = "medium"
    elif imp != raw_imp:
        log(where, "importance", raw_imp, imp)
    c["importance"] = imp

    rule = c.get("scoring_rule")
    if isinstance(rule, dict):
        rule = "; ".join(f"{k}: {v}" for k, v in rule.items())
        log(where, "scoring_rule", "an object", rule)
    elif isinstance(rule, list):
        rule = " ".join(_strings(rule))
        log(where, "scoring_rule", "a list", rule)
    if not (isinstance(rule, str) and rule.strip()):
        log(where, "scoring_rule", c.get("scoring_rule"), "the default 0-10 scale", "missing")
        rule = DEFAULT_SCORING_RULE
    c["scoring_rule"] = rule

    thr = c.get("fail_threshold")
    if thr is not None:
        try:
            value = float(thr)
        except (TypeError, ValueError):
            value = None
        if value is None or not 0 <= value <= 10:
            log(where, "fail_threshold", thr, 5, "not a number 0-10: the default")
            value = 5.0
        c["fail_threshold"] = value

    fm = c.get("failure_modes")
    modes = _strings(fm)
    if fm is not None and modes != fm:
        log(where, "failure_modes", fm, modes)
    c["failure_modes"] = modes

    plan = _plan(c.get("evidence_plan"), where, log)
    c["evidence_plan"] = plan

    der = c.get("derivable_from")
    if der not in ("prompt", "input_bundle"):
        k = _key(der) if der is not None else ""
        if k in ("prompt", "text", "text prompt", "instruction"):
            new = "prompt"
        elif any(w in k.split() for w in ("input", "inputs", "bundle", "image", "images", "video", "frame",
                                           "reference", "subject", "source")):
            new = "input_bundle"
        else:  # unknown: what the plan compares against decides
            ref = plan.get("reference_source", "none")
            new = "input_bundle" if ref in ("subject_image", "first_frame", "source_video") else "prompt"
        log(where, "derivable_from", der, new, "" if der is None else "not prompt or input_bundle")
        c["derivable_from"] = new
    return c


def coerce_rubric(data: Any, source: str = "") -> tuple[dict[str, Any], list[str], list[str]]:
    """``(rubric dict, coercions, rejected criteria)``. Raises :class:`RubricError` when nothing is readable."""
    if isinstance(data, dict) and "criteria" not in data and isinstance(data.get("rubric"), dict):
        data = data["rubric"]
    if not isinstance(data, dict):
        raise RubricError([f"expected a JSON object with a 'criteria' list, got {type(data).__name__}"], source)
    log = _Log()
    crits = data.get("criteria")
    if isinstance(crits, dict):  # criteria keyed by id
        crits = [{"id": k, **v} if isinstance(v, dict) else v for k, v in crits.items()]
        log.lines.append("rubric field 'criteria': an object keyed by id -> a list")
    if not isinstance(crits, list) or not crits:
        raise RubricError(["rubric field 'criteria': no criteria (add a non-empty list of criteria)"], source)
    out, rejected, seen = [], [], set()
    for n, raw in enumerate(crits, start=1):
        if not isinstance(raw, dict):
            rejected.append(f"criterion #{n}: not an object ({json.dumps(raw, default=str)[:60]})")
            continue
        try:
            c = _criterion(raw, n, log)
            Criterion.model_validate(c)
        except ValueError as exc:  # pydantic's ValidationError is a ValueError too
            msg = str(exc) if not isinstance(exc, ValidationError) else "; ".join(
                f"field {'.'.join(map(str, e['loc']))!r}: {e['msg']}" for e in exc.errors())
            rejected.append(msg if msg.startswith("criterion") else f"criterion #{n} ({raw.get('id')!r}): {msg}")
            continue
        if c["id"] in seen:
            new = f"{c['id']}_{n}"
            log(f"criterion {c['id']!r}", "id", c["id"], new, "duplicate id")
            c["id"] = new
        seen.add(c["id"])
        out.append(c)
    if not out:
        raise RubricError(["no readable criterion: " + "; ".join(rejected)], source)
    body = {k: v for k, v in data.items() if k not in ("criteria", "dimensions_considered")}
    if not isinstance(body.get("task_understanding", ""), str):
        log("rubric", "task_understanding", body["task_understanding"], str(body["task_understanding"]))
        body["task_understanding"] = str(body["task_understanding"])
    if body.get("task_understanding") is None:
        body["task_understanding"] = ""
    if not isinstance(body.get("generator", {}), dict):
        log("rubric", "generator", body["generator"], {}, "not an object")
        body["generator"] = {}
    considered = []
    raw_dims = data.get("dimensions_considered")
    for d in raw_dims if isinstance(raw_dims, list) else []:
        dim = _dimension(d.get("dimension")) if isinstance(d, dict) else None
        if dim is None:
            log("rubric", "dimensions_considered", d, None, "entry without a dimension 1-22: dropped")
            continue
        inc = d.get("included")
        if not isinstance(inc, bool):
            flag = _key(inc) in ("yes", "true", "1", "included", "y")
            log("rubric", f"dimensions_considered[{dim}].included", inc, flag)
            inc = flag
        considered.append({"dimension": dim, "included": inc, "reason": str(d.get("reason") or "")})
    if raw_dims is not None and not isinstance(raw_dims, list):
        log("rubric", "dimensions_considered", "not a list", [], "dropped")
    return {**body, "dimensions_considered": considered, "criteria": out}, log.lines, rejected


def read_rubric(data: Any, source: str = "") -> tuple[Rubric, list[str]]:
    """A rubric read leniently; the log lists every coercion and every rejected criterion."""
    body, coercions, rejected = coerce_rubric(data, source)
    rubric = parse_rubric(body, source)
    return rubric, coercions + [f"rejected {r}" for r in rejected]


def read_rubric_file(path: str, storage=None) -> tuple[Rubric, list[str]]:
    return read_rubric(read_json_file(path, storage), path)
