"""Where an evaluation's overview is: the hint after a run (and how to serve it), or a presigned link
where the environment keeps the reports on S3."""

from __future__ import annotations

from argus_dagster.client.printing import say
from argus_dagster.client.selection import selector
from argus_dagster.infra.environment import reports_port
from argus_dagster.infra.settings import served_prefix


def stored_overview(settings) -> str | None:
    """A presigned link to the overview when the environment keeps the reports on S3, else None."""
    from argus_dagster.definitions import storage_for  # deferred: start-up time (Dagster)
    from argus_dagster.infra.storage import is_remote, join  # deferred: start-up time (the object store's client)

    bench, storage, _ = storage_for(settings=settings)
    reports = bench.reports_path()
    if not is_remote(reports):
        return None
    index = join(reports, "index.html")
    return storage.link(index) if storage.exists(index) else ""


def overview_hint(status: int, settings) -> int:
    """After a run: where the overview of every result is, and how to look at it in a browser."""
    remote = stored_overview(settings)
    if remote is not None:
        if status == 0 and remote:
            say(f"Overview of every task (a link valid for a while): {remote}")
        return status
    index = settings.reports_dir / "index.html"
    if status == 0 and index.is_file():
        try:
            where = f" at http://127.0.0.1:{reports_port()}/{served_prefix(settings.reports_dir)}index.html"
        except ValueError:
            where = ""
        say(f"Overview of every task: {index}; `argus open{selector(settings)}` serves it{where}")
    return status
