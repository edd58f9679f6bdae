"""Shared test setup: an isolated ARGUS_HOME per session and the location of ../shared/data."""

import os
from pathlib import Path

import pytest

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
        if os.environ.get("CI") == "true":
            pytest.fail(f"shared data folder {d} is missing under CI")
        pytest.skip(f"shared data folder {d} not present (set ARGUS_SHARED_DATA)")
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
