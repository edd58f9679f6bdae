"""What a test needs from the machine or the install, said once: where it is missing the test skips with
what to do, and under ``CI=true`` (where ``make test`` installs everything) it fails instead, so nothing
a test guards goes unchecked in CI without a word."""

import importlib
import os
from types import ModuleType

import pytest


def unavailable(what: str) -> None:
    """Skip the test, saying ``what`` is missing and how to get it; under ``CI=true``, fail it."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} (CI=true: `make test` installs it)")
    pytest.skip(what)


def module(name: str, install: str = "pip install -e '.[dev]'") -> ModuleType:
    """The module ``name``, or :func:`unavailable` naming how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError:
        unavailable(f"the Python package {name!r} is not installed: `{install}`")
        raise  # not reached: unavailable skips or fails
