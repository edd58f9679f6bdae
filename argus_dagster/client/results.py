"""The one reader of what an evaluation's runs stored, for the command line: the leaderboard, the row
errors, FIRM-Video's summary and training data, the exports' tables and best-of-N (every
materialization of an asset, for ``argus history`` and ``argus diff``, is read by :mod:`argus_dagster.records.history`).

Dagster's records say where each table is: the IO manager (:class:`resources.storage.StorageIOManager`)
records its path (and, for a table kept as its own version, ``stored_version``) in the
materialization's metadata; the table is read from there through the evaluation's storage resource
(a folder, or S3) by :func:`argus_dagster.infra.tables.read_stored`, the reader the assets use too.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import dagster as dg
import polars as pl

from argus_dagster.client.instance import local_instance
from argus_dagster.definitions import best_of_n_tables, storage_for
from argus_dagster.infra.settings import Settings, load_settings
from argus_dagster.infra.storage import Storage
from argus_dagster.infra.tables import recorded_table
from argus_dagster.method.candidate_store import discover
from argus_dagster.method.judge_noise import criterion_spread
from argus_dagster.method.ledger import LEDGER_STAGES, cost_table
from argus_dagster.outputs.export import TABLES, combine, with_evaluation
from argus_dagster.outputs.history_words import split_partition
from argus_dagster.protocols.firm.export import check_out_folder, default_condition_frames, default_video_frames, export_dataset
from argus_dagster.protocols.firm.tables import firm_summary_table
from argus_dagster.records.lineage import latest_record


def evaluation_storage(settings: Settings) -> Storage:
    """The storage of ``settings``' evaluation: its storage resource's (the S3 client, when the
    environment keeps files on S3), through which the command line lists and reads what runs stored."""
    return storage_for(settings=settings).storage.storage()


def load_stored(instance: dg.DagsterInstance, asset: str, partition: str | None = None, *,
                storage: Storage) -> pl.DataFrame | None:
    """The table the latest materialization of ``asset`` (``partition``) stored, read through
    ``storage`` from the path its IO manager recorded in the materialization's metadata (as lineage
    and the sensor read it); None when there is none or it cannot be read."""
    return recorded_table(latest_record(instance, asset, partition), storage)


def row_errors(tasks: list[str] | None = None, models: list[str] | None = None,
               instance: dg.DagsterInstance | None = None,
               settings: Settings | None = None) -> list[tuple[str, str, str]]:
    """The row errors stored for the evaluated bench (the tasks and models given, else all)."""
    settings = settings or load_settings()
    storage = evaluation_storage(settings)
    found = discover(settings.candidates_dir, settings.bench_dir, storage).models
    if models:
        found = {m: t for m, t in found.items() if m in models}
    task_list = sorted(tasks or {t for ts in found.values() for t in ts})
    return _row_errors(instance or local_instance(settings), task_list, found, storage)


def _row_errors(instance: dg.DagsterInstance, tasks: list[str],
                found: dict[str, list[str]], storage: Storage) -> list[tuple[str, str, str]]:
    """``(where, id, error)`` of every row with an error in the evaluated partitions, as stored."""
    out: list[tuple[str, str, str]] = []

    def stored(asset: str, key) -> pl.DataFrame | None:
        record = latest_record(instance, asset, str(key))
        if record is None:
            return None
        n_errors = record.asset_materialization.metadata.get("n_errors")
        if n_errors is not None and n_errors.value == 0:  # counted when it was stored: nothing to read
            return None
        return recorded_table(record, storage)

    for task in tasks:
        seen = set()
        for asset in ("input_instances", "rubrics"):
            df = stored(asset, task)
            for r in (df.filter(pl.col("error").is_not_null()).iter_rows(named=True) if df is not None else []):
                if r["input_id"] not in seen:  # a bad input is also a rubric error: said once
                    seen.add(r["input_id"])
                    out.append((task, r["input_id"], r["error"]))
        for model in sorted(m for m, ts in found.items() if task in ts):
            df = stored("video_scores", dg.MultiPartitionKey({"task": task, "model": model}))
            for r in (df.filter(pl.col("error").is_not_null()).iter_rows(named=True) if df is not None else []):
                if r["input_id"] not in seen:
                    out.append((f"{task} x {model}", r["input_id"], r["error"]))
    return out


def current_leaderboard(instance: dg.DagsterInstance | None = None,
                        settings: Settings | None = None) -> pl.DataFrame | None:
    """The last materialized leaderboard, read from storage (no recomputation)."""
    settings = settings or load_settings()
    return load_stored(instance or local_instance(settings), "leaderboard", storage=evaluation_storage(settings))


def stored_partitions(asset: str, instance: dg.DagsterInstance | None = None, tasks: list[str] | None = None,
                      settings: Settings | None = None, models: list[str] | None = None) -> dict[str, pl.DataFrame]:
    """Every materialized partition of ``asset`` as stored (of ``tasks`` and ``models`` only, when
    given: the others are not read), by key."""
    settings = settings or load_settings()
    instance = instance or local_instance(settings)
    storage = evaluation_storage(settings)
    out = {}
    for key in sorted(instance.get_materialized_partitions(dg.AssetKey(asset)) or ()):
        task, model = split_partition(key)
        if tasks and task not in tasks or models is not None and model not in models:
            continue
        table = load_stored(instance, asset, key, storage=storage)
        if table is not None:
            out[key] = table
    return out


def export_firm(out: str | Path, tasks: list[str] | None = None, instance: dg.DagsterInstance | None = None,
                settings: Settings | None = None, force: bool = False):
    """Write FIRM-Video's training data folder ``out`` (:mod:`argus_dagster.protocols.firm.export`: JSON lines, the
    frames as image files, a dataset card) from the stored ``firm_scores``, ``firm_verdicts`` and
    ``input_instances``; returns its :class:`~argus_dagster.protocols.firm.export.ExportResult`. Reads stored
    tables and the media they name: no model is called. A folder that holds anything but an earlier
    export is refused before anything is read, unless ``force``."""
    check_out_folder(Path(out), force)
    settings = settings or load_settings()
    instance = instance or local_instance(settings)
    scores = stored_partitions("firm_scores", instance, tasks, settings)
    if not scores:
        raise ValueError("no firm_scores stored: run `argus evaluate --protocol firm` (or both) first")
    verdicts: dict[tuple, list[dict]] = {}
    for df in stored_partitions("firm_verdicts", instance, tasks, settings).values():
        for r in df.iter_rows(named=True):
            verdicts.setdefault((r["task"], r["model"], r["input_id"], r.get("sample") or ""), []).append(r)
    inputs = {(r["task"] if "task" in r and r["task"] else key, r["input_id"]): r
              for key, df in stored_partitions("input_instances", instance, tasks, settings).items()
              for r in df.iter_rows(named=True)}
    rows = [r for _, df in sorted(scores.items()) for r in df.iter_rows(named=True)]
    makers = sorted({m for df in stored_partitions("firm_checklists", instance, tasks, settings).values()
                     if "maker" in df.columns for m in df["maker"].drop_nulls().unique().to_list()})
    sources = {"evaluation": f"{settings.evaluation} (bench {settings.bench!r}, profile {settings.profile!r})",
               "bench": str(settings.bench_dir), "candidates": str(settings.candidates_dir),
               "tables": "firm_scores, firm_verdicts, input_instances (as last materialized)",
               "IF checklist planner": "; ".join(makers) or "none recorded",
               "protocol": "FIRM-Video (check-before-score), argus_dagster/protocols/firm/"}
    storage = evaluation_storage(settings)  # media on S3 are read through the evaluation's storage
    return export_dataset(out, rows, verdicts, inputs, sources=sources,
                          video_frames=partial(default_video_frames, storage=storage),
                          condition_frames=partial(default_condition_frames, storage=storage), force=force)


def best_of_n_report(by: str | dict[str, float], tasks: list[str] | None = None,
                     instance: dg.DagsterInstance | None = None,
                     settings: Settings | None = None) -> tuple[pl.DataFrame, dict[str, str]]:
    """Best-of-N picks from the stored ``video_scores`` and ``firm_scores`` (the ``best_of_n`` asset's
    computation), with the comparison against the bench's ``human/<TASK>.csv`` where it exists."""
    settings = settings or load_settings()
    instance = instance or local_instance(settings)
    bench, storage, _ = storage_for(settings=settings)
    return best_of_n_tables(stored_partitions("video_scores", instance, tasks, settings),
                            stored_partitions("firm_scores", instance, tasks, settings), by, tasks=tasks,
                            human=bench.human_files(storage.storage()))


