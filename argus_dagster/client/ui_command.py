"""``argus ui``: the Dagster UI (webserver and daemon) and the reports server started as children of this
process, pinned to one evaluation, behind the host-checking proxy (:mod:`argus_dagster.client.ui`) and
supervised until either stops (:mod:`argus_dagster.client.supervise`). Imported only when it runs
(:data:`argus_dagster.client.cli.COMMANDS`)."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

from argus_dagster.client.instance import ensure_instance
from argus_dagster.client.printing import say as _print  # the name the command below prints with
from argus_dagster.client.supervise import supervise
from argus_dagster.client.ui import HostProxy, answered_hosts, free_loopback_port, port_taken
from argus_dagster.infra.environment import SettingError, pinned_environment, reports_port
from argus_dagster.infra.files import write_atomic
from argus_dagster.infra.settings import served_settings

UI_WORKSPACE = """load_from:
  - python_module:
      module_name: argus_dagster.location
      location_name: argus_dagster
"""


def cmd_ui(args: argparse.Namespace) -> int:
    """The Dagster UI (``dagster dev``: webserver and daemon) on one evaluation's instance, and the
    reports server beside it, each pinned to that evaluation (``--bench``/``--profile``, else
    ``ARGUS_BENCH``/``ARGUS_PROFILE``, else the demo). The webserver listens on an internal loopback
    port behind :class:`argus_dagster.client.ui.HostProxy` (a loopback ``Host`` or ``--host`` only).
    Ctrl-C (SIGINT), SIGTERM or SIGHUP stops everything; a kill -9 of this process ends its children too
    (:mod:`argus_dagster.client.supervise`); a port taken is said at once."""
    try:
        settings = served_settings(args.bench, args.profile)
        port = reports_port() if args.reports_port is None else args.reports_port
    except (SettingError, ValueError) as exc:
        _print(f"argus ui: {exc}")
        return 2
    dagster = Path(sys.executable).parent / "dagster"
    if not dagster.is_file():
        found = shutil.which("dagster")
        if found is None:
            _print("argus ui: the dagster command is not installed beside this Python (pip install dagster-webserver)")
            return 2
        dagster = Path(found)
    taken = port_taken("127.0.0.1", port)
    if taken is not None:
        _print(f"argus ui: the reports server's port {port} on 127.0.0.1 is taken ({taken}): pass --reports-port "
               "or set ARGUS_REPORTS_PORT")
        return 2
    internal = free_loopback_port()
    try:
        proxy = HostProxy(args.host, args.port, internal, answered_hosts(args.host))
    except OSError as exc:
        _print(f"argus ui: the Dagster UI's port {args.port} on {args.host} is taken ({exc.strerror or exc}): "
               "pass --port")
        return 2
    ensure_instance(settings.dagster_home, settings.home)
    workspace = settings.dagster_home / "workspace.yaml"  # the code location, wherever argus is installed
    write_atomic(workspace, UI_WORKSPACE)
    env = pinned_environment(settings, port)
    commands = {  # the reports server finds the evaluation in the environment, as the code location does
        "reports server": [sys.executable, "-m", "argus_dagster.client.cli", "open", "--before-results", "--port", str(port)],
        "Dagster UI": [str(dagster), "dev", "-w", str(workspace), "-h", "127.0.0.1", "-p", str(internal)],
    }
    _print(f"argus ui: evaluation {settings.evaluation} (bench {settings.bench_dir}); its instance {settings.dagster_home}\n"
           f"  the Dagster UI at http://{args.host}:{proxy.port}/ (with the daemon), the reports beside it; "
           "Ctrl-C stops both")

    def stopped(name: str, status: int) -> None:
        _print(f"argus ui: the {name} stopped (exit status {status}); stopping the other")

    return supervise(commands, env, proxy, stopped)
