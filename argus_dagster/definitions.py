"""The one place that wires the domain library, assets and resources into a Dagster code location,
and the one place the command line reaches them through (the rest of ``argus_dagster`` imports
neither ``assets`` nor ``resources``)."""

from dataclasses import dataclass
from typing import Any, Mapping

import dagster as dg

from argus_dagster.assets import (
    ALL_ASSETS,
    AUTOMATED_ASSETS,
    CANDIDATE_ASSETS,
    FIRM_CANDIDATE_ASSETS,
    FIRM_TASK_ASSETS,
    GRAPH_CHECKS,
    OBSERVE_JOBS,
    SOURCES,
    TASK_ASSETS,
    VEFX_CANDIDATE_ASSETS,
    site,
    vefx_leaderboard,
)
from argus_dagster.assets.automation import FOLLOWS_PARTITIONS, UP_TO_DATE
from argus_dagster.assets.firm import best_of_n_tables
from argus_dagster.assets.partitions import RANGE_END_TAG, RANGE_START_TAG
from argus_dagster.assets.robustness import robustness_tables
from argus_dagster.assets.schedules import nightly_reconcile
from argus_dagster.assets.sensors import candidate_store_sensor_every, dead_run_sensor, dead_run_sensor_every
from argus_dagster.assets.sources import changed_observations, report, source_versions
from argus_dagster.infra.environment import AUTOMATION_INTERVAL_S, sensor_intervals
from argus_dagster.infra.settings import load_settings
from argus_dagster.infra.sqlite import sync_lightly
from argus_dagster.resources import executor_for, resources_for, storage_for


# Declarative automation (assets.automation) is evaluated by this sensor, in the code server: the
# condition that retries transient failures reads materialization metadata. It is declared here,
# running by default, because Dagster's implicit one starts stopped: without it nothing that
# candidate_store_sensor observes would ever be scored under `argus ui`.
def automation_sensor_every(seconds: int = AUTOMATION_INTERVAL_S) -> dg.AutomationConditionSensorDefinition:
    return dg.AutomationConditionSensorDefinition(
        "default_automation_condition_sensor", target=dg.AssetSelection.all(), use_user_code_server=True,
        # Its runs may call the judge: a run queue's tag limit on argus/judge bounds how many share it.
        run_tags={"argus/judge": "1"},
        default_status=dg.DefaultSensorStatus.RUNNING, minimum_interval_seconds=seconds,
        description="Materializes what is missing or stale (new models, changed sources, new code) and retries "
                    "transient failures.")


# The protocols' assets, which the command line may ask Dagster about (build_definitions(protocols=...)).
PROTOCOL_ASSETS = {"firm": FIRM_TASK_ASSETS + FIRM_CANDIDATE_ASSETS, "vefx": VEFX_CANDIDATE_ASSETS + [vefx_leaderboard]}


def with_conditions(assets: list, protocols: tuple[str, ...]) -> list:
    """``assets`` with the ``protocols``' assets carrying the automation conditions VideoArgus's
    carry (:data:`~assets.automation.UP_TO_DATE`; VEFX-Bench's leaderboard follows the partitions
    that exist, as the leaderboard does), so that Dagster can be asked which of them are missing or
    out of date."""
    chosen = {id(a) for p in protocols for a in PROTOCOL_ASSETS[p]}

    def condition(spec: dg.AssetSpec) -> dg.AssetSpec:
        cond = FOLLOWS_PARTITIONS if spec.key == vefx_leaderboard.key else UP_TO_DATE
        return spec.replace_attributes(automation_condition=cond)

    return [dg.map_asset_specs(condition, [a])[0] if id(a) in chosen else a for a in assets]


