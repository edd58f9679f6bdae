"""The process's environment: every ``ARGUS_*`` variable the project reads, with what it sets
(:data:`VARIABLES`, printed by ``argus env``), read and checked in one place (:func:`environment`); the
sensors' cadence, the automation's retry back-off and the reports server's port and address that come
from it. Which evaluation a process works on, and where its state lives: :mod:`argus_dagster.infra.settings`."""

from __future__ import annotations

import os
from dataclasses import dataclass

from argus_dagster.infra.names import shown, text_problem
from argus_dagster.infra.redact import redact_urls

# Every ARGUS_* variable the project reads, with what it sets. `environment()` is the one place that
# reads them (resources, sensors, schedules and the CLI take their values from it), so a setting is
# never read in two ways; `argus env` prints them.
VARIABLES: dict[str, str] = {
    "ARGUS_HOME": "the folder that holds all state (default: the nearest .argus, as git finds its repository)",
    "ARGUS_ENV": "the resource set: local (default), gpu, aws, k8s or celery",
    "ARGUS_BENCH_DIR": "a bench folder or s3://bucket/prefix to work on (default: the bench evaluated last, "
                       "else $ARGUS_HOME/bench)",
    "ARGUS_CANDIDATES_DIR": "the candidate store of ARGUS_BENCH_DIR (a folder or s3://bucket/prefix)",
    "ARGUS_BENCH": "a recorded bench's name (with ARGUS_BENCH_DIR: the name to record it under)",
    "ARGUS_PROFILE": "the evaluator profile: default, vlm-only, judge=<model>, rubric=<model> (joined by ,)",
    "ARGUS_VLM_BASE_URL": "the judge's OpenAI-compatible endpoint(s), comma-separated",
    "ARGUS_VLM_MODEL": "the judge's model name",
    "ARGUS_VLM_API_KEY": "the judge endpoint's key (never stored or shown)",
    "ARGUS_VLM_PATH": "a local vision-language model folder for the judge",
    "ARGUS_VLM_DEVICE": "the local judge model's device (cpu, cuda)",
    "ARGUS_VLM_CONCURRENCY": "requests in flight per judge endpoint (default 8)",
    "ARGUS_VLM_TIMEOUT_S": "seconds per judge request, the whole answer included (default 120)",
    "ARGUS_VLM_MAX_RETRIES": "retries per judge request (default 5)",
    "ARGUS_VLM_MAX_ANSWER_CHARS": "the longest judge answer kept; a longer one is cut, and says so (default 200000)",
    "ARGUS_RUBRIC_BASE_URL": "the rubric generator's endpoint(s); unset: the judge's whole configuration",
    "ARGUS_RUBRIC_MODEL": "the rubric generator's model name",
    "ARGUS_RUBRIC_API_KEY": "the rubric endpoint's key (never stored or shown)",
    "ARGUS_RUBRIC_PATH": "a local vision-language model folder for the rubric generator",
    "ARGUS_RUBRIC_DEVICE": "its device",
    "ARGUS_RUBRIC_CONCURRENCY": "requests in flight per rubric endpoint (default 8)",
    "ARGUS_RUBRIC_TIMEOUT_S": "seconds per rubric request (default 120)",
    "ARGUS_RUBRIC_MAX_RETRIES": "retries per rubric request (default 5)",
    "ARGUS_RUBRIC_MAX_ANSWER_CHARS": "the longest rubric answer kept (default 200000)",
    "ARGUS_MODELS_DIR": "the folder of model weights (dino/, detector/, depth/, aesthetic/, easyocr/)",
    "ARGUS_DEVICE": "the tools' device (default cpu; cuda with ARGUS_ENV=gpu)",
    "ARGUS_OCR_BACKEND": "rapidocr (default) or easyocr",
    "ARGUS_WEB_SEARCH_URL": "an image search endpoint for web_search (off unless the key is set too)",
    "ARGUS_WEB_SEARCH_KEY": "its key (never stored or shown)",
    "ARGUS_CACHE": "the content cache: a folder, s3://bucket/prefix, or off (default $ARGUS_HOME/cache)",
    "ARGUS_CELERY_BROKER": "the celery environment's Redis, broker and result backend, with its password "
                           "(rediss://:PASSWORD@host:6380/0; redis:// on loopback only); read where a run starts "
                           "and by each worker (deploy/celery/celery.yaml)",
    "ARGUS_S3_ENDPOINT_URL": "an S3-compatible endpoint (MinIO, a test server; default AWS); credentials come "
                             "from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or the machine's role",
    "ARGUS_S3_REGION": "the S3 region (default: AWS_DEFAULT_REGION / the AWS configuration)",
    "ARGUS_S3_BUCKET": "the aws environment's bucket for tables, reports, frozen rubrics and the cache (default argus)",
    "ARGUS_S3_PREFIX": "the aws environment's key prefix in that bucket, laid out as $ARGUS_HOME (default argus)",
    "ARGUS_S3_PRESIGN_EXPIRY_S": "seconds a presigned report link in the metadata stays valid (default 604800)",
    "ARGUS_MEDIA_CACHE": "where s3:// media and benches are downloaded (default $ARGUS_HOME/media)",
    "ARGUS_FRAME_POOL_MB": "decoded frames kept per process, in MB (default 512)",
    "ARGUS_TOOL_THREADS": "compute-bound tools running at once per process (default the CPU count)",
    "ARGUS_RECONCILE_MAX_PARTITIONS": "partitions the nightly reconcile requests at most (default 100)",
    "ARGUS_SENSOR_INTERVAL_S": "seconds at least between two ticks of the candidate-store sensor (default 60)",
    "ARGUS_AUTOMATION_INTERVAL_S": "seconds at least between two evaluations of the automation sensor (default 30)",
    "ARGUS_DEAD_RUN_INTERVAL_S": "seconds at least between two ticks of the dead-run sensor, which fails runs whose "
                                 "process is gone and frees their pool slots (default 30)",
    "ARGUS_RETRY_BACKOFF_S": "seconds the automation sensor waits before it retries a partition whose run left work "
                             "to retry; doubled for each further such run in a row (default 60; 0: every tick)",
    "ARGUS_RETRY_BACKOFF_MAX_S": "the longest of those waits, in seconds (default 3600)",
    "ARGUS_KEEP_VERSIONS": "stored tables kept per asset partition, its latest materializations' (default 10; 0: all)",
    "ARGUS_REPORTS_PORT": "the loopback port argus open and argus ui serve the reports on (default 3030)",
    "ARGUS_REPORTS_URL": "where a browser finds the reports (default http://127.0.0.1:$ARGUS_REPORTS_PORT/)",
}


