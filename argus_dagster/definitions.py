"""The one place that wires the domain library, assets and resources into a Dagster code location."""

import dagster as dg

from assets import ALL_ASSETS, ALL_CHECKS
from assets.schedules import nightly_reconcile
from assets.sensors import candidate_store_sensor
from resources import resources_for

defs = dg.Definitions(assets=ALL_ASSETS, asset_checks=ALL_CHECKS, resources=resources_for(),
                      sensors=[candidate_store_sensor], schedules=[nightly_reconcile])
