"""``argus open``: an evaluation's reports (overview, comparison and video pages) served on loopback, and
the index of every evaluation of this home beside them; read-only like ``argus leaderboard``."""

from __future__ import annotations

import argparse

from argus_dagster.client.overview_link import stored_overview
from argus_dagster.client.printing import say, storage_failure
from argus_dagster.client.selection import chosen, read_only_evaluation
from argus_dagster.infra.environment import SettingError, reports_port
from argus_dagster.infra.settings import evaluations_root, find_home, served_prefix
from argus_dagster.outputs.overview import write_evaluations_index
from argus_dagster.outputs.serve import REPORTS_ONLY, make_server, url_of


def cmd_open(args: argparse.Namespace) -> int:
    """Serve an evaluation's reports on loopback and print the overview's URL; read-only like ``leaderboard``."""
    if args.before_results and find_home() is not None:
        try:
            settings = chosen(args)
        except SettingError as exc:
            say(f"argus open: {exc}")
            return 1
    else:
        settings = read_only_evaluation(args, needs_instance=False)
        if settings is None:
            return 1
    remote = stored_overview(settings)
    if remote is not None:  # the reports are objects: a presigned link opens the overview
        say(f"{settings.evaluation}'s overview: {remote}" if remote else
            f"no overview yet for {settings.evaluation} on S3: run `argus evaluate` first")
        return 0 if remote else 1
    reports = settings.reports_dir
    if not args.before_results and not (reports / "index.html").is_file():
        say(f"no overview yet in {reports}: run `argus demo` or `argus evaluate` first")
        return 1
    root = evaluations_root(reports)  # $ARGUS_HOME/benches: every evaluation's reports, and their index
    reports.mkdir(parents=True, exist_ok=True) if args.before_results else None
    try:
        server = make_server(root or reports, reports_port() if args.port is None else args.port,
                             REPORTS_ONLY if root else None)
    except (OSError, ValueError) as exc:
        say(f"argus open: {exc}")
        return 2
    page = url_of(server, served_prefix(reports) + "index.html")
    say(f"serving {settings.evaluation}'s reports ({reports}) at {page} (Ctrl-C stops)")
    if root is not None:
        try:
            write_evaluations_index(root)  # as of now: the evaluations recorded in this home
            say(f"every evaluation of this home: {url_of(server, 'index.html')}")
        except OSError as exc:  # a read-only home: its reports are served all the same
            say(f"argus open: the index of every evaluation is not refreshed ({storage_failure(exc) or exc})")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
