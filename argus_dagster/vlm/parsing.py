"""Reading what a VLM answered: reasoning blocks dropped, the JSON value found in prose or fences, a
scored object checked, and the text salvaged from the head of a completion too long to read whole.
"""

from __future__ import annotations

import json
import re
from typing import Any, cast

from argus_dagster.infra.names import json_text_problem
from argus_dagster.vlm.reply import ParseError

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)


def strip_think(text: str) -> str:
    """Drop reasoning blocks; an unterminated ``<think>`` drops everything after it."""
    text = _THINK.sub("", text or "")
    open_at = text.lower().find("<think>")
    return (text[:open_at] if open_at >= 0 else text).strip()


def extract_json(text: str) -> Any:
    """The JSON value in an answer: a fenced block, the whole text, or the first balanced object. A
    value that holds a lone surrogate (a ``"\\ud800"`` escape without its pair) is refused
    (:func:`~argus_dagster.infra.names.json_text_problem`): no table or page could store it."""
    value = _first_json(text)
    problem = json_text_problem(value)
    if problem:
        raise ParseError(f"the answer's JSON {problem}")
    return value


def _first_json(text: str) -> Any:
    text = strip_think(text)
    if not text:
        raise ParseError("empty answer")
    candidates = [m.group(1).strip() for m in _FENCE.finditer(text)] + [text]
    for c in candidates:
        try:
            return json.loads(c)
        except json.JSONDecodeError:
            pass
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "{[":
            try:
                value, _ = decoder.raw_decode(text[i:])
                return value
            except json.JSONDecodeError:
                continue
    raise ParseError(f"no JSON object in the answer ({text[:80]!r}{'...' if len(text) > 80 else ''})")


def scored_object(text: str, top: int) -> tuple[dict, int]:
    """The JSON object of an answer and its ``"score"``, an integer 1..``top`` (a digit string counts);
    anything else raises :class:`ParseError`."""
    data = extract_json(text)
    if not isinstance(data, dict):
        raise ParseError("the answer is not a JSON object")
    raw = data.get("score")
    if isinstance(raw, str) and raw.strip().isdigit():
        raw = int(raw.strip())
    if isinstance(raw, bool) or not isinstance(raw, (int, float)) or raw != int(raw) or not 1 <= raw <= top:
        raise ParseError(f'"score" must be an integer 1-{top}, got {raw!r}')
    return data, int(raw)


def salvage_content(head: bytes) -> str | None:
    """The assistant message's text from the head of a chat completion too long to read whole."""
    text = head.decode("utf-8", "ignore")
    m = re.search(r'"content"\s*:\s*"', text)
    if not m:
        return None
    rest = text[m.end():]
    try:
        return cast(Any, json.decoder).scanstring('"' + rest, 1)[0]  # typeshed omits json.decoder.scanstring  # the content ended inside the head
    except ValueError:
        pass
    for cut in range(len(rest), max(len(rest) - 12, -1), -1):  # drop an escape cut in half
        try:
            return json.loads('"' + rest[:cut] + '"')
        except ValueError:
            continue
    return None

