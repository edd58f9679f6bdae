"""Pydantic schema of a rubric (method §3).

Unknown fields are tolerated (released rubrics carry extra keys); missing or invalid fields are
reported by criterion id and field name, so the author of a rubric can find and fix them.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from argus_dagster.infra.names import json_text_problem
from argus_dagster.infra.storage import LOCAL

Importance = Literal["high", "medium", "low"]
IMPORTANCE_WEIGHT: dict[str, int] = {"high": 3, "medium": 2, "low": 1}
ReferenceSource = Literal["subject_image", "first_frame", "source_video", "web_search", "none"]


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class EvidencePlan(_Lenient):
    target_entity: str = ""
    detector_query: str = ""
    # Steps stay raw dicts here: plan normalization (evidence.plan) owns their repair, so a malformed
    # step is logged and dropped there instead of invalidating the whole rubric.
    tool_sequence: list[Any] = Field(default_factory=list)
    reference_source: str = "none"
    web_search_query: str = ""
    aggregation: str = ""
    notes: str = ""

    @field_validator("reference_source", mode="before")
    @classmethod
    def _none_is_none(cls, v: Any) -> str:
        return "none" if v in (None, "") else str(v)

    @field_validator("target_entity", "detector_query", "web_search_query", "aggregation", "notes", mode="before")
    @classmethod
    def _text(cls, v: Any) -> str:
        return "" if v is None else str(v)


class Criterion(_Lenient):
    id: str
    dimension: int = Field(ge=1, le=22)
    criterion: str = Field(min_length=1)
    type: Literal["hard", "soft"]
    importance: Importance
    scoring_rule: str = Field(min_length=1)
    hard_cap: Literal[2, 4, 6] | None = None
    fail_threshold: float = Field(default=5.0, ge=0, le=10)
    failure_modes: list[str] = Field(default_factory=list)
    derivable_from: Literal["prompt", "input_bundle"] = "prompt"
    evidence_plan: EvidencePlan = Field(default_factory=EvidencePlan)

    @field_validator("id", mode="before")
    @classmethod
    def _id_text(cls, v: Any) -> str:
        return str(v)

    @field_validator("fail_threshold", mode="before")
    @classmethod
    def _default_threshold(cls, v: Any) -> Any:
        return 5.0 if v is None else v

    @field_validator("type", "importance", mode="before")
    @classmethod
    def _lower(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v


class DimensionConsidered(_Lenient):
    dimension: int = Field(ge=1, le=22)
    included: bool
    reason: str = ""


class Rubric(_Lenient):
    task_understanding: str = ""
    dimensions_considered: list[DimensionConsidered] = Field(default_factory=list)
    criteria: list[Criterion] = Field(min_length=1)
    # Who wrote it: backend, model, prompt version, input hash. Not part of the rubric's identity.
    generator: dict[str, Any] = Field(default_factory=dict)

    def content_hash(self) -> str:
        """The rubric's identity: a hash of its content (the generator block excluded)."""
        body = self.model_dump(mode="json", exclude={"generator"})
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()

    def criterion(self, criterion_id: str) -> Criterion:
        for c in self.criteria:
            if c.id == criterion_id:
                return c
        raise KeyError(criterion_id)


class RubricError(ValueError):
    """A rubric that does not validate. ``problems`` lists one message per bad field."""

    def __init__(self, problems: list[str], source: str = ""):
        self.problems = problems
        where = f"{source}: " if source else ""
        super().__init__(f"{where}invalid rubric: " + "; ".join(problems))


