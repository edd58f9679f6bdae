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
