"""The identity of every cached computation: one typed record of everything that can change its answer.

Each computation the content cache keeps (:mod:`argus_dagster.infra.cache`) builds one frozen dataclass of
its inputs, and :func:`record_key` (the canonical JSON of the record, then sha256) is its key:

- :class:`StepIdentity`: one evidence tool step (each visual tool and ``vlm_qa``);
- :class:`JudgmentIdentity`: one criterion judgment (the judge's own record inside it:
  :class:`EvidenceJudgeIdentity` or a :class:`VlmCall`);
- :class:`RubricIdentity`: one generated rubric (the frozen rubric records its key);
- each protocol's own records, defined in the protocol's folder and registered with :func:`identity_record`.

A VLM call's part is a :class:`VlmCall`: the backend and model (a local model's checkpoint by its
content, :func:`checkpoint_sha256`), the client settings that shape an answer, the prompt's version and the sha256 of its fixed text, the answer's token budget and the
thinking switch. What cannot change an answer is declared beside the record (``IRRELEVANT``: the
names of the configuration fields the factory leaves out, such as the endpoint URL, the API key,
timeouts, retry counts and concurrency), so moving to another server of the same model, or a new
key, reuses everything. ``tests/unit/test_identities.py`` changes each field of each record in turn
and expects a new key, and each irrelevant field and expects the same one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from argus_dagster.infra.media import file_digest


def _plain(value: Any) -> Any:
    item = getattr(value, "item", None)  # a numpy scalar
    if callable(item):
        return item()
    raise TypeError(f"a cache identity holds JSON values only, not {type(value).__name__}: {value!r}")


def record_key(record: Any) -> str:
    """The key of an identity record: sha256 of its canonical JSON (the record's class name and its
    fields, keys sorted, no whitespace). Every cached computation's key is made here."""
    if not dataclasses.is_dataclass(record) or isinstance(record, type):
        raise TypeError(f"record_key takes an identity record (a dataclass instance), not {record!r}")
    body = {"record": type(record).__name__, **dataclasses.asdict(record)}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_plain)
    return hashlib.sha256(text.encode()).hexdigest()


def text_sha256(*texts: str) -> str:
    """The hash of a prompt's fixed text, so an edited prompt is a new identity even at the same version."""
    return hashlib.sha256("\n\x00\n".join(texts).encode()).hexdigest()


# Configuration fields of the VLM resource (resources/vlm.py) that never change an answer.
VLM_IRRELEVANT = ("base_urls", "api_key", "concurrency", "timeout_s", "max_retries", "parse_retries", "slots_dir")


@dataclass(frozen=True)
class VlmCall:
    """One kind of request to a VLM. Greedy decoding (temperature 0, the clients' default) throughout."""

    backend: str
    model: str
    max_answer_chars: int | None  # OpenAI-compatible: a longer answer is cut there
    max_new_tokens: int | None  # a local model's ceiling on an answer
    prompt_version: str
    prompt_sha256: str
    max_tokens: int
    thinking: bool | None
    weights: str | None = None  # a local model's checkpoint (checkpoint_sha256); a server's model is its name

    IRRELEVANT: ClassVar[tuple[str, ...]] = VLM_IRRELEVANT


def checkpoint_sha256(folder: Any) -> str | None:
    """The content hash of a local model's checkpoint folder: every file's relative path and sha256,
    each file's remembered per process by its stamp (:func:`argus_dagster.infra.media.file_digest`), so a
    process reads a checkpoint once. Another checkpoint saved under the same model name is another
    identity; where the folder lies does not count. None where there is no such folder (the client
    then says which path is missing)."""
    root = Path(folder) if folder else None
    if root is None or not root.is_dir():
        return None
    h = hashlib.sha256()
    for f in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(f"{f.relative_to(root).as_posix()}\0{file_digest(str(f))}\n".encode())
    return h.hexdigest()


def vlm_call(client: Any, *, prompt_version: str, prompt: str | tuple[str, ...], max_tokens: int,
             thinking: bool | None) -> VlmCall:
    """The identity of a request of this kind on ``client`` (its endpoints, key and timeouts left out);
    ``prompt``: the request's fixed text (its parts, in order)."""
    backend = str(client.backend)
    return VlmCall(backend=backend, model=str(client.model),
                   max_answer_chars=getattr(client, "max_answer_chars", None) if backend == "openai" else None,
                   max_new_tokens=getattr(client, "max_new_tokens", None) if backend == "transformers" else None,
                   prompt_version=prompt_version,
                   prompt_sha256=text_sha256(*((prompt,) if isinstance(prompt, str) else prompt)),
                   max_tokens=max_tokens, thinking=thinking,
                   weights=getattr(client, "weights", None) if backend == "transformers" else None)


@dataclass(frozen=True)
class StepIdentity:
    """One evidence tool step: the tool, its version and configuration, its arguments, the content
    hash of every medium it reads (a derived crop: the key of the step that cut it) and the sampling
    policies. Where a medium is stored (its URI) does not matter."""

    tool: str
    tool_version: str
    tool_config: dict[str, Any]
    args: dict[str, Any]
    media: dict[str, str]
    after: tuple[str, ...]
    sampling: str

    IRRELEVANT: ClassVar[tuple[str, ...]] = ("uri",)


@dataclass(frozen=True)
class EvidenceJudgeIdentity:
    """The evidence-only judge: its rules are its version."""

    name: str
    version: str


@dataclass(frozen=True)
class JudgmentIdentity:
    """One criterion judgment: the judge, the criterion as the judge sees it, the evidence, and for a
    judge that looks at frames, the video's content hash and the sampling policies."""

    judge: EvidenceJudgeIdentity | VlmCall
    view: dict[str, Any]
    evidence: list[dict[str, Any]]
    video: str | None
    sampling: str | None

    IRRELEVANT: ClassVar[tuple[str, ...]] = VLM_IRRELEVANT


@dataclass(frozen=True)
class RubricIdentity:
    """One generated rubric: the input's content hash and the generator's request."""

    input_hash: str
    call: VlmCall
    sampling: str

    IRRELEVANT: ClassVar[tuple[str, ...]] = VLM_IRRELEVANT


RECORDS: list[type] = [StepIdentity, JudgmentIdentity, RubricIdentity]  # and each protocol's, as it registers


def identity_record(cls: type) -> type:
    """Register a protocol's identity record (a frozen dataclass with its ``IRRELEVANT`` fields) among
    :data:`RECORDS`: the one line a protocol adds for a computation the cache keeps."""
    if not dataclasses.is_dataclass(cls) or not hasattr(cls, "IRRELEVANT"):
        raise TypeError(f"{cls.__name__}: an identity record is a dataclass that declares IRRELEVANT")
    if cls.__name__ in {r.__name__ for r in RECORDS if r is not cls}:
        raise TypeError(f"{cls.__name__}: another identity record has that name (a key holds the class name)")
    if cls not in RECORDS:
        RECORDS.append(cls)
    return cls


__all__ = ["EvidenceJudgeIdentity", "JudgmentIdentity", "RECORDS", "RubricIdentity", "StepIdentity",
           "VLM_IRRELEVANT", "VlmCall", "identity_record", "record_key", "text_sha256", "vlm_call"]