def _describe(errors: Sequence[Mapping[str, Any]], raw: dict) -> list[str]:
    criteria = c if isinstance(c := raw.get("criteria"), list) else []
    out = []
    for err in errors:
        loc = list(err["loc"])
        where = "rubric"
        if len(loc) >= 2 and loc[0] == "criteria" and isinstance(loc[1], int):
            idx = loc[1]
            cid = criteria[idx].get("id") if idx < len(criteria) and isinstance(criteria[idx], dict) else None
            where = f"criterion {cid!r}" if cid is not None else f"criterion #{idx + 1} (no id)"
            loc = loc[2:]
        field = ".".join(str(p) for p in loc) or "(whole)"
        out.append(f"{where} field {field!r}: {err['msg']}")
    return out


def parse_rubric(data: Any, source: str = "") -> Rubric:
    """Validate a rubric dict (or ``{"rubric": {...}}`` as some releases wrap it)."""
    if isinstance(data, dict) and "criteria" not in data and isinstance(data.get("rubric"), dict):
        data = data["rubric"]
    if not isinstance(data, dict):
        raise RubricError([f"expected a JSON object, got {type(data).__name__}"], source)
    try:
        rubric = Rubric.model_validate(data)
    except ValidationError as exc:
        raise RubricError(_describe(exc.errors(), data), source) from None
    seen: set[str] = set()
    dupes: list[str] = []
    for c in rubric.criteria:
        if c.id in seen:
            dupes.append(c.id)
        seen.add(c.id)
    if dupes:
        raise RubricError([f"criterion {d!r} field 'id': duplicate id" for d in dupes], source)
    return rubric


# A rubric nests a few levels (criteria, a criterion, its evidence plan, a step, its arguments): a
# file nested deeper than this is refused before it is parsed, so no reading of it recurses without end.
MAX_JSON_DEPTH = 64
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKET = re.compile(r"[\[\]{}]")


def json_too_deep(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON ``text`` nests arrays and objects deeper than ``limit`` (brackets inside strings
    do not count); stops at the first bracket past the limit."""
    depth = 0
    for piece in _JSON_STRING.split(text):
        for m in _BRACKET.finditer(piece):
            depth += 1 if m.group() in "[{" else -1
            if depth > limit:
                return True
    return False


def loads_bounded(text: str | bytes, limit: int = MAX_JSON_DEPTH):
    """``json.loads`` of a rubric's text, or ValueError for text nested deeper than ``limit``."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8-sig")
    if json_too_deep(text, limit):
        raise ValueError(f"JSON nested deeper than {limit} levels")
    return json.loads(text)


def read_json_file(path: str, storage=None):
    """The JSON value in a rubric file (an ``s3://`` object read through ``storage``, the storage
    resource's); what keeps it from being read is a :class:`RubricError`, a file nested deeper than
    :data:`MAX_JSON_DEPTH` and one that holds text that is not UTF-8 (a lone surrogate) included."""
    try:
        if str(path).startswith("s3://"):  # a rubric frozen on S3

            text = (storage or LOCAL).read_bytes(path).decode("utf-8-sig")
        else:
            with open(path, encoding="utf-8-sig") as fh:
                text = fh.read()
        if json_too_deep(text):
            raise RubricError([f"JSON nested deeper than {MAX_JSON_DEPTH} levels; a rubric nests a few"], path)
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RubricError([f"not valid JSON ({exc.msg} at line {exc.lineno}); fix the file"], path) from None
    except UnicodeDecodeError as exc:
        raise RubricError([f"not UTF-8 text (byte {exc.start}); save it as UTF-8 JSON"], path) from None
    except RecursionError:
        raise RubricError(["JSON nested too deeply"], path) from None
    except OSError as exc:
        raise RubricError([f"cannot be read ({exc.strerror or type(exc).__name__})"], path) from None
    problem = json_text_problem(data)
    if problem:  # a "\ud800" escape without its pair: no table or page could hold the rubric
        raise RubricError([f"{problem}; remove it, or write the character itself"], path)
    return data


def load_rubric_file(path: str) -> Rubric:
    """A rubric file read strictly (the graph reads them leniently: ``rubric.lenient.read_rubric_file``)."""
    return parse_rubric(read_json_file(path), path)
