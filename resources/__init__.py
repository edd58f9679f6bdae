"""Dagster resources, one module per concern, and the per-environment sets.

``ARGUS_ENV`` picks one set: ``local`` (the embedded default), ``gpu`` (tools on CUDA), ``aws``
(tables, content cache, frozen rubrics and reports on S3, under ``s3://$ARGUS_S3_BUCKET/$ARGUS_S3_PREFIX``;
the bench and candidate store wherever ``ARGUS_BENCH_DIR``/``ARGUS_CANDIDATES_DIR`` say, folders or
``s3://`` prefixes), ``k8s`` (as ``aws``, tools on CUDA, each step in a Kubernetes pod of its own) or
``celery`` (as ``aws``, each step a Celery task). The whole swap is visible in :func:`resources_for`
and :func:`executor_for`; every asset reaches files and objects through the one ``storage`` resource,
whichever the set. Two things of ``assets/candidates.py`` still see the environment: the evidence
step's op tags (a GPU node's Kubernetes config and its Celery queue, which other executors ignore) and
its check of the executor (whether the judging overlaps the evidence in the run's one process).

The evaluation's settings (:class:`~argus_dagster.infra.settings.Settings` and the ``ARGUS_*``
variables) are read once, when the definitions are built, and become each resource's configuration:
no resource reads them at run time. What a process keeps beyond one run (the storage's S3 client, the
loaded models, the VLM clients, the frame pool, the tool slots) is a process cache beside the resource
that uses it, each saying why and how big it may grow.
"""

import enum
from typing import NamedTuple, TypeVar, cast
from urllib.parse import urlsplit

import dagster as dg

from argus_dagster.infra import storage as storage_lib
from argus_dagster.infra.environment import SettingError, environment, reports_base_url
from argus_dagster.infra.names import folder_name
from argus_dagster.infra.settings import Settings, load_settings, parse_profile

from .bench import BenchResource, bench_from_settings
from .judging import JudgeResource, RubricGeneratorResource, ScoringResource
from .storage import DEFAULT_KEEP_VERSIONS, StorageIOManager, StorageResource
from .tools import ToolsResource, tools_from_env
from .vlm import VlmResource, vlm_from_env

ENVIRONMENTS = ("local", "gpu", "aws", "k8s", "celery")
# The environments whose state is on S3: steps that run on other machines find it there.
SHARED_STORAGE = ("aws", "k8s", "celery")


class EvaluationStorage(NamedTuple):
    """Where one environment keeps one evaluation."""

    bench: BenchResource  # the bench resource: every folder of the evaluation
    storage: StorageResource  # the storage resource (S3 endpoint, media cache, frame pool, reports URL)
    cache_dir: str  # the content cache's location: a folder, an s3:// prefix, or "off"


def storage_for(env: str | None = None, settings: Settings | None = None) -> EvaluationStorage:
    """Where one environment keeps one evaluation: its bench resource (every folder), its storage
    resource and its content cache's location. ``aws`` keeps the
    ``$ARGUS_HOME`` layout under ``s3://$ARGUS_S3_BUCKET/$ARGUS_S3_PREFIX``."""
    variables = environment()
    env = env or variables.get("ARGUS_ENV", "local")
    settings = settings or load_settings()
    bench = bench_from_settings(settings)
    cache_dir = variables.get("ARGUS_CACHE") or str(settings.cache_dir)
    evaluation_dir = str(settings.evaluation_dir)
    if env in SHARED_STORAGE:  # the same layout as under ARGUS_HOME, under one bucket and prefix
        base = f"s3://{variables.get('ARGUS_S3_BUCKET', 'argus')}/{variables.get('ARGUS_S3_PREFIX', 'argus').strip('/')}"
        bench_home = storage_lib.join(base, "benches", folder_name(settings.bench))
        evaluation = storage_lib.join(bench_home, folder_name(settings.profile))
        bench = bench_from_settings(settings, frozen_rubrics_dir=storage_lib.join(bench_home, "rubrics"),
                                    human_dir=storage_lib.join(bench_home, "human"),
                                    reports_dir=storage_lib.join(evaluation, "reports"),
                                    storage_dir=storage_lib.join(evaluation, "storage"))
        cache_dir = variables.get("ARGUS_CACHE") or storage_lib.join(base, "cache")
        evaluation_dir = evaluation
    # Endpoint and region are settings, not secrets; credentials stay in the standard AWS variables
    # (or the instance's role), which boto3 reads: they never enter the run config.
    storage = StorageResource(
        endpoint_url=variables.get("ARGUS_S3_ENDPOINT_URL") or None,
        region_name=variables.get("ARGUS_S3_REGION") or None,
        media_cache_dir=variables.get("ARGUS_MEDIA_CACHE") or str(settings.home / "media"),
        hash_index="" if cache_dir == "off" else cache_dir,
        presign_expiry_s=int(variables.number("ARGUS_S3_PRESIGN_EXPIRY_S", 7 * 24 * 3600, minimum=1)),
        frame_pool_mb=variables.number("ARGUS_FRAME_POOL_MB", 512, integer=False, minimum=0),
        reports_url=reports_base_url(),
        evaluation_dir=evaluation_dir)
    return EvaluationStorage(bench, storage, cache_dir)


