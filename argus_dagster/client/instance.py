"""The Dagster instance of one evaluation, as the command line opens it: its folder and ``dagster.yaml``,
its SQLite files' settings, and the runs a process of this machine left behind.

The instance is built from its folder (``DagsterInstance.from_config``), not from the ``DAGSTER_HOME``
variable: one process may open the instances of several evaluations. A new evaluation's instance is
made once, atomically, whatever number of commands start together (:func:`ensure_instance`): a ready,
empty instance is copied aside and moved into place under a lock, so no two processes ever create
Dagster's schema in one SQLite file (two did, and left two ``alembic_version`` heads for good). Dead runs are Dagster's
``dead_run_sensor`` (:mod:`assets.sensors`, through :mod:`argus_dagster.definitions`): under ``argus ui``
the daemon ticks it; ``argus evaluate`` has no daemon, so it asks the same sensor once before it runs
(:func:`ask_dead_run_sensor`) rather than holding a daemon process up for one command.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from contextlib import contextmanager
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
# A run the queue would start waits while another run in flight has the same partition (argus evaluate's
# runs, in process, are counted too): two runs never compute one asset partition at once.
run_queue:
  max_concurrent_runs: 4
  dequeue_interval_seconds: 1
  tag_concurrency_limits:
    - key: "dagster/partition"
      value:
        applyLimitPerUniqueValue: true
      limit: 1
    # One run of the evaluate job (a whole pass in one run) at a time: a second waits in the queue.
    - key: "argus/pass"
      limit: 1
"""


def local_instance(settings: Settings | None = None) -> dg.DagsterInstance:
    """The Dagster instance of an evaluation (default: this process's, see ``load_settings``), built
    from the evaluation's ``dagster_home`` folder, with Dagster's storage as its ``dagster.yaml`` says
    (default: SQLite files there)."""
    settings = settings or load_settings()
    home = ensure_instance(settings.dagster_home, settings.home)
    sync_lightly(home)  # its SQLite files without a disk sync per event (argus_dagster.infra.sqlite)
    return dg.DagsterInstance.from_config(str(home))


def ensure_instance_yaml(dagster_home: Path) -> Path:
    """The instance's own ``dagster.yaml`` (:data:`INSTANCE_YAML`), written where there is none."""
    config = Path(dagster_home) / "dagster.yaml"
    if not config.is_file():
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(INSTANCE_YAML)
    return config


READY = ".argus-instance-ready"  # written last into a made instance, before it is moved into place


@contextmanager
def _locked(path: Path):
    """An exclusive ``flock`` on ``path`` (made if missing), released by the kernel if the process dies."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _make_empty_instance(folder: Path) -> None:
    """An instance in ``folder`` ready to use: its ``dagster.yaml`` (kept where there is one) and every
    storage's schema, made or migrated, then closed and marked :data:`READY`."""
    ensure_instance_yaml(folder)
    instance = dg.DagsterInstance.from_config(str(folder))
    try:  # each storage makes its tables (and stamps its schema) on first use
        instance.get_runs(limit=1)
        instance.get_asset_keys(limit=1)
        instance.all_instigator_state()
    finally:
        instance.dispose()
    (folder / READY).write_text(f"dagster {dg.__version__}\n")


def _template(home_root: Path) -> Path:
    """A ready, empty instance of this Dagster version under ``home_root`` (made once, atomically):
    what each new evaluation's instance is copied from (making the schema costs a second of CPU)."""
    template = home_root / ".instance-template" / dg.__version__
    if (template / READY).is_file():
        return template
    with _locked(template.parent / f"{dg.__version__}.lock"):
        if not (template / READY).is_file():
            aside = template.parent / f".{dg.__version__}.{os.getpid()}.making"
            shutil.rmtree(aside, ignore_errors=True)
            _make_empty_instance(aside)
            shutil.rmtree(template, ignore_errors=True)
            os.rename(aside, template)
    return template


def ensure_instance(dagster_home: Path, home_root: Path | None = None) -> Path:
    """The evaluation's instance folder, made once whatever number of processes ask at once.

    A folder with :data:`READY` in it is complete (the fast path: no lock). Otherwise, under a lock
    beside it: an instance folder made before this rule (its ``dagster.yaml`` there, or storage of
    another kind such as Postgres) is opened once under the lock, so that any schema migration runs in
    one process, and marked ready; a new one is copied from the ready, empty template of this Dagster
    version (:func:`_template`, under ``home_root``; made in place when none is given) and moved into
    place by one rename, so no process ever sees half an instance."""
    home = Path(dagster_home)
    if (home / READY).is_file():
        return home
    with _locked(home.parent / f".{home.name}.lock"):
        if (home / READY).is_file():
            return home
        if home.is_dir() and any(home.iterdir()):
            # an instance made before this rule (or Dagster's own files from ``dagster dev``): its
            # storages are opened, and migrated where they must be, here alone
            _make_empty_instance(home)
            return home
        aside = home.parent / f".{home.name}.{os.getpid()}.making"
        shutil.rmtree(aside, ignore_errors=True)
        if home_root is not None:
            shutil.copytree(_template(Path(home_root)), aside)
        else:
            _make_empty_instance(aside)
        if home.is_dir():
            home.rmdir()  # empty: a rename cannot replace a folder
        os.rename(aside, home)
    return home


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
