"""The client protocol: what every VLM backbone offers (:class:`VlmClient`), and :func:`chat_json`,
the one way callers ask any of them for a parsed answer.

:func:`chat_json` adds the bounded parse-retry (empty or unparseable answers are asked again, with
the parse error) and strips ``<think>…</think>`` blocks. The backbones:
:class:`~argus_dagster.vlm.openai_compatible.OpenAICompatibleClient` (any ``/v1/chat/completions``
server) and :class:`~argus_dagster.vlm.transformers_client.TransformersClient` (a model on local disk).
"""

from __future__ import annotations

from typing import Callable, Protocol, TypeVar

from argus_dagster.vlm.ledger import CallStats
from argus_dagster.vlm.parsing import strip_think
from argus_dagster.vlm.reply import ParseError, Reply, VlmError

T = TypeVar("T")


class VlmClient(Protocol):
    backend: str
    model: str

    def chat(self, messages: list[dict], *, max_tokens: int = 1024, temperature: float = 0.0,
             stats: CallStats | None = None, thinking: bool | None = None) -> Reply: ...


def chat_json(client: VlmClient, messages: list[dict], parse: Callable[[str], T], *, parse_retries: int = 2,
              max_tokens: int = 1024, stats: CallStats | None = None,
              thinking: bool | None = None) -> tuple[T, Reply]:
    """Ask until ``parse`` accepts the answer, at most ``1 + parse_retries`` times.

    A rejected answer is shown back to the model with the reason, so a model that wrapped its JSON in
    prose or broke a field can fix it. ``thinking=False`` asks the server not to think aloud (method
    §7: judge and ``vlm_qa`` calls). Raises :class:`VlmError` (transport) or :class:`ParseError`
    (still unparseable after the retries).
    """
    if stats is None:  # still counted by any open cost_ledger block
        stats = CallStats()
    convo = list(messages)
    last: ParseError | None = None
    for attempt in range(parse_retries + 1):
        try:
            reply = client.chat(convo, max_tokens=max_tokens, stats=stats, thinking=thinking)
        except VlmError:
            if stats is not None:
                stats.add_call(None, failed=True)
            raise
        try:
            value = parse(reply.text)
        except Exception as exc:  # whatever a parser raises on an answer is that answer's fault, not the run's
            last = exc if isinstance(exc, ParseError) else ParseError(f"{type(exc).__name__}: {str(exc)[:200]}")
            if reply.cut is not None:
                last = ParseError(f"{last} (the answer was cut at {reply.cut} characters)")
            if stats is not None:
                stats.add_call(reply, failed=attempt == parse_retries)
                if attempt < parse_retries:
                    stats.add_parse_retry()
            answer = strip_think(reply.text)
            convo = list(messages)
            if answer:
                convo.append({"role": "assistant", "content": [answer[:4000]]})
            convo.append({"role": "user", "content": [
                f"Your answer could not be used: {last}. Reply again with only the JSON object asked for."]})
            continue
        if stats is not None:
            stats.add_call(reply)
        return value, reply
    raise ParseError(f"unusable answer after {parse_retries + 1} attempts: {last}")