def resources_for(env: str | None = None, settings: Settings | None = None) -> dict:
    """The resources of one environment for one evaluation (default: this process's, see
    :func:`argus_dagster.infra.settings.load_settings`). The evaluation's profile sets the VLM-only
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
    keep = int(variables.number("ARGUS_KEEP_VERSIONS", DEFAULT_KEEP_VERSIONS, minimum=0))
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
                                              profile.rubric_model, "rubric", "ARGUS_VLM"), settings),
    }
    if env == "local":
        return {**common,
                "tools": tools_from_env("cpu", vlm_only=vlm_only, cache_dir=cache_dir),
                "io_manager": StorageIOManager(storage=storage, base_dir=str(settings.storage_dir), keep_versions=keep)}
    if env == "gpu":
        return {**common,
                "tools": tools_from_env("cuda", vlm_only=vlm_only, cache_dir=cache_dir),
                "io_manager": StorageIOManager(storage=storage, base_dir=str(settings.storage_dir), keep_versions=keep)}
    # aws, k8s and celery: tables on S3, where every run's (and, on k8s and Celery, every step's) machine
    # finds them. On k8s the evidence step's pod holds a GPU (its op tags), so the tools run on CUDA
    # there; a Celery worker's device is its own ARGUS_DEVICE (cuda on the `gpu` queue's workers).
    return {**common,
            "tools": tools_from_env("cuda" if env == "k8s" else "cpu", vlm_only=vlm_only, cache_dir=cache_dir),
            "io_manager": StorageIOManager(storage=storage, base_dir=bench.storage_dir, keep_versions=keep)}


def _with_model(vlm: VlmResource, model: str, part: str, prefix: str) -> VlmResource:
    """The VLM with the profile's model name (``judge=<model>``, ``rubric=<model>``) on its endpoints."""
    if not model:
        return vlm
    if not vlm.configured:
        raise SettingError(f"profile part {part}={model}: no VLM configured to ask it on; set {prefix}_BASE_URL "
                           f"(or {prefix}_PATH for a model on disk)")
    return replaced(vlm, model=model)


def _on_machine(vlm: VlmResource, settings: Settings) -> VlmResource:
    """The VLM with its bound shared by every process of this ARGUS_HOME on this machine. Where steps
    run on many machines (Celery workers, k8s pods) each machine has its own slots: the bound is
    ``ARGUS_VLM_CONCURRENCY`` per machine, so the judge sees at most that many times the machines
    that run steps at once (docs/deployment.md, "VLM requests across machines")."""
    if vlm.backend != "openai":
        return vlm
    return replaced(vlm, slots_dir=str(settings.home / "locks" / "vlm"))


_R = TypeVar("_R", bound=dg.ConfigurableResource)


def replaced(resource: _R, **fields) -> _R:
    """A copy of ``resource`` with ``fields`` changed, built through its constructor: Dagster builds a
    run's resources from their constructor's arguments, so a pydantic ``model_copy(update=...)`` would
    be silently undone in every run. ``EnvVar`` fields stay ``EnvVar``s."""
    kept = {name: getattr(resource, name) for name in type(resource).model_fields}
    return type(resource)(**{**kept, **fields})


def executor_for(env: str | None = None) -> dg.ExecutorDefinition:
    """How a run executes its steps. On one machine (``local``, ``gpu``) every step of a run runs in
    the run's own process: one import of the code location per run instead of one per step, and the
    steps share the process's VLM client, frame pool and loaded models. ``aws`` keeps Dagster's
    process per step, for launchers that place steps on other machines. ``k8s`` runs each step as a
    Kubernetes Job (``dagster_k8s.k8s_job_executor``, imported only here): CPU steps get
    :data:`K8S_STEP_DEFAULTS`; the evidence step's ``dagster-k8s/config`` op tags add one GPU, a GPU
    node and the GPU taint's toleration (every other executor ignores those tags). A run's
    ``execution.config`` still overrides any of it (``per_step_k8s_config``, ``job_namespace``, ...)."""
    env = env or environment().get("ARGUS_ENV", "local")
    if env == "k8s":
        return _k8s_executor()
    if env == "celery":
        return _celery_executor()
    return dg.multiprocess_executor if env == "aws" else dg.in_process_executor


# The k8s executor's defaults: what a CPU step's pod requests (sized in docs/capacity.md) and how many
# step pods one run has at once (a partition run's steps form a chain, so 2 is already generous).
K8S_STEP_DEFAULTS = {
    "max_concurrent": 2,
    "step_k8s_config": {"container_config": {"resources": {"requests": {"cpu": "1", "memory": "2Gi"},
                                                           "limits": {"memory": "4Gi"}}}},
}


