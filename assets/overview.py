"""The ``site`` asset: the evaluation's overview (``reports/index.html``), its sample browser
(``reports/samples.html``), the comparison page of each pair of models its win matrices show
(``reports/pairs/<A>/<B>.html``) and its row of the home's index of evaluations (``$ARGUS_HOME/benches/index.html``).

The site is an asset like the tables it shows, with its inputs declared: the leaderboard, the video and
criterion scores, human alignment, FIRM-Video's and VEFX-Bench's results (each read as Dagster recorded
it, through the IO manager; a protocol that never ran is an input that is missing, and its section is
left out), and the history of ``video_scores`` it compares (Dagster's records). It is materialized
once per pass, when any of them changed, by the automation condition the leaderboard carries; no
other asset writes these pages. Its table (one row per page: where, how many bytes, its sha256) is
what its data version comes from.
"""

import hashlib

import dagster as dg
import polars as pl

from argus_dagster.infra.settings import evaluations_root
from argus_dagster.infra.storage import Storage, parent, relative
from argus_dagster.infra.tables import frame
from argus_dagster.outputs.compare_pages import matrix_pairs, pair_path, pair_writer, remove_stale_pair_pages
from argus_dagster.outputs.overview import write_evaluations_index, write_home_row, write_overview
from argus_dagster.outputs.samples import write_samples
from argus_dagster.protocols.best_of_n import human_scores
from argus_dagster.records.history import diff
from argus_dagster.resources.bench import BenchResource
from argus_dagster.resources.storage import StorageResource

from .automation import FOLLOWS_PARTITIONS
from .versions import content_version, volatile_metadata

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


def _concat(tables: dict[str, pl.DataFrame] | None) -> pl.DataFrame | None:
    """Every stored partition of a partitioned input as one table; None when none is stored."""
    frames = [df for df in (tables or {}).values() if df is not None and df.height]
    return pl.concat(frames, how="diagonal_relaxed") if frames else None


SITE_PAGES = {"page": pl.String, "path": pl.String, "bytes": pl.Int64, "sha256": pl.String, "error": pl.String}
# Each page names the time it was written, so its bytes and digest move with every write: the version is of
# which pages were written where (and which failed); what they show is the inputs' data versions, which
# Dagster records with each materialization of the site (its provenance in the UI).
SITE_VOLATILE = ("bytes", "sha256")
SITE_INPUTS = ("leaderboard", "video_scores", "criterion_scores", "human_alignment", "firm_scores", "vefx_leaderboard",
               "vefx_scores", "costs", "controls")


def _page_row(page: str, path, store: Storage, root) -> dict:
    data = store.read_bytes(str(path))
    return {"page": page, "path": relative(path, root), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(), "error": None}


@dg.asset(code_version="5", group_name="reports", kinds={"html"}, metadata=volatile_metadata(SITE_VOLATILE),
          automation_condition=FOLLOWS_PARTITIONS,
          ins={name: dg.AssetIn(metadata={"allow_missing_partitions": True}) for name in SITE_INPUTS})
def site(context: dg.AssetExecutionContext, leaderboard: pl.DataFrame | None,
         video_scores: dict[str, pl.DataFrame], criterion_scores: dict[str, pl.DataFrame],
         human_alignment: pl.DataFrame | None, firm_scores: dict[str, pl.DataFrame],
         vefx_leaderboard: pl.DataFrame | None, vefx_scores: dict[str, pl.DataFrame], costs: pl.DataFrame | None,
         controls: pl.DataFrame | None,
         bench: BenchResource, storage: StorageResource) -> dg.Output[pl.DataFrame]:
    """The overview, the sample browser, the pairs' comparison pages and this evaluation's row of the
    home's index, written whole from the inputs (a page that cannot be written is a row with its error;
    the others stand)."""
    store = storage.storage()
    reports = bench.reports_path()
    root = parent(reports)  # the evaluation's folder: paths are said relative to it, as every asset's are
    videos, criteria, firm = _concat(video_scores), _concat(criterion_scores), _concat(firm_scores)
    edits = _concat(vefx_scores)
    changes = latest_change(context, store)
    people = rated_videos(context, bench, store)
    meta: dict[str, dg.MetadataValue | str]
    rows, meta = [], {}

    def written(page: str, write) -> str | None:
        try:
            path = write()
        except Exception as exc:  # a full disk, a page that cannot be written: said, the others stand
            context.log.warning(f"{page} not written: {type(exc).__name__}: {exc}")
            rows.append({"page": page, "path": None, "bytes": None, "sha256": None,
                         "error": f"{type(exc).__name__}: {exc}"})
            meta[f"{page}_error"] = f"{type(exc).__name__}: {exc}"
            return None
        rows.append(_page_row(page, path, store, root))
        return path

    title = f"{bench.bench_name()}, profile {bench.profile_name()}"
    samples = written("samples", lambda: write_samples(
        reports, bench.storage_path(), bench=title, store=store, video_scores=videos, criterion_scores=criteria,
        changes=changes.get("changes"), people=people, firm_scores=firm))
    if samples is not None:  # first, so that the overview links it
        meta["samples_url"] = dg.MetadataValue.url(store.link(samples, reports))
    pairs = matrix_pairs(leaderboard, videos)  # the pairs the win matrices show, before the overview links them
    pair_pages: dict[tuple[str, str], str] = {}
    if pairs:
        write_pair = pair_writer(reports, videos, criteria, store)
        for a, b in pairs:
            if written(f"pair:{a} vs {b}", lambda a=a, b=b: write_pair(a, b)) is not None:
                pair_pages[(a, b)] = pair_path(a, b)
        meta["pair_pages"] = f"{len(pair_pages)} of {len(pairs)} written"
    stale = remove_stale_pair_pages(reports, pair_pages.values(), store)  # pairs no matrix shows now
    if stale:
        meta["pair_pages_removed"] = dg.MetadataValue.int(len(stale))
    index = written("overview", lambda: write_overview(
        reports, bench.storage_path(), bench=f"{bench.bench_name()} ({bench.bench_path()}), profile {bench.profile_name()}",
        store=store, people=people, leaderboard=leaderboard, alignment=human_alignment, firm_scores=firm,
        vefx_board=vefx_leaderboard, video_scores=videos, criterion_scores=criteria, vefx_scores=edits, costs=costs,
        controls=controls,
        pair_pages=pair_pages, **changes))
    if index is not None:
        meta["overview_url"] = dg.MetadataValue.url(store.link(index, reports))
    home = evaluations_root(reports)
    if home is not None:  # this evaluation's row, then the index of every evaluation of the home, one level up
        row = written("home_row", lambda: write_home_row(reports, leaderboard, videos, criteria))
        if row is not None and written("home", lambda: write_evaluations_index(home)) is not None:
            meta["evaluations_index_url"] = dg.MetadataValue.url(store.link(home / "index.html", home))
    table = frame(rows, SITE_PAGES)
    return dg.Output(table, data_version=content_version(table, SITE_VOLATILE), metadata={
        **meta, "pages": dg.MetadataValue.md("\n".join(
            f"- {r['page']}: `{r['path']}` ({r['bytes']} bytes)" if not r["error"] else f"- {r['page']}: {r['error']}"
            for r in rows)),
        "inputs_present": ", ".join(name for name, value in (
            ("leaderboard", leaderboard), ("video_scores", videos), ("criterion_scores", criteria),
            ("human_alignment", human_alignment), ("firm_scores", firm), ("vefx_leaderboard", vefx_leaderboard),
            ("vefx_scores", edits), ("costs", costs), ("controls", controls)) if value is not None) or "none"})
