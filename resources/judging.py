"""Rubric generator, criterion judge and aggregation settings.

``auto`` (the default for both) means: the VLM when one is configured, else the embedded default
(the rule-based rubric generator, the evidence-only judge). With a VLM configured, the evidence-only
judge is never used.
"""


from types import SimpleNamespace

import dagster as dg

from argus_dagster.infra.identities import checkpoint_sha256
from argus_dagster.method.inputs import InputInstance
from argus_dagster.method.judge import EvidenceOnlyJudge, VlmJudge, vlm_judge_identity
from argus_dagster.method.rubric.generate import generate_with_vlm, generator_identity, rubric_request
from argus_dagster.method.rubric.offline import GENERATOR, generate_offline
from argus_dagster.method.rubric.schema import Rubric
from argus_dagster.method.scoring import DEFAULT_ALPHA
from argus_dagster.vlm.ledger import CallStats

from .vlm import VlmResource


def _uses_vlm(backend: str, vlm: VlmResource, what: str, fallback: str) -> bool:
    if backend not in ("auto", "vlm", fallback):
        raise ValueError(f"{what} backend {backend!r}: expected 'auto', 'vlm' or {fallback!r}")
    if backend == "vlm" and not vlm.configured:
        raise ValueError(f"{what} backend 'vlm' needs a configured VLM (ARGUS_VLM_BASE_URL and ARGUS_VLM_MODEL)")
    return backend == "vlm" or (backend == "auto" and vlm.configured)


class RubricGeneratorResource(dg.ConfigurableResource):
    """Writes a rubric for an input that has no frozen one: ``auto``, ``vlm`` or ``offline`` (rules)."""

    backend: str = "auto"

    def identity(self, vlm: VlmResource) -> dict:
        if _uses_vlm(self.backend, vlm, "rubric generator", "offline"):
            # The request as the client would make it, without building one (a local model loads).
            answers = SimpleNamespace(backend=vlm.backend, model=vlm.model_name(),
                                      max_answer_chars=vlm.max_answer_chars, max_new_tokens=vlm.max_new_tokens,
                                      weights=checkpoint_sha256(vlm.model_path) if vlm.backend == "transformers" else None)
            return generator_identity(vlm.backend, vlm.model_name(), rubric_request(answers))
        return dict(GENERATOR)

    def generate(self, inst: InputInstance, vlm: VlmResource, stats: CallStats | None = None,
                 storage=None) -> Rubric:
        if _uses_vlm(self.backend, vlm, "rubric generator", "offline"):
            return generate_with_vlm(inst, vlm.client(), stats=stats, storage=storage)
        return generate_offline(inst)


class JudgeResource(dg.ConfigurableResource):
    """The criterion judge: ``auto``, ``vlm`` or ``evidence-only`` (measurable evidence only)."""

    backend: str = "auto"

    def identity(self, vlm: VlmResource) -> str:
        """The identity of the judge :meth:`judge` builds (without building a client)."""
        if _uses_vlm(self.backend, vlm, "judge", "evidence-only"):
            return vlm_judge_identity(vlm.backend, vlm.model_name())
        return EvidenceOnlyJudge().identity

    def judge(self, vlm: VlmResource, stats: CallStats | None = None):
        if _uses_vlm(self.backend, vlm, "judge", "evidence-only"):
            return VlmJudge(vlm.client(), stats=stats, parse_retries=vlm.parse_retries)
        return EvidenceOnlyJudge()


class ScoringResource(dg.ConfigurableResource):
    """Aggregation (method §8): ``cap_alpha`` blends the base score with the hard-capped one."""

    cap_alpha: float = DEFAULT_ALPHA