class SettingError(ValueError):
    """A variable whose value cannot be used; the message names it and what it expects."""


@dataclass(frozen=True)
class Environment:
    """The ARGUS_* variables of this process, read and checked once per call of :func:`environment`."""

    values: dict

    def get(self, name: str, default: str = "") -> str:
        """The variable's value (``default`` when unset or empty); a value that is not UTF-8 text (its
        bytes as the process received them) is a :class:`SettingError`, never a name or URL that would
        fail where it is written or hashed."""
        if name not in VARIABLES:
            raise KeyError(f"{name} is not a documented setting (see environment.VARIABLES)")
        value = self.values.get(name) or default
        problem = text_problem(value)
        if problem:
            raise SettingError(f"{name} is {problem}; set it to UTF-8 text")  # never its value: it may be a key
        return value

    def number(self, name: str, default: float, *, integer: bool = True, minimum: float | None = None) -> float:
        raw = self.get(name)
        if not raw:
            return default
        try:
            value = int(raw) if integer else float(raw)
        except ValueError:
            kind = "a whole number" if integer else "a number"
            raise SettingError(f"{name}={raw!r}: expected {kind}") from None
        if minimum is not None and value < minimum:
            raise SettingError(f"{name}={value}: must be at least {minimum:g}")
        return value

    def flag(self, name: str) -> bool:
        return self.get(name).strip().lower() in ("1", "true", "yes", "on")

    def shown(self) -> dict[str, str]:
        """The variables that are set, secrets and credentials masked (for ``argus env``)."""
        out = {}
        for name in VARIABLES:
            value = self.values.get(name)
            if not value:
                continue
            value = shown(value)  # printable, whatever bytes it holds
            out[name] = "***" if name.endswith("_KEY") else redact_urls(value) if name.endswith("_URL") else value
        return out


def environment() -> Environment:
    """The documented ARGUS_* variables as set now (read at each call, so a test or a CLI flag that
    sets one before building resources is seen)."""
    return Environment({name: os.environ[name] for name in VARIABLES if os.environ.get(name)})


def served_instance_problem() -> str | None:
    """Why the served code location must not load in this process, or None: it has no Dagster instance
    of its own (``DAGSTER_HOME`` unset, as under a bare ``dagster dev``, whose throwaway instance would
    run the evaluation's sensors and write into its storage under runs its own instance never records).
    ``argus ui`` pins the evaluation's instance; a deployment sets ``DAGSTER_HOME``."""
    if os.environ.get("DAGSTER_HOME"):
        return None
    return ("argus-dagster serves one evaluation on that evaluation's own Dagster instance, and DAGSTER_HOME is not "
            "set here: start the UI with `argus ui` (or `make ui`), or set DAGSTER_HOME to the instance to serve "
            "(`argus env` names the evaluation's)")


