"""The one place that wires the domain library, assets and resources into a Dagster code location."""

import dagster as dg

from assets import ALL_ASSETS, GRAPH_CHECKS
from assets.schedules import nightly_reconcile
from assets.sensors import candidate_store_sensor
from resources import executor_for, resources_for

# Declarative automation (the leaderboard follows ``video_scores``) is evaluated by this sensor. It is
# declared here, running by default, because Dagster's implicit one starts stopped: without it a
# model that ``candidate_store_sensor`` scores would never reach the leaderboard under ``make ui``.
automation_sensor = dg.AutomationConditionSensorDefinition(
    "default_automation_condition_sensor", target=dg.AssetSelection.all(),
    default_status=dg.DefaultSensorStatus.RUNNING, minimum_interval_seconds=30,
    description="Materializes what follows a materialization (the leaderboard after video_scores).")

defs = dg.Definitions(assets=ALL_ASSETS, asset_checks=GRAPH_CHECKS, resources=resources_for(),
                      sensors=[candidate_store_sensor, automation_sensor], schedules=[nightly_reconcile],
                      executor=executor_for())