def build_definitions(settings=None, protocols: tuple[str, ...] = (),
                      pass_job: dg.JobDefinition | None = None) -> dg.Definitions:
    """The code location of one evaluation (``settings``, default this process's: ``ARGUS_BENCH``,
    ``ARGUS_PROFILE``, ``ARGUS_HOME``); the sensors tick at the intervals of
    :func:`~argus_dagster.infra.environment.sensor_intervals` (``ARGUS_SENSOR_INTERVAL_S``,
    ``ARGUS_AUTOMATION_INTERVAL_S``, ``ARGUS_DEAD_RUN_INTERVAL_S``). ``protocols`` (``firm``,
    ``vefx``): for the command line only, whose ``--protocol`` asks Dagster what of them to run
    (:func:`with_conditions`); the served code location has none, so the automation sensor never
    runs a protocol: a person asks for it. ``pass_job``: the served code location's ``evaluate`` job
    (:mod:`argus_dagster.location`), which the candidate-store sensor requests."""
    every = sensor_intervals()
    # The evaluation's own instance (argus ui, its run workers) stores events without a disk sync each.
    sync_lightly((settings or load_settings()).dagster_home)
    return dg.Definitions(assets=with_conditions(ALL_ASSETS, protocols) + SOURCES, asset_checks=GRAPH_CHECKS, resources=resources_for(settings=settings),
                          jobs=OBSERVE_JOBS + ([pass_job] if pass_job else []),
                          sensors=[candidate_store_sensor_every(every.candidates_s, pass_job),
                                                      automation_sensor_every(every.automation_s),
                                                      dead_run_sensor_every(every.dead_runs_s)],
                          schedules=[nightly_reconcile], executor=executor_for())


# ---------------------------------------------------------------- what the command line reaches

def _names(assets) -> tuple[str, ...]:
    return tuple(k.to_user_string() for a in assets for k in a.keys)


@dataclass(frozen=True)
class AssetRoles:
    """The asset graph's parts by what ``argus evaluate`` does with them, by asset name."""

    task: tuple[str, ...]  # per task: its inputs and rubrics
    candidate: tuple[str, ...]  # per task x model: VideoArgus's evidence, scores and reports
    automated: tuple[str, ...]  # what the automation conditions keep up to date (the two above and the leaderboard)
    firm_task: tuple[str, ...]  # FIRM-Video per task (run when asked)
    firm_candidate: tuple[str, ...]  # FIRM-Video per task x model (run when asked)
    vefx_candidate: tuple[str, ...]  # VEFX-Bench per task x model (run when asked)
    vefx_board: tuple[str, ...]  # VEFX-Bench's leaderboard (run when asked)
    site: tuple[str, ...]  # the pages: once per command, after everything it shows


ROLES = AssetRoles(_names(TASK_ASSETS), _names(CANDIDATE_ASSETS), _names(AUTOMATED_ASSETS), _names(FIRM_TASK_ASSETS),
                   _names(FIRM_CANDIDATE_ASSETS), _names(VEFX_CANDIDATE_ASSETS), _names([vefx_leaderboard]),
                   _names([site]))


def materialize_selection(instance: dg.DagsterInstance, resources: Mapping[str, Any], selection: list[str], keys: list[str],
                          tags: dict[str, str], run_config: dict) -> dg.ExecuteInProcessResult:
    """One of Dagster's in-process runs of the assets ``selection`` names and their partitioned checks,
    over the partitions ``keys`` (one, or a range's keys in order: its first and last become the
    run's range tags), on ``instance`` with ``resources``; a failed run is returned, not raised."""
    chosen = [a for a in ALL_ASSETS if {k.to_user_string() for k in a.keys} & set(selection)]
    names = {k for a in chosen for k in a.keys}
    # A run of partitions carries its assets' partitioned checks; a run of unpartitioned assets (the
    # leaderboard, the alignment) their unpartitioned ones: after a pass every check has run.
    checks = [c for c in GRAPH_CHECKS if (c.partitions_def is not None) == bool(keys)
              and all(k.asset_key in names for k in c.check_keys)]
    kw = {}
    if len(keys) == 1:
        kw["partition_key"] = keys[0]
    elif keys:
        tags = {**tags, RANGE_START_TAG: str(keys[0]), RANGE_END_TAG: str(keys[-1])}
    return dg.materialize([*ALL_ASSETS, *SOURCES, *GRAPH_CHECKS], selection=[*chosen, *checks], instance=instance,
                          resources=resources, run_config=run_config, tags=tags, raise_on_error=False, **kw)


def observe_sources(instance: dg.DagsterInstance, resources: Mapping[str, Any], tasks: list[str],
                    partitions: set[tuple[str, str]], known: dict) -> None:
    """Observe the sources of ``tasks`` and the ``(task, model)`` partitions (``known``: the candidate
    store's scan) and record those that changed with their new data version (:mod:`assets.sources`)."""
    report(instance, changed_observations(instance, source_versions(resources, tasks, partitions, known)))


# The command line (argus_dagster/client) reaches assets and resources through these names only.
__all__ = ["build_definitions", "ROLES", "AssetRoles", "materialize_selection", "observe_sources",
           "dead_run_sensor",
           "best_of_n_tables", "robustness_tables", "storage_for", "resources_for",
           "site",
           "UP_TO_DATE"]
