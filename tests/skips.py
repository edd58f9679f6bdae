"""What a test needs from the machine or the install, said once: where it is missing the test skips with
what to do, and under ``CI=true`` (where ``make test`` installs everything) it fails instead, so nothing
a test guards goes unchecked in CI without a word."""

import importlib
import os
from types import ModuleType

import pytest


def unavailable(what: str, in_ci: str = "`make test` installs it") -> None:
    """Skip the test, saying ``what`` is missing and how to get it; under ``CI=true``, fail it, saying
    what CI provides (``in_ci``)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} (CI=true: {in_ci})")
    pytest.skip(what)


def machine_lacks(what: str) -> None:
    """Skip the test, saying which capability of the machine it needs (root, a mount namespace, user
    namespaces); under ``CI=true``, fail it: CI's machine runs the suite as root and lets it mount."""
    unavailable(what, "CI's machine runs the suite as root, with mounts and namespaces")


def module(name: str, install: str = "pip install -e '.[dev]'") -> ModuleType:
    """The module ``name``, or :func:`unavailable` naming how to install it."""
    try:
        return importlib.import_module(name)
    except ImportError:
        unavailable(f"the Python package {name!r} is not installed: `{install}`")
        raise  # not reached: unavailable skips or fails