def firm_scores_rows(tasks: list[str] | None = None, models: list[str] | None = None,
                     instance: dg.DagsterInstance | None = None, settings: Settings | None = None) -> pl.DataFrame:
    """Every stored ``firm_scores`` row of ``tasks`` (all without) and ``models`` (all without), one table."""
    parts = [df for df in stored_partitions("firm_scores", instance, tasks, settings).values() if df.height]
    if not parts:
        return pl.DataFrame()
    df = pl.concat(parts, how="diagonal_relaxed")
    return df.filter(pl.col("model").is_in(models)) if models else df


def firm_summary(tasks: list[str] | None = None, instance: dg.DagsterInstance | None = None,
                 settings: Settings | None = None) -> pl.DataFrame:
    """Per task and model: videos, mean IF/WC/PQ ratings (1-5) and how many of each are unscored."""
    return firm_summary_table(firm_scores_rows(tasks, None, instance, settings))


def stored_export_table(what: str, tasks: list[str] | None = None, instance: dg.DagsterInstance | None = None,
                        settings: Settings | None = None) -> pl.DataFrame | None:
    """The stored table ``argus export <what>`` writes (``leaderboard``, ``videos``, ``criteria``, ``costs``; see
    :mod:`argus_dagster.outputs.export`), of ``tasks`` only when given, each row naming its evaluation
    (``bench``, ``profile``); None when nothing is stored."""
    if what not in TABLES:
        raise ValueError(f"{what!r}: expected one of {', '.join(TABLES)}")
    settings = settings or load_settings()
    instance = instance or local_instance(settings)
    if TABLES[what] == "leaderboard":
        table = combine([current_leaderboard(instance, settings)], tasks)
    elif what == "noise":  # the judge's spread per criterion, from its repeats (``argus evaluate --repeat``)
        repeats = combine(list(stored_partitions("judge_noise", instance, tasks, settings).values()), tasks)
        table = criterion_spread(repeats) if repeats is not None and repeats.height else None
        table = table if table is not None and table.height else None
    elif what == "controls":  # what the evaluator tells apart, per task and kind (``argus evaluate --controls``)
        table = load_stored(instance, "controls", storage=evaluation_storage(settings))
        if table is not None and tasks:
            table = table.filter(pl.col("task").is_in(tasks))
        table = table if table is not None and table.height else None
    elif what == "costs":  # the ledger asset's table: every stage's costs, not the video scores alone
        table = None if tasks else load_stored(instance, "costs", storage=evaluation_storage(settings))
        if table is None:  # some tasks only, or an evaluation stored before the ledger was an asset: its stages
            table = cost_table(stages={stage: combine(list(stored_partitions(asset, instance, tasks, settings).values()),
                                                      tasks) for stage, asset in LEDGER_STAGES.items()})
        table = table if table.height else None
    else:
        table = combine(list(stored_partitions(TABLES[what], instance, tasks, settings).values()), tasks)
    return None if table is None else with_evaluation(table, settings.bench, settings.profile)


def vefx_board(instance: dg.DagsterInstance | None = None, settings: Settings | None = None) -> pl.DataFrame | None:
    """The last materialized ``vefx_leaderboard`` (per task, model and dimension, 1-4), or None."""
    settings = settings or load_settings()
    return load_stored(instance or local_instance(settings), "vefx_leaderboard", storage=evaluation_storage(settings))
