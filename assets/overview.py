"""The overview site (the evaluation's ``reports/index.html``, its sample browser ``reports/samples.html``,
and the index of every evaluation of the home), rewritten by the assets that change what it shows
(``leaderboard``, ``human_alignment``) and linked from their metadata over HTTP."""

import dagster as dg
import polars as pl

from argus_dagster.outputs.overview import write_evaluations_index, write_overview
from argus_dagster.outputs.samples import write_samples
from argus_dagster.infra.settings import evaluations_root
from argus_dagster.infra.storage import Storage, join
from argus_dagster.protocols.best_of_n import human_scores
from resources.bench import BenchResource

from .history import diff

MOVED_KEPT = 50  # videos that moved most, kept for the sample browser (the overview shows the first 10)


def rated_videos(context: dg.AssetExecutionContext, bench: BenchResource, store: Storage) -> pl.DataFrame | None:
    """People's ratings of the bench, one row per video (``task, input_id, model, sample, score``: the
    ``overall`` dimension where rated, raters averaged); None without any. A file that cannot be read
    is said in the log (``human_alignment`` says why on its own materialization)."""
    frames = []
    try:
        files = bench.human_files(store)
    except ValueError:  # a bench resource made without its ratings' folder (a library caller's): none
        return None
    for task, path in files.items():
        try:
            df = human_scores(path)
        except Exception as exc:
            context.log.warning(f"sample browser: human ratings of {task} not read: {type(exc).__name__}: {exc}")
            continue
        if df is not None and df.height:
            frames.append(df.with_columns(pl.lit(task).alias("task")))
    return pl.concat(frames, how="diagonal_relaxed") if frames else None


def latest_change(context: dg.AssetExecutionContext, store: Storage) -> dict:
    """The latest two passes of ``video_scores`` compared, as ``argus diff`` compares them:
    ``{"changes": Diff}``, or ``{"changes_note": why there is none}`` (a first evaluation, or history
    that cannot be read: said, not fatal)."""
    try:
        return {"changes": diff(context.instance, store, "video_scores", top=MOVED_KEPT)}
    except ValueError:  # fewer than two passes
        return {"changes_note": "one pass so far: the next evaluation is compared with this one here "
                                "(argus history lists every pass)"}
    except Exception as exc:  # an unreadable kept table: the page says so, the rest stands
        context.log.warning(f"what changed: {type(exc).__name__}: {exc}")
        return {"changes_note": f"the latest change cannot be read: {type(exc).__name__}: {exc}"}


def overview_metadata(context: dg.AssetExecutionContext, bench: BenchResource, store: Storage,
                      **tables: pl.DataFrame) -> dict:
    """Rewrite the overview site (the evaluation's ``reports/index.html``) and link it over HTTP. A page that
    cannot be written is said in the metadata and the log; the table stands. The reports folder is a
    folder or an ``s3://`` prefix of ``store`` (a presigned link then)."""
    reports = bench.reports_path()
    meta = {}
    changes = latest_change(context, store)
    people = rated_videos(context, bench, store)
    try:  # first, so that the overview links it
        samples = write_samples(reports, bench.storage_path(), bench=f"{bench.bench_name()}, profile {bench.profile_name()}",
                                store=store, changes=changes.get("changes"), people=people,
                                firm_scores=tables.get("firm_scores"))
        meta["samples_url"] = dg.MetadataValue.url(store.link(samples, reports))
    except Exception as exc:  # as the overview's: said, not fatal
        context.log.warning(f"sample browser {join(reports, 'samples.html')} not written: {exc}")
        meta["samples_error"] = f"{type(exc).__name__}: {exc}"
    try:
        index = write_overview(reports, bench.storage_path(), bench=f"{bench.bench_name()} ({bench.bench_path()}), profile {bench.profile_name()}",
                               store=store, people=people, **changes, **tables)
    except Exception as exc:  # a full disk, an unreadable stored table: the asset's own table still counts
        context.log.warning(f"overview {join(reports, 'index.html')} not written: {exc}")
        return {**meta, "overview_error": f"{type(exc).__name__}: {exc}"}
    meta.update({"overview": dg.MetadataValue.path(str(index)),
                 "overview_url": dg.MetadataValue.url(store.link(index, reports))})
    root = evaluations_root(reports)
    if root is not None:  # the index of every evaluation of this ARGUS_HOME, one level up
        try:
            write_evaluations_index(root)
            meta["evaluations_index_url"] = dg.MetadataValue.url(store.link(root / "index.html", root))
        except Exception as exc:
            context.log.warning(f"index of evaluations {root / 'index.html'} not written: {exc}")
    return meta
