"""The Dagster instance of one evaluation, as the command line opens it: its folder and ``dagster.yaml``,
its SQLite files' settings, and the runs a process of this machine left behind.

The instance is built from its folder (``DagsterInstance.from_config``), not from the ``DAGSTER_HOME``
variable: one process may open the instances of several evaluations. Dead runs are Dagster's
``dead_run_sensor`` (:mod:`assets.sensors`, through :mod:`argus_dagster.definitions`): under ``argus ui``
the daemon ticks it; ``argus evaluate`` has no daemon, so it asks the same sensor once before it runs
(:func:`ask_dead_run_sensor`) rather than holding a daemon process up for one command.
"""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from argus_dagster.definitions import dead_run_sensor
from argus_dagster.infra.settings import Settings, load_settings
from argus_dagster.infra.sqlite import sync_lightly

INSTANCE_YAML = """\
# The Dagster instance of one evaluation (argus evaluate, argus demo, argus ui).
# Dagster's anonymous usage statistics: set enabled to true to send them.
telemetry:
  enabled: false
# Runs' event logs keep log lines of INFO and above (every Dagster event is kept whatever its level):
# the IO manager's DEBUG lines repeat each materialization's path. DEBUG keeps them too.
python_logs:
  python_log_level: INFO
# How many runs the daemon executes at once (the runs the UI, the sensors and the schedules launch),
# and how often it looks for queued runs to launch (Dagster's default: every 5 s, a wait each run pays).
run_queue:
  max_concurrent_runs: 4
  dequeue_interval_seconds: 1
"""


def local_instance(settings: Settings | None = None) -> dg.DagsterInstance:
    """The Dagster instance of an evaluation (default: this process's, see ``load_settings``), built
    from the evaluation's ``dagster_home`` folder, with Dagster's storage as its ``dagster.yaml`` says
    (default: SQLite files there)."""
    settings = settings or load_settings()
    home = settings.dagster_home
    home.mkdir(parents=True, exist_ok=True)
    ensure_instance_yaml(home)
    sync_lightly(home)  # its SQLite files without a disk sync per event (argus_dagster.infra.sqlite)
    return dg.DagsterInstance.from_config(str(home))


def ensure_instance_yaml(dagster_home: Path) -> Path:
    """The instance's own ``dagster.yaml`` (:data:`INSTANCE_YAML`), written where there is none."""
    config = Path(dagster_home) / "dagster.yaml"
    if not config.is_file():
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(INSTANCE_YAML)
    return config


def ask_dead_run_sensor(instance: dg.DagsterInstance) -> list[str]:
    """A tick of the ``dead_run_sensor`` (:mod:`assets.sensors`), as the daemon runs it under ``argus
    ui``: runs left started by a process of this machine that is gone are marked failed and give back
    the pool slots they held (:mod:`argus_dagster.infra.processes`); a line for each."""
    with dg.build_sensor_context(instance=instance) as context:
        result = dead_run_sensor(context)
    message = result.skip_message if isinstance(result, dg.SkipReason) else ""
    return [line for line in (message or "").splitlines() if line.startswith("run ")]


def pool_notice(instance: dg.DagsterInstance, pool: str = "gpu") -> str | None:
    """What a run about to take ``pool`` waits for, when every slot is held by another run."""
    if pool not in instance.event_log_storage.get_concurrency_keys():
        return None
    info = instance.event_log_storage.get_concurrency_info(pool)
    if info.slot_count <= 0 or len(info.claimed_slots) < info.slot_count:
        return None
    holders = sorted({c.run_id[:8] for c in info.claimed_slots})
    return (f"the {pool!r} pool's {info.slot_count} slot(s) are held by run(s) {', '.join(holders)}: "
            "this run's evidence step waits for them")
