"""The overview site (the evaluation's ``reports/index.html``, its sample browser ``reports/samples.html``,
and the index of every evaluation of the home), rewritten by the assets that change what it shows
(``leaderboard``, ``human_alignment``) and linked from their metadata over HTTP."""

import dagster as dg
import polars as pl

from argus_dagster.outputs.overview import write_evaluations_index, write_overview
from argus_dagster.outputs.samples import write_samples
from argus_dagster.infra.environment import reports_base_url
from argus_dagster.infra.settings import evaluations_root
from argus_dagster.infra.storage import Storage, join
from resources.bench import BenchResource


def overview_metadata(context: dg.AssetExecutionContext, bench: BenchResource, store: Storage,
                      **tables: pl.DataFrame) -> dict:
    """Rewrite the overview site (the evaluation's ``reports/index.html``) and link it over HTTP. A page that
    cannot be written is said in the metadata and the log; the table stands. The reports folder is a
    folder or an ``s3://`` prefix of ``store`` (a presigned link then)."""
    reports = bench.reports_path()
    meta = {}
    try:  # first, so that the overview links it
        samples = write_samples(reports, bench.storage_path(), bench=f"{bench.bench_name()}, profile {bench.profile_name()}",
                                store=store)
        meta["samples_url"] = dg.MetadataValue.url(store.link(samples, reports))
    except Exception as exc:  # as the overview's: said, not fatal
        context.log.warning(f"sample browser {join(reports, 'samples.html')} not written: {exc}")
        meta["samples_error"] = f"{type(exc).__name__}: {exc}"
    try:
        index = write_overview(reports, bench.storage_path(), bench=f"{bench.bench_name()} ({bench.bench_path()}), profile {bench.profile_name()}",
                               store=store, **tables)
    except Exception as exc:  # a full disk, an unreadable stored table: the asset's own table still counts
        context.log.warning(f"overview {join(reports, 'index.html')} not written: {exc}")
        return {**meta, "overview_error": f"{type(exc).__name__}: {exc}"}
    meta.update({"overview": dg.MetadataValue.path(str(index)),
                 "overview_url": dg.MetadataValue.url(store.link(index, reports))})
    root = evaluations_root(reports)
    if root is not None:  # the index of every evaluation of this ARGUS_HOME, one level up
        try:
            write_evaluations_index(root)
            meta["evaluations_index_url"] = dg.MetadataValue.url((store.reports_url or reports_base_url()) + "index.html")
        except Exception as exc:
            context.log.warning(f"index of evaluations {root / 'index.html'} not written: {exc}")
    return meta
