"""The served code location (``workspace.yaml``, ``dagster code-server start -m argus_dagster.location``,
``dagster asset materialize -m argus_dagster.location``): the evaluation its configuration names, wired
by :func:`argus_dagster.definitions.build_definitions`, with the ``evaluate`` job
(:mod:`argus_dagster.client.pass_job`) that carries a whole pass in one run. It is the one module that
holds both the wiring and the command line's loop: the library imports neither it nor ``client``."""

import dagster as dg

from argus_dagster.client.pass_job import evaluate_job
from argus_dagster.definitions import build_definitions
from argus_dagster.infra.environment import served_instance_problem
from argus_dagster.infra.settings import served_settings


@dg.definitions
def defs() -> dg.Definitions:
    """The evaluation the configuration names (``ARGUS_BENCH_DIR`` or ``ARGUS_BENCH``, ``ARGUS_PROFILE``;
    none: ``demo/default``; :func:`argus_dagster.infra.settings.served_settings`), built when Dagster
    loads it, not when this module is imported. A process with no instance of its own (a bare ``dagster
    dev``) is refused in one line naming ``argus ui``
    (:func:`~argus_dagster.infra.environment.served_instance_problem`)."""
    problem = served_instance_problem()
    if problem:
        raise dg.DagsterInvariantViolationError(problem)
    return build_definitions(served_settings(), pass_job=evaluate_job)
