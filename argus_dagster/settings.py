"""Where argus-dagster keeps its state, in one place.

Everything lives under ``ARGUS_HOME``. Unset, the home is the nearest ``.argus`` folder in the working
directory or one of its parents (as git finds its repository), else ``.argus`` in the working
directory, which commands that write create and read-only commands never do. The active bench
and candidate store are, in order: ``ARGUS_BENCH_DIR`` / ``ARGUS_CANDIDATES_DIR``, then what
``argus evaluate`` last recorded in ``$ARGUS_HOME/argus.json``, then ``$ARGUS_HOME/bench`` and
``$ARGUS_HOME/candidates`` (the demo bench).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Settings:
    home: Path
    bench_dir: Path
    candidates_dir: Path

    @property
    def dagster_home(self) -> Path:
        return self.home / "dagster_home"

    @property
    def storage_dir(self) -> Path:
        return self.home / "storage"

    @property
    def frozen_rubrics_dir(self) -> Path:
        return self.home / "rubrics"

    @property
    def reports_dir(self) -> Path:
        return self.home / "reports"


def find_home(start: Path | None = None) -> Path | None:
    """``ARGUS_HOME``, else the nearest ``.argus`` folder in ``start`` (the working directory) or a
    parent of it; None when there is none."""
    env = environment()
    if env.get("ARGUS_HOME"):
        return Path(env.get("ARGUS_HOME")).expanduser().resolve()
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / ".argus").is_dir():
            return folder / ".argus"
    return None


def argus_home() -> Path:
    """The home found by :func:`find_home`, else ``.argus`` in the working directory."""
    return find_home() or (Path.cwd() / ".argus").resolve()


def load_settings() -> Settings:
    home = argus_home()
    recorded: dict = {}
    cfg = home / "argus.json"
    if cfg.is_file():
        recorded = json.loads(cfg.read_text())
    env = environment()
    bench = env.get("ARGUS_BENCH_DIR") or recorded.get("bench_dir") or str(home / "bench")
    cands = env.get("ARGUS_CANDIDATES_DIR") or recorded.get("candidates_dir") or str(home / "candidates")
    return Settings(home, Path(bench).expanduser().resolve(), Path(cands).expanduser().resolve())


def record_active_bench(bench_dir: str | Path, candidates_dir: str | Path) -> None:
    """Make a bench the active one for every later run (CLI, UI, sensors) under this ARGUS_HOME."""
    home = argus_home()
    home.mkdir(parents=True, exist_ok=True)
    (home / "argus.json").write_text(json.dumps({
        "bench_dir": str(Path(bench_dir).expanduser().resolve()),
        "candidates_dir": str(Path(candidates_dir).expanduser().resolve()),
    }, indent=2))


# ------------------------------------------------------------------------------------ the environment

# Every ARGUS_* variable the project reads, with what it sets. `environment()` is the one place that
# reads them (resources, sensors, schedules and the CLI take their values from it), so a setting is
# never read in two ways; `argus env` prints them.
VARIABLES: dict[str, str] = {
    "ARGUS_HOME": "the folder that holds all state (default: the nearest .argus, as git finds its repository)",
    "ARGUS_ENV": "the resource set: local (default), gpu or aws",
    "ARGUS_BENCH_DIR": "the bench folder (default: the one argus evaluate recorded, else $ARGUS_HOME/bench)",
    "ARGUS_CANDIDATES_DIR": "the candidate store (default: as recorded, else $ARGUS_HOME/candidates)",
    "ARGUS_VLM_BASE_URL": "the judge's OpenAI-compatible endpoint(s), comma-separated",
    "ARGUS_VLM_MODEL": "the judge's model name",
    "ARGUS_VLM_API_KEY": "the judge endpoint's key (never stored or shown)",
    "ARGUS_VLM_PATH": "a local vision-language model folder for the judge",
    "ARGUS_VLM_DEVICE": "the local judge model's device (cpu, cuda)",
    "ARGUS_VLM_CONCURRENCY": "requests in flight per judge endpoint (default 8)",
    "ARGUS_VLM_TIMEOUT_S": "seconds per judge request (default 120)",
    "ARGUS_VLM_MAX_RETRIES": "retries per judge request (default 5)",
    "ARGUS_VLM_ONLY": "1: the VLM-only ablation (every plan one vlm_qa)",
    "ARGUS_RUBRIC_BASE_URL": "the rubric generator's endpoint(s); unset: the judge's whole configuration",
    "ARGUS_RUBRIC_MODEL": "the rubric generator's model name",
    "ARGUS_RUBRIC_API_KEY": "the rubric endpoint's key (never stored or shown)",
    "ARGUS_RUBRIC_PATH": "a local vision-language model folder for the rubric generator",
    "ARGUS_RUBRIC_DEVICE": "its device",
    "ARGUS_RUBRIC_CONCURRENCY": "requests in flight per rubric endpoint (default 8)",
    "ARGUS_RUBRIC_TIMEOUT_S": "seconds per rubric request (default 120)",
    "ARGUS_RUBRIC_MAX_RETRIES": "retries per rubric request (default 5)",
    "ARGUS_MODELS_DIR": "the folder of model weights (dino/, detector/, depth/, aesthetic/, easyocr/)",
    "ARGUS_DEVICE": "the tools' device (default cpu; cuda with ARGUS_ENV=gpu)",
    "ARGUS_OCR_BACKEND": "rapidocr (default) or easyocr",
    "ARGUS_WEB_SEARCH_URL": "an image search endpoint for web_search (off unless the key is set too)",
    "ARGUS_WEB_SEARCH_KEY": "its key (never stored or shown)",
    "ARGUS_CACHE": "the content cache: a folder, s3://bucket/prefix, or off (default $ARGUS_HOME/cache)",
    "ARGUS_S3_ENDPOINT_URL": "an S3-compatible endpoint (MinIO, a test server)",
    "ARGUS_S3_BUCKET": "the aws environment's bucket for tables (default argus)",
    "ARGUS_S3_PREFIX": "the aws environment's key prefix for tables (default storage)",
    "ARGUS_MEDIA_CACHE": "where s3:// media are downloaded (default the system's temporary folder)",
    "ARGUS_FRAME_POOL_MB": "decoded frames kept per process, in MB (default 512)",
    "ARGUS_TOOL_THREADS": "compute-bound tools running at once per process (default the CPU count)",
    "ARGUS_PARALLEL_RUNS": "partition runs argus evaluate runs at once on an instance without settings (default 5)",
    "ARGUS_RECONCILE_MAX_PARTITIONS": "partitions the nightly reconcile requests at most (default 100)",
    "ARGUS_REPORTS_PORT": "the loopback port argus open and make ui serve the reports on (default 3030)",
    "ARGUS_REPORTS_URL": "where a browser finds the reports (default http://127.0.0.1:$ARGUS_REPORTS_PORT/)",
}


class SettingError(ValueError):
    """A variable whose value cannot be used; the message names it and what it expects."""


@dataclass(frozen=True)
class Environment:
    """The ARGUS_* variables of this process, read and checked once per call of :func:`environment`."""

    values: dict

    def get(self, name: str, default: str = "") -> str:
        if name not in VARIABLES:
            raise KeyError(f"{name} is not a documented setting (see settings.VARIABLES)")
        return self.values.get(name) or default

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
        from .vlm import redact_urls

        out = {}
        for name in VARIABLES:
            value = self.values.get(name)
            if not value:
                continue
            out[name] = "***" if name.endswith("_KEY") else redact_urls(value) if name.endswith("_URL") else value
        return out


def environment() -> Environment:
    """The documented ARGUS_* variables as set now (read at each call, so a test or a CLI flag that
    sets one before building resources is seen)."""
    return Environment({name: os.environ[name] for name in VARIABLES if os.environ.get(name)})


# --- The reports server (`argus open`, `make ui`) --------------------------------------------------
REPORTS_PORT = 3030


def reports_port() -> int:
    """The loopback port `argus open` serves the reports folder on: ``ARGUS_REPORTS_PORT``, else 3030."""
    raw = environment().get("ARGUS_REPORTS_PORT").strip()
    if not raw:
        return REPORTS_PORT
    if not raw.isdigit() or not 0 <= int(raw) <= 65535:
        raise ValueError(f"ARGUS_REPORTS_PORT={raw!r}: give a port number 0-65535 (0 picks a free one)")
    return int(raw)


def reports_base_url() -> str:
    """Where a browser finds ``$ARGUS_HOME/reports``: ``ARGUS_REPORTS_URL`` (e.g. behind a proxy), else
    the `argus open` server on loopback. Metadata links use it because a page of the Dagster UI,
    served over HTTP, may not open ``file://`` links."""
    url = environment().get("ARGUS_REPORTS_URL").strip() or f"http://127.0.0.1:{reports_port()}/"
    return url if url.endswith("/") else url + "/"


def report_url(path: str | Path, reports_dir: Path | None = None) -> str:
    """The URL of a file under the reports folder (its path segments percent-encoded, so the
    ``~%E7...`` names of :func:`argus_dagster.names.file_name` resolve); ``file://`` for one outside."""
    from urllib.parse import quote

    root = (reports_dir or load_settings().reports_dir).resolve()
    p = Path(path).resolve()
    try:
        rel = p.relative_to(root)
    except ValueError:
        return p.as_uri()
    return reports_base_url() + quote(rel.as_posix())
