"""Dagster resources, one module per concern, and the per-environment sets.

``ARGUS_ENV`` picks one set: ``local`` (the embedded default), ``gpu`` (tools on CUDA) or ``aws``
(tables on S3). The whole swap is visible in :func:`resources_for`.
"""


import dagster as dg
from dagster_polars import PolarsParquetIOManager

from argus_dagster.settings import environment, load_settings

from .bench import BenchResource
from .judging import JudgeResource, RubricGeneratorResource, ScoringResource
from .tools import ToolsResource, tools_from_env
from .vlm import VlmResource, vlm_from_env

ENVIRONMENTS = ("local", "gpu", "aws")


def resources_for(env: str | None = None, vlm_only: bool | None = None) -> dict:
    """The resources of one environment; ``vlm_only`` None: as ``ARGUS_VLM_ONLY`` says."""
    variables = environment()
    env = env or variables.get("ARGUS_ENV", "local")
    if env not in ENVIRONMENTS:
        raise ValueError(f"ARGUS_ENV={env!r}: expected one of {ENVIRONMENTS}")
    settings = load_settings()
    if vlm_only is None:
        vlm_only = variables.flag("ARGUS_VLM_ONLY")
    common = {
        "bench": BenchResource(),
        "rubric_generator": RubricGeneratorResource(),
        "judge": JudgeResource(),
        "scoring": ScoringResource(),
        # The judge's VLM (also answers vlm_qa) and the rubric generator's, chosen independently.
        "vlm": vlm_from_env("ARGUS_VLM"),
        "rubric_vlm": vlm_from_env("ARGUS_RUBRIC", fallback="ARGUS_VLM"),
    }
    if env == "local":
        return {**common,
                "tools": tools_from_env("cpu", vlm_only=vlm_only),
                "io_manager": PolarsParquetIOManager(base_dir=str(settings.storage_dir))}
    if env == "gpu":
        return {**common,
                "tools": tools_from_env("cuda", vlm_only=vlm_only),
                "io_manager": PolarsParquetIOManager(base_dir=str(settings.storage_dir))}
    return {**common,
            "tools": tools_from_env("cpu", vlm_only=vlm_only),
            "io_manager": PolarsParquetIOManager(
                base_dir=f"s3://{variables.get('ARGUS_S3_BUCKET', 'argus')}/{variables.get('ARGUS_S3_PREFIX', 'storage')}",
                storage_options={"endpoint_url": {"env": "ARGUS_S3_ENDPOINT_URL"}} if variables.get("ARGUS_S3_ENDPOINT_URL") else None,
            )}


def executor_for(env: str | None = None) -> dg.ExecutorDefinition:
    """How a run executes its steps. On one machine (``local``, ``gpu``) every step of a run runs in
    the run's own process: one import of the code location per run instead of one per step, and the
    steps share the process's VLM client, frame pool and loaded models. ``aws`` keeps Dagster's
    process per step, for launchers that place steps on other machines."""
    env = env or environment().get("ARGUS_ENV", "local")
    return dg.multiprocess_executor if env == "aws" else dg.in_process_executor


__all__ = ["resources_for", "executor_for", "BenchResource", "ToolsResource", "RubricGeneratorResource", "JudgeResource",
           "ScoringResource", "VlmResource", "ENVIRONMENTS"]
