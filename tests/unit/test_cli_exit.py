"""The ``argus`` command leaves without the interpreter's teardown, and loses nothing by it: what it
printed reaches a pipe or a file, its exit status is kept, and a profiler run under it still writes
its results (the ordinary exit is kept for it)."""

import os
import pstats
import subprocess
import sys
from pathlib import Path

ARGUS = str(Path(sys.executable).parent / "argus")


def _env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARGUS_", "DAGSTER_"))}
    return {**env, "ARGUS_HOME": str(home)}


def test_output_and_status_survive_the_quick_exit(tmp_path):
    out = tmp_path / "out.txt"
    with out.open("w") as f:  # a file: fully buffered, so only a flush before leaving gets it there
        rc = subprocess.run([ARGUS, "evaluations"], env=_env(tmp_path / "home"), stdout=f, stderr=subprocess.PIPE,
                            timeout=120).returncode
    assert rc == 1  # nothing evaluated in an empty home
    assert out.read_text().strip() == "no evaluation recorded yet: run `argus demo` or `argus evaluate`"


def test_a_profiler_run_under_argus_still_writes_its_results(tmp_path):
    prof = tmp_path / "argus.prof"
    done = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), ARGUS, "evaluations"],
                          env=_env(tmp_path / "home"), capture_output=True, text=True, timeout=120)
    assert "no evaluation recorded yet" in done.stdout  # (cProfile exits 0 whatever the script returned)
    assert any("cli.py" in fn for fn, _, _ in pstats.Stats(str(prof)).stats)  # the command's own code was seen