def _k8s_executor() -> dg.ExecutorDefinition:
    from dagster_k8s import k8s_job_executor  # deferred: optional dependency (the k8s extra)

    def with_defaults(config: dict) -> dict:
        # The run's config arrives resolved (enum fields such as merge_behavior as Python enums) and is
        # validated again against the same schema, which reads enums by name.
        return _deep_merge(K8S_STEP_DEFAULTS, _as_config(config))

    # Same schema as the library's executor, so a run's execution config is validated as Dagster
    # documents it; the defaults fill what the run leaves out.
    return k8s_job_executor.configured(with_defaults, name="k8s",
                                       config_schema=k8s_job_executor.config_schema)  # type: ignore[arg-type]  # a definition's schema: accepted as is, not in the annotation


# The Celery settings of the executor (what the run sends) and of every worker (deploy/celery/celery.yaml
# says the same; tests/integration/test_celery_workers.py checks they agree). A step's task is
# acknowledged when it ends, not when a worker takes it (task_acks_late): a worker lost in the middle of
# a step leaves its task on the broker, and another worker of the queue runs it again, after
# ``visibility_timeout`` for a machine that vanished (Redis restores unacknowledged tasks that old), at
# once for a worker process that died under a living worker (task_reject_on_worker_lost). A worker takes
# one task at a time (prefetch 1), so a queued step never waits behind a busy worker.
CELERY_QUEUES = {"default": "every step but the evidence step", "gpu": "the evidence step (criterion_evidence)"}
CELERY_SETTINGS = {
    "task_default_queue": "default",
    "task_acks_late": True,
    "task_reject_on_worker_lost": True,
    "worker_prefetch_multiplier": 1,
    # Longer than the longest step: a step still running after this is given to another worker too.
    "broker_transport_options": {"visibility_timeout": 3600},
    "result_expires": 7 * 24 * 3600,
}


def celery_executor_config() -> dict:
    """The celery executor's config (``dagster_celery.celery_executor``'s schema): Redis at
    ``ARGUS_CELERY_BROKER`` as broker and result backend (read where the run starts, never stored in
    the run config), :data:`CELERY_SETTINGS`."""
    broker = {"env": "ARGUS_CELERY_BROKER"}
    return {"broker": broker, "backend": broker, "config_source": CELERY_SETTINGS}


_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def broker_problem(url: str, name: str = "ARGUS_CELERY_BROKER") -> str | None:
    """Why ``url`` is no broker for the celery environment, or None. A Celery worker runs whatever step a
    message on its broker names, with the worker's credentials (docs/deployment.md, "What a worker
    trusts"), so the broker must ask for a password, and be reached over TLS (``rediss://``) unless it
    is on the same machine (loopback)."""
    url = url.strip()
    if not url:
        return f"{name} is not set: the Redis every run and worker shares (rediss://:PASSWORD@host:6380/0)"
    try:
        parts = urlsplit(url)
        host, password = parts.hostname, parts.password
    except ValueError:
        return f"{name} is not a URL"
    if parts.scheme not in ("redis", "rediss"):
        return f"{name}: {parts.scheme}:// is not Redis (redis:// on loopback, else rediss://)"
    if not password:
        return (f"{name} names no password: whoever reaches the broker runs any step on every worker. Set Redis's "
                "requirepass (or an ACL user) and give it: rediss://:PASSWORD@host:6380/0 (docs/deployment.md)")
    if parts.scheme == "redis" and host not in _LOOPBACK:
        return (f"{name}: redis:// to {host} sends the password and every task in clear; use rediss:// (TLS) for a "
                "broker off this machine (docs/deployment.md)")
    return None


def _celery_executor() -> dg.ExecutorDefinition:
    from dagster_celery import celery_executor  # deferred: start-up time (Celery loads only for ARGUS_ENV=celery)

    def with_defaults(config: dict) -> dict:
        # What the run's execution config leaves out comes from celery_executor_config(); the library's
        # schema then validates the whole and fills its own defaults. (The outer schema is permissive:
        # the library's would fill its defaults, such as backend rpc://, before these are merged.)
        merged = _deep_merge(celery_executor_config(), _as_config(config or {}))
        for key in ("broker", "backend"):  # a worker runs what its broker's messages name: never an open one
            value = merged.get(key)
            url = environment().get(value["env"]) if isinstance(value, dict) and "env" in value else value
            problem = broker_problem(cast(str, url or ""), name=value["env"] if isinstance(value, dict) else f"the {key}")
            if problem:
                raise dg.DagsterInvalidConfigError(problem, [], config)
        return merged

    return celery_executor.configured(with_defaults, name="celery", config_schema=dg.Permissive())


def _as_config(value):
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, dict):
        return {k: _as_config(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_config(v) for v in value]
    return value


def _deep_merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


__all__ = ["resources_for", "storage_for", "executor_for", "BenchResource", "StorageResource", "StorageIOManager",
           "ToolsResource", "RubricGeneratorResource", "JudgeResource", "ScoringResource", "VlmResource", "ENVIRONMENTS",
           "K8S_STEP_DEFAULTS", "CELERY_QUEUES", "CELERY_SETTINGS", "celery_executor_config", "broker_problem", "SHARED_STORAGE"]
