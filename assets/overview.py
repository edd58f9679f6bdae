"""The overview site (``$ARGUS_HOME/reports/index.html``), rewritten by the assets that change what it
shows (``leaderboard``, ``human_alignment``) and linked from their metadata over HTTP."""

import dagster as dg
import polars as pl

from argus_dagster.overview import write_overview
from argus_dagster.settings import load_settings, report_url


def overview_metadata(context: dg.AssetExecutionContext, **tables: pl.DataFrame) -> dict:
    """Rewrite the overview site (``$ARGUS_HOME/reports/index.html``) and link it over HTTP. A page that
    cannot be written is said in the metadata and the log; the table stands."""
    settings = load_settings()
    try:
        index = write_overview(settings.reports_dir, settings.storage_dir, bench=str(settings.bench_dir), **tables)
    except Exception as exc:  # a full disk, an unreadable stored table: the asset's own table still counts
        context.log.warning(f"overview {settings.reports_dir / 'index.html'} not written: {exc}")
        return {"overview_error": f"{type(exc).__name__}: {exc}"}
    return {"overview": dg.MetadataValue.path(str(index)), "overview_url": dg.MetadataValue.url(report_url(index))}
