"""Dagster resources, one module per concern, and the per-environment sets.

``ARGUS_ENV`` picks one set: ``local`` (the embedded default), ``gpu`` (tools on CUDA) or ``aws``
(tables, content cache, frozen rubrics and reports on S3, under ``s3://$ARGUS_S3_BUCKET/$ARGUS_S3_PREFIX``;
the bench and candidate store wherever ``ARGUS_BENCH_DIR``/``ARGUS_CANDIDATES_DIR`` say, folders or
``s3://`` prefixes). The whole swap is visible in :func:`resources_for`; every asset reaches files and
objects through the one ``storage`` resource, whichever the set.
"""


import dagster as dg
from dagster_polars import PolarsParquetIOManager

from argus_dagster import storage as storage_lib
from argus_dagster.names import folder_name
from argus_dagster.settings import Settings, SettingError, environment, load_settings, parse_profile

from .bench import BenchResource, bench_from_settings
from .storage import StorageIOManager, StorageResource
from .judging import JudgeResource, RubricGeneratorResource, ScoringResource
from .tools import ToolsResource, tools_from_env
from .vlm import VlmResource, vlm_from_env

ENVIRONMENTS = ("local", "gpu", "aws")


def storage_for(env: str | None = None, settings: Settings | None = None
                ) -> tuple[BenchResource, StorageResource, str]:
    """Where one environment keeps one evaluation: its bench resource (every folder), its storage
    resource (made this process's storage) and its content cache's location. ``aws`` keeps the
    ``$ARGUS_HOME`` layout under ``s3://$ARGUS_S3_BUCKET/$ARGUS_S3_PREFIX``."""
    variables = environment()
    env = env or variables.get("ARGUS_ENV", "local")
    settings = settings or load_settings()
    bench = bench_from_settings(settings)
    cache_dir = variables.get("ARGUS_CACHE") or str(settings.cache_dir)
    if env == "aws":  # the same layout as under ARGUS_HOME, under one bucket and prefix
        base = f"s3://{variables.get('ARGUS_S3_BUCKET', 'argus')}/{variables.get('ARGUS_S3_PREFIX', 'argus').strip('/')}"
        bench_home = storage_lib.join(base, "benches", folder_name(settings.bench))
        evaluation = storage_lib.join(bench_home, folder_name(settings.profile))
        bench = bench_from_settings(settings, frozen_rubrics_dir=storage_lib.join(bench_home, "rubrics"),
                                    reports_dir=storage_lib.join(evaluation, "reports"),
                                    storage_dir=storage_lib.join(evaluation, "storage"))
        cache_dir = variables.get("ARGUS_CACHE") or storage_lib.join(base, "cache")
    # Endpoint and region are settings, not secrets; credentials stay in the standard AWS variables
    # (or the instance's role), which boto3 reads: they never enter the run config.
    storage = StorageResource(
        endpoint_url=variables.get("ARGUS_S3_ENDPOINT_URL") or None,
        region_name=variables.get("ARGUS_S3_REGION") or None,
        media_cache_dir=variables.get("ARGUS_MEDIA_CACHE") or str(settings.home / "media"),
        hash_index="" if cache_dir == "off" else cache_dir,
        presign_expiry_s=int(variables.number("ARGUS_S3_PRESIGN_EXPIRY_S", 7 * 24 * 3600, minimum=1)))
    storage_lib.use(storage.storage())  # what library code outside a run (the CLI, a sensor) reads through
    return bench, storage, cache_dir


def resources_for(env: str | None = None, settings: Settings | None = None) -> dict:
    """The resources of one environment for one evaluation (default: this process's, see
    :func:`argus_dagster.settings.load_settings`). The evaluation's profile sets the VLM-only
    ablation and the judge's and rubric generator's model names; its folders are the bench
    resource's config and the IO manager's base."""
    variables = environment()
    env = env or variables.get("ARGUS_ENV", "local")
    if env not in ENVIRONMENTS:
        raise ValueError(f"ARGUS_ENV={env!r}: expected one of {ENVIRONMENTS}")
    settings = settings or load_settings()
    profile = parse_profile(settings.profile)
    vlm_only = profile.vlm_only
    bench, storage, cache_dir = storage_for(env, settings)
    common = {
        "bench": bench,
        "storage": storage,
        "rubric_generator": RubricGeneratorResource(),
        "judge": JudgeResource(),
        "scoring": ScoringResource(),
        # The judge's VLM (also answers vlm_qa) and the rubric generator's, chosen independently.
        "vlm": _on_machine(_with_model(vlm_from_env("ARGUS_VLM"), profile.judge_model, "judge", "ARGUS_VLM"),
                           settings),
        "rubric_vlm": _on_machine(_with_model(vlm_from_env("ARGUS_RUBRIC", fallback="ARGUS_VLM"),
                                              profile.rubric_model, "rubric", "ARGUS_RUBRIC (or ARGUS_VLM)"), settings),
    }
    if env == "local":
        return {**common,
                "tools": tools_from_env("cpu", vlm_only=vlm_only, cache_dir=cache_dir),
                "io_manager": PolarsParquetIOManager(base_dir=str(settings.storage_dir))}
    if env == "gpu":
        return {**common,
                "tools": tools_from_env("cuda", vlm_only=vlm_only, cache_dir=cache_dir),
                "io_manager": PolarsParquetIOManager(base_dir=str(settings.storage_dir))}
    return {**common,
            "tools": tools_from_env("cpu", vlm_only=vlm_only, cache_dir=cache_dir),
            "io_manager": StorageIOManager(storage=storage, base_dir=bench.storage_dir)}


def _with_model(vlm: VlmResource, model: str, part: str, prefix: str) -> VlmResource:
    """The VLM with the profile's model name (``judge=<model>``, ``rubric=<model>``) on its endpoints."""
    if not model:
        return vlm
    if not vlm.configured:
        raise SettingError(f"profile part {part}={model}: no endpoint to ask it on; set {prefix}_BASE_URL "
                           f"(or _PATH)")
    return replaced(vlm, model=model)


def _on_machine(vlm: VlmResource, settings: Settings) -> VlmResource:
    """The VLM with its bound shared by every process of this ARGUS_HOME on this machine."""
    if vlm.backend != "openai":
        return vlm
    return replaced(vlm, slots_dir=str(settings.home / "locks" / "vlm"))


def replaced(resource: dg.ConfigurableResource, **fields) -> dg.ConfigurableResource:
    """A copy of ``resource`` with ``fields`` changed, built through its constructor: Dagster builds a
    run's resources from their constructor's arguments, so a pydantic ``model_copy(update=...)`` would
    be silently undone in every run. ``EnvVar`` fields stay ``EnvVar``s."""
    kept = {name: getattr(resource, name) for name in type(resource).model_fields}
    return type(resource)(**{**kept, **fields})


def executor_for(env: str | None = None) -> dg.ExecutorDefinition:
    """How a run executes its steps. On one machine (``local``, ``gpu``) every step of a run runs in
    the run's own process: one import of the code location per run instead of one per step, and the
    steps share the process's VLM client, frame pool and loaded models. ``aws`` keeps Dagster's
    process per step, for launchers that place steps on other machines."""
    env = env or environment().get("ARGUS_ENV", "local")
    return dg.multiprocess_executor if env == "aws" else dg.in_process_executor


__all__ = ["resources_for", "storage_for", "executor_for", "BenchResource", "StorageResource", "StorageIOManager", "ToolsResource", "RubricGeneratorResource", "JudgeResource",
           "ScoringResource", "VlmResource", "ENVIRONMENTS"]
