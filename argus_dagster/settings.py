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
    if os.environ.get("ARGUS_HOME"):
        return Path(os.environ["ARGUS_HOME"]).expanduser().resolve()
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
    bench = os.environ.get("ARGUS_BENCH_DIR") or recorded.get("bench_dir") or str(home / "bench")
    cands = os.environ.get("ARGUS_CANDIDATES_DIR") or recorded.get("candidates_dir") or str(home / "candidates")
    return Settings(home, Path(bench).expanduser().resolve(), Path(cands).expanduser().resolve())


def record_active_bench(bench_dir: str | Path, candidates_dir: str | Path) -> None:
    """Make a bench the active one for every later run (CLI, UI, sensors) under this ARGUS_HOME."""
    home = argus_home()
    home.mkdir(parents=True, exist_ok=True)
    (home / "argus.json").write_text(json.dumps({
        "bench_dir": str(Path(bench_dir).expanduser().resolve()),
        "candidates_dir": str(Path(candidates_dir).expanduser().resolve()),
    }, indent=2))


# --- The reports server (`argus open`, `make ui`) --------------------------------------------------
REPORTS_PORT = 3030


def reports_port() -> int:
    """The loopback port `argus open` serves the reports folder on: ``ARGUS_REPORTS_PORT``, else 3030."""
    raw = os.environ.get("ARGUS_REPORTS_PORT", "").strip()
    if not raw:
        return REPORTS_PORT
    if not raw.isdigit() or not 0 <= int(raw) <= 65535:
        raise ValueError(f"ARGUS_REPORTS_PORT={raw!r}: give a port number 0-65535 (0 picks a free one)")
    return int(raw)


def reports_base_url() -> str:
    """Where a browser finds ``$ARGUS_HOME/reports``: ``ARGUS_REPORTS_URL`` (e.g. behind a proxy), else
    the `argus open` server on loopback. Metadata links use it because a page of the Dagster UI,
    served over HTTP, may not open ``file://`` links."""
    url = os.environ.get("ARGUS_REPORTS_URL", "").strip() or f"http://127.0.0.1:{reports_port()}/"
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
