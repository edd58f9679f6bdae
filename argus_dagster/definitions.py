"""The one place that wires the domain library, assets and resources into a Dagster code location."""

import warnings

import dagster as dg

# Data versions on outputs are the lineage mechanism this project relies on; Dagster marks the
# parameter beta. Say so once here instead of on every materialization.
warnings.filterwarnings("ignore", category=dg.BetaWarning)

from assets import ALL_ASSETS, ALL_CHECKS
from resources import resources_for

defs = dg.Definitions(assets=ALL_ASSETS, asset_checks=ALL_CHECKS, resources=resources_for())