def pinned_environment(settings, reports_port_: int) -> dict[str, str]:
    """This process's environment with ``settings``' evaluation pinned as the code location reads it
    (:func:`argus_dagster.infra.settings.served_settings`); ``settings`` is a
    :class:`argus_dagster.infra.settings.Settings`: its instance, bench, profile and folders, and the reports server's
    port (``argus ui``'s children, and every run their daemon launches)."""
    return {**os.environ, "DAGSTER_HOME": str(settings.dagster_home), "ARGUS_BENCH": settings.bench,
            "ARGUS_PROFILE": settings.profile, "ARGUS_BENCH_DIR": str(settings.bench_dir),
            "ARGUS_CANDIDATES_DIR": str(settings.candidates_dir), "ARGUS_REPORTS_PORT": str(reports_port_),
            # dagster dev's advice to use `dg dev`, a CLI this install does not include
            "PYTHONWARNINGS": "ignore:Function `dev_command` is superseded"}


# --- The sensors' cadence ------------------------------------------------------------------------
SENSOR_INTERVAL_S = 60
AUTOMATION_INTERVAL_S = 30
DEAD_RUN_INTERVAL_S = 30


@dataclass(frozen=True)
class SensorIntervals:
    """The sensors' minimum intervals in seconds."""

    candidates_s: int = SENSOR_INTERVAL_S  # the candidate-store sensor
    automation_s: int = AUTOMATION_INTERVAL_S  # the automation sensor
    dead_runs_s: int = DEAD_RUN_INTERVAL_S  # the dead-run sensor


def sensor_intervals() -> SensorIntervals:
    """The sensors' minimum intervals: ``ARGUS_SENSOR_INTERVAL_S`` (default 60),
    ``ARGUS_AUTOMATION_INTERVAL_S`` (default 30) and ``ARGUS_DEAD_RUN_INTERVAL_S`` (default 30), read when
    the code location's definitions are built."""
    env = environment()
    return SensorIntervals(int(env.number("ARGUS_SENSOR_INTERVAL_S", SENSOR_INTERVAL_S, minimum=1)),
                           int(env.number("ARGUS_AUTOMATION_INTERVAL_S", AUTOMATION_INTERVAL_S, minimum=1)),
                           int(env.number("ARGUS_DEAD_RUN_INTERVAL_S", DEAD_RUN_INTERVAL_S, minimum=1)))


# --- Retrying transient failures under automation -------------------------------------------------
RETRY_BACKOFF_S = 60
RETRY_BACKOFF_MAX_S = 3600


@dataclass(frozen=True)
class Backoff:
    """How long the automation sensor waits before it retries a partition whose latest run left work to
    retry (a judge that was down, a tool that raised): ``base_s`` after the first such run, twice as
    long after each further one in a row, at most ``max_s``."""

    base_s: float = RETRY_BACKOFF_S
    max_s: float = RETRY_BACKOFF_MAX_S

    def delay_s(self, retry_round: int) -> float:
        """The wait after the ``retry_round``-th run in a row that left work to retry (0: none left,
        no wait): ``base_s * 2**(retry_round - 1)``, at most ``max_s``."""
        if retry_round <= 0:
            return 0.0
        return float(min(self.base_s * 2 ** min(retry_round - 1, 64), self.max_s))


def retry_backoff() -> Backoff:
    """The back-off of ``ARGUS_RETRY_BACKOFF_S`` (default 60) and ``ARGUS_RETRY_BACKOFF_MAX_S`` (default
    3600), read at each evaluation of the automation conditions: the only setting read after the
    definitions are built, because an automation condition is part of an asset's definition (made when
    :mod:`assets` is imported) and Dagster hands a condition no resources to read configuration from."""
    env = environment()
    return Backoff(env.number("ARGUS_RETRY_BACKOFF_S", RETRY_BACKOFF_S, integer=False, minimum=0),
                   env.number("ARGUS_RETRY_BACKOFF_MAX_S", RETRY_BACKOFF_MAX_S, integer=False, minimum=0))


# --- The reports server (`argus open`, `argus ui`) --------------------------------------------------
REPORTS_PORT = 3030


def reports_port() -> int:
    """The loopback port `argus open` serves the reports folder on: ``ARGUS_REPORTS_PORT``, else 3030."""
    raw = environment().get("ARGUS_REPORTS_PORT").strip()
    if not raw:
        return REPORTS_PORT
    if not raw.isdigit() or not 0 <= int(raw) <= 65535:
        raise SettingError(f"ARGUS_REPORTS_PORT={raw!r}: give a port number 0-65535 (0 picks a free one)")
    return int(raw)


def reports_base_url() -> str:
    """Where a browser finds an evaluation's ``reports``: ``ARGUS_REPORTS_URL`` (e.g. behind a proxy), else
    the `argus open` server on loopback. Metadata links use it because a page of the Dagster UI,
    served over HTTP, may not open ``file://`` links."""
    url = environment().get("ARGUS_REPORTS_URL").strip() or f"http://127.0.0.1:{reports_port()}/"
    return url if url.endswith("/") else url + "/"
