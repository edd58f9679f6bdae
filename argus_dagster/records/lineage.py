"""Reading what a partition held before this materialization, for score deltas in metadata.

The IO manager records each stored table's ``path`` (``paths`` by partition, for a run of many) in the
materialization's metadata; the previous table is read from there
(:func:`argus_dagster.infra.tables.recorded_table`, the one reader of stored tables) before the new one
replaces it (local folder or ``s3://`` alike).
"""


import dagster as dg
import polars as pl

from argus_dagster.infra.storage import Storage
from argus_dagster.infra.tables import recorded_table
from argus_dagster.outputs.deltas import criterion_deltas, delta_summary, video_deltas


def latest_record(instance: dg.DagsterInstance, asset: str, partition: str | None = None):
    """The latest materialization record of ``asset`` (and ``partition``), or None."""
    flt = dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition] if partition else None)
    records = instance.fetch_materializations(flt, limit=1).records
    return records[0] if records else None


def previous_table(context: dg.AssetExecutionContext, storage: Storage) -> pl.DataFrame | None:
    partition = context.partition_key if context.has_partition_key else None
    record = latest_record(context.instance, context.asset_key.to_user_string(), partition)
    return recorded_table(record, storage)


def _table(df: pl.DataFrame) -> dg.MetadataValue:
    kinds: dict[pl.DataType | type[pl.DataType], str] = {pl.String: "string", pl.Float64: "float", pl.Int64: "int"}
    schema = dg.TableSchema(columns=[dg.TableColumn(c, kinds.get(t, "string")) for c, t in df.schema.items()])
    return dg.MetadataValue.table(records=[dg.TableRecord(r) for r in df.head(200).iter_rows(named=True)],
                                  schema=schema)


def criterion_delta_metadata(context: dg.AssetExecutionContext, df: pl.DataFrame, storage: Storage) -> dict:
    """``score_delta`` (table), ``score_delta_summary`` (per video) and counts, against the last run."""
    before = previous_table(context, storage)
    if before is None:
        return {"score_delta_summary": dg.MetadataValue.md("first materialization of this partition")}
    deltas = criterion_deltas(before, df)
    return {"n_criteria_moved": deltas.height, "n_videos_moved": deltas.select("input_id", "sample").n_unique(),
            "score_delta": _table(deltas), "score_delta_summary": dg.MetadataValue.md(delta_summary(deltas))}


def video_delta_metadata(context: dg.AssetExecutionContext, df: pl.DataFrame, storage: Storage) -> dict:
    before = previous_table(context, storage)
    if before is None:
        return {}
    deltas = video_deltas(before, df)
    return {"n_finals_moved": deltas.height, "final_delta": _table(deltas)}


def rubric_delta_metadata(context: dg.AssetExecutionContext, df: pl.DataFrame, storage: Storage) -> dict:
    """Which inputs got a different rubric than the last materialization (their scores will move)."""
    before = previous_table(context, storage)
    if before is None:
        return {}
    old = {r["input_id"]: r["rubric_hash"] for r in before.iter_rows(named=True)}
    new = {r["input_id"]: r["rubric_hash"] for r in df.iter_rows(named=True)}
    changed = sorted(i for i in set(old) | set(new) if old.get(i) != new.get(i))
    lines = [f"- `{i}`: {(old.get(i) or 'none')[:12]} → {(new.get(i) or 'none')[:12]}" for i in changed[:50]]
    return {"n_rubrics_changed": len(changed), "rubrics_changed": dg.MetadataValue.md("\n".join(lines) or "none")}
