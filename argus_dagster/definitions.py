"""The one place that wires the domain library, assets and resources into a Dagster code location,
and the one place the command line reaches them through (the rest of ``argus_dagster`` imports
neither ``assets`` nor ``resources``)."""

import dagster as dg

from argus_dagster.infra.settings import AUTOMATION_INTERVAL_S, sensor_intervals
from assets import (ALL_ASSETS, ALL_CHECKS, AUTOMATED_ASSETS, CANDIDATE_ASSETS, FIRM_CANDIDATE_ASSETS, FIRM_CHECKS,
                    FIRM_TASK_ASSETS, GRAPH_CHECKS, OBSERVE_JOBS, SOURCES, TASK_ASSETS, VEFX_CANDIDATE_ASSETS,
                    VEFX_CHECKS, vefx_leaderboard)
from assets.automation import RETRY_METADATA, changed_inputs, latest_records, retries_waiting
from assets.candidates import candidate_videos
from assets.firm import best_of_n_tables
from assets.inputs import input_instances
from assets.lineage import latest_record
from assets.partitions import RANGE_END_TAG, RANGE_START_TAG, task_model_partitions
from assets.robustness import robustness_tables
from assets.schedules import nightly_reconcile
from assets.sensors import candidate_store_sensor_every, dead_run_sensor, dead_run_sensor_every
from assets.sources import changed_observations, report, source_versions
from resources import executor_for, resources_for, storage_for
from resources.bench import bench_from_settings

from argus_dagster.infra.settings import load_settings, served_settings
from argus_dagster.infra.sqlite import sync_lightly

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


def build_definitions(settings=None) -> dg.Definitions:
    """The code location of one evaluation (``settings``, default this process's: ``ARGUS_BENCH``,
    ``ARGUS_PROFILE``, ``ARGUS_HOME``); the sensors tick at the intervals of
    :func:`~argus_dagster.infra.settings.sensor_intervals` (``ARGUS_SENSOR_INTERVAL_S``,
    ``ARGUS_AUTOMATION_INTERVAL_S``, ``ARGUS_DEAD_RUN_INTERVAL_S``)."""
    sensor_s, automation_s, dead_run_s = sensor_intervals()
    # The evaluation's own instance (argus ui, its run workers) stores events without a disk sync each.
    sync_lightly((settings or load_settings()).dagster_home)
    return dg.Definitions(assets=ALL_ASSETS + SOURCES, asset_checks=GRAPH_CHECKS, resources=resources_for(settings=settings),
                          jobs=OBSERVE_JOBS, sensors=[candidate_store_sensor_every(sensor_s),
                                                      automation_sensor_every(automation_s),
                                                      dead_run_sensor_every(dead_run_s)],
                          schedules=[nightly_reconcile], executor=executor_for())


@dg.definitions
def defs() -> dg.Definitions:
    """The code location (``workspace.yaml``, ``dagster asset materialize -m argus_dagster.definitions``):
    the evaluation its configuration names (``ARGUS_BENCH_DIR`` or ``ARGUS_BENCH``, ``ARGUS_PROFILE``;
    none: ``demo/default``; :func:`argus_dagster.infra.settings.served_settings`), built when Dagster loads
    it, not when this module is imported."""
    return build_definitions(served_settings())


__all__ = ["build_definitions", "defs", "ALL_ASSETS", "ALL_CHECKS", "AUTOMATED_ASSETS", "CANDIDATE_ASSETS",
           "FIRM_CANDIDATE_ASSETS", "FIRM_CHECKS", "GRAPH_CHECKS", "VEFX_CANDIDATE_ASSETS", "VEFX_CHECKS", "vefx_leaderboard", "FIRM_TASK_ASSETS", "SOURCES", "TASK_ASSETS", "RETRY_METADATA",
           "changed_inputs", "latest_records", "retries_waiting", "candidate_videos", "best_of_n_tables", "input_instances",
           "latest_record", "RANGE_END_TAG", "RANGE_START_TAG", "task_model_partitions",
           "robustness_tables", "changed_observations", "report", "source_versions", "resources_for", "storage_for",
           "bench_from_settings", "dead_run_sensor"]
