"""Shared test setup: an isolated ARGUS_HOME per session and the location of ../shared/data."""

import os
import shutil
from pathlib import Path

import pytest

from tests.skips import unavailable

ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config):
    # assets/__init__.py silences this notice for every process; pytest resets filters per test. A job
    # of the VideoArgus assets (a range policy) and FIRM's (none) takes one partition per run.
    config.addinivalue_line("filterwarnings",
                            "ignore:Asset job .* materializes assets with varying BackfillPolicies:UserWarning")


def shared_data() -> Path:
    return Path(os.environ.get("ARGUS_SHARED_DATA") or ROOT.parent / "shared" / "data")


@pytest.fixture(scope="session")
def real_data() -> Path:
    """``../shared/data``; absent on a user's clone (skip), a failure under CI."""
    d = shared_data()
    if not d.is_dir():
        unavailable(f"shared data folder {d} not present (set ARGUS_SHARED_DATA)", "CI provides ../shared/data")
    return d


@pytest.fixture(scope="session", autouse=True)
def _isolated_home(tmp_path_factory):
    """No test writes into the developer's .argus or Dagster instance."""
    home = tmp_path_factory.mktemp("argus_home")
    old = {k: os.environ.get(k) for k in ("ARGUS_HOME", "DAGSTER_HOME", "ARGUS_BENCH_DIR", "ARGUS_CANDIDATES_DIR",
                                           "ARGUS_BENCH", "ARGUS_PROFILE")}
    os.environ["ARGUS_HOME"] = str(home)
    os.environ["DAGSTER_HOME"] = str(home / "dagster_home")  # tests' own instances; the CLI's are per evaluation
    for k in ("ARGUS_BENCH_DIR", "ARGUS_CANDIDATES_DIR", "ARGUS_BENCH", "ARGUS_PROFILE"):
        os.environ.pop(k, None)
    (home / "dagster_home").mkdir()
    yield home
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def shared_across_workers(tmp_path_factory, name: str, build) -> Path:
    """``build(folder)`` once per test run, whichever worker asks first; the others wait for it and get
    the same folder. Under pytest-xdist every worker's temporary folder is inside one folder per run,
    and a file lock there makes the first caller build while the others wait; a build that raised
    leaves no ``.done`` mark, so the next caller builds again. Without xdist: the session's folder."""
    from filelock import FileLock

    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # .../pytest-N/popen-gwK -> .../pytest-N, this run's only
    folder, done = base / f"shared-{name}", base / f"shared-{name}.done"
    with FileLock(str(base / f"shared-{name}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


@pytest.fixture(scope="session")
def demo_bench_in(tmp_path_factory):
    """``demo_bench_in(home)`` puts the demo bench (``bench/``, ``candidates/`` and their stamp, as
    ``build_demo_bench`` writes them) into ``home``, from one build per test run shared by every file
    that evaluates the demo; ``build_demo_bench(home)`` then finds it there and returns its folders."""
    from argus_dagster.client.demo import build_demo_bench

    built = shared_across_workers(tmp_path_factory, "demo_bench",
                                  lambda folder: build_demo_bench(folder, progress=lambda m: None))

    def put(home: Path) -> tuple[Path, Path]:
        stamp = (built / "demo_bench.json").read_text()
        if not ((home / "demo_bench.json").is_file() and (home / "demo_bench.json").read_text() == stamp):
            for name in ("bench", "candidates"):
                shutil.rmtree(home / name, ignore_errors=True)
                shutil.copytree(built / name, home / name)
            (home / "demo_bench.json").write_text(stamp)
        return build_demo_bench(home, progress=lambda m: None)

    return put
