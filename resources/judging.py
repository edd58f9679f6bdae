"""Rubric generator, criterion judge and aggregation settings."""


import dagster as dg

from argus_dagster.instances import InputInstance
from argus_dagster.judge import EvidenceOnlyJudge
from argus_dagster.rubric.offline import GENERATOR, generate_offline
from argus_dagster.rubric.schema import Rubric
from argus_dagster.scoring import DEFAULT_ALPHA


class RubricGeneratorResource(dg.ConfigurableResource):
    """Writes a rubric for an input that has no frozen one. ``offline``: the rule-based generator."""

    backend: str = "offline"

    def identity(self) -> dict:
        return dict(GENERATOR)

    def generate(self, inst: InputInstance) -> Rubric:
        if self.backend != "offline":
            raise ValueError(f"rubric generator backend {self.backend!r} is not available; use 'offline'")
        return generate_offline(inst)


class JudgeResource(dg.ConfigurableResource):
    """The criterion judge. ``evidence-only``: scores measurable evidence, leaves the rest unscored."""

    backend: str = "evidence-only"

    def judge(self):
        if self.backend != "evidence-only":
            raise ValueError(f"judge backend {self.backend!r} is not available; use 'evidence-only'")
        return EvidenceOnlyJudge()


class ScoringResource(dg.ConfigurableResource):
    """Aggregation (method §8): ``cap_alpha`` blends the base score with the hard-capped one."""

    cap_alpha: float = DEFAULT_ALPHA
