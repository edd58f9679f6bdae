"""Every materialization of an asset as Dagster recorded it, and what moved between two passes of
it (``argus history``, ``argus diff`` and the overview's "What changed").

The IO manager (:class:`argus_dagster.resources.storage.StorageIOManager`) records each stored table's path (and, for
a table kept as its own version, ``stored_version``) in the materialization's metadata; the table is
read from there through the evaluation's storage (:func:`argus_dagster.infra.tables.read_stored`). The
run's tags say why it ran (:data:`REASON_TAG`) and which command launched it (:data:`COMMAND_TAG`: the
runs of one ``argus evaluate`` are one *pass*; a run launched elsewhere, from the UI or a sensor, is a
pass of its own).

The state of an asset after a pass is, per partition, its latest materialization up to that pass's
last one; a diff compares two such states: per model the mean final score and its interval, the
videos and criteria that moved most (:mod:`argus_dagster.outputs.deltas`), and what changed between
them (the judge, the rubrics, the inputs by their data versions, the assets' code versions).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import dagster as dg
import polars as pl

from argus_dagster.infra.storage import Storage
from argus_dagster.infra.tables import read_stored, recorded_path, recorded_version
from argus_dagster.method.leaderboard import build_leaderboard
from argus_dagster.outputs.deltas import Diff, criterion_deltas, video_deltas
from argus_dagster.outputs.history_words import SOURCE_INPUTS, split_partition
from argus_dagster.records import DATA_VERSION_TAG
from argus_dagster.records.fingerprints import differences, fingerprint_id

COMMAND_TAG = "argus/command"  # the argus evaluate (or demo) whose runs these are, one id per command
REASON_TAG = "argus/reason"  # why the run was requested, in words (the plan's reasons)
EVALUATOR_TAG = "argus/evaluator"  # the judge the run's evaluation was configured with
MAX_TAG = 2000  # characters a reason tag keeps


@dataclass(frozen=True)
class Stored:
    """One materialization of one asset partition, as Dagster recorded it."""

    storage_id: int
    timestamp: float
    run_id: str
    partition: str | None
    data_version: str
    table: str | None  # the kept table (stored_version), else the path recorded
    kept: bool  # whether the table is its own version (not the file the next materialization replaces)
    tags: dict = field(default_factory=dict, compare=False)  # the run's
    event_tags: dict = field(default_factory=dict, compare=False)  # the materialization's (its provenance)
    fingerprint: dict | None = field(default=None, compare=False)  # what produced it (resources.fingerprint), where recorded

    @property
    def reason(self) -> str:
        return self.tags.get(REASON_TAG, "")

    @property
    def command(self) -> str:
        """The pass this materialization belongs to: its command's id, else its run's."""
        return self.tags.get(COMMAND_TAG) or self.run_id

    @property
    def time(self) -> str:
        return datetime.fromtimestamp(self.timestamp, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def materializations(instance: dg.DagsterInstance, asset: str, partition: str | None = None) -> list[Stored]:
    """Every materialization of ``asset`` (of ``partition`` only, when given), oldest first."""
    flt = dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition] if partition else None)
    records: list[dg.EventLogRecord] = []
    cursor = None
    while True:
        got = instance.fetch_materializations(flt, limit=1000, cursor=cursor, ascending=True)
        records += got.records
        if not got.has_more:
            break
        cursor = got.cursor
    run_ids = sorted({r.run_id for r in records})
    tags = {}
    for i in range(0, len(run_ids), 200):
        for run in instance.get_runs(dg.RunsFilter(run_ids=run_ids[i:i + 200])):
            tags[run.run_id] = dict(run.tags)
    out = []
    for r in records:
        m = r.asset_materialization
        assert m is not None  # fetched as materializations
        md: Mapping[str, Any] = m.metadata
        part = str(m.partition) if m.partition is not None else None
        kept = recorded_version(md, part)
        table = kept or recorded_path(md, part)
        fp = md.get("fingerprint")
        out.append(Stored(r.storage_id, r.timestamp, r.run_id, part, m.tags.get(DATA_VERSION_TAG, "") if m.tags else "",
                          table or None, kept is not None, tags.get(r.run_id, {}), dict(m.tags or {}),
                          fp.value if fp is not None and isinstance(fp.value, dict) else None))
    return out


def materialized_table(stored: Stored | None, storage: Storage, latest: bool = False) -> pl.DataFrame | None:
    """The table a materialization stored: its kept version, or (for the latest one only, which the
    next materialization has not replaced yet) the path recorded; None when it is gone (pruned by
    retention, or removed by hand)."""
    if stored is None or stored.table is None or not (stored.kept or latest):
        return None
    return read_stored(stored.table, storage)


def pass_fingerprint(history: list[Stored], command: str) -> dict | None:
    """The fingerprint the pass ``command`` recorded (its latest materialization that has one), or None
    for a pass made before fingerprints were recorded."""
    found = [s for s in history if s.command == command and s.fingerprint is not None]
    return max(found, key=lambda s: s.storage_id).fingerprint if found else None


def passes(history: list[Stored]) -> list[str]:
    """The passes (commands, or runs launched elsewhere) that materialized the asset, oldest first."""
    last: dict[str, int] = {}
    for s in history:
        last[s.command] = max(last.get(s.command, 0), s.storage_id)
    return sorted(last, key=last.__getitem__)


def resolve(history: list[Stored], selector: str) -> str:
    """The pass a selector names: a pass's id, a run id or a data version (each or its start)."""
    found = {s.command for s in history if selector and (s.command.startswith(selector) or s.run_id.startswith(selector)
                                                         or s.data_version.startswith(selector))}
    if len(found) == 1:
        return found.pop()
    if not found:
        raise ValueError(f"{selector!r}: no materialization of this asset has that run id or data version "
                         "(argus history lists them)")
    raise ValueError(f"{selector!r}: names {len(found)} passes; give more of it")


def state_after(history: list[Stored], bound: int) -> dict[str | None, Stored]:
    """Per partition, its latest materialization with a storage id up to ``bound``."""
    out: dict[str | None, Stored] = {}
    for s in history:
        if s.storage_id <= bound:
            out[s.partition] = s
    return out


def bound_of(history: list[Stored], command: str) -> int:
    return max(s.storage_id for s in history if s.command == command)


def _tables(state: dict, history: list[Stored], storage: Storage) -> dict:
    newest = {s.partition: s.storage_id for s in history}
    return {p: materialized_table(s, storage, latest=newest.get(p) == s.storage_id) for p, s in state.items()}


def _judges(tables: dict) -> list[str]:
    out = set()
    for df in tables.values():
        if df is not None and "judge" in df.columns:
            out |= {j.strip() for v in df["judge"].drop_nulls().to_list() for j in str(v).split(",") if j.strip()}
    return sorted(out)


def _version_at(instance: dg.DagsterInstance, key: dg.AssetKey, storage_id: int) -> str | None:
    """The data version of the record of ``key`` at ``storage_id`` (a materialization, or a source's
    observation), None where there is none."""
    flt = dg.AssetRecordsFilter(asset_key=key, storage_ids=[storage_id])
    for fetch in (instance.fetch_materializations, instance.fetch_observations):
        for r in fetch(flt, limit=1).records:
            event = r.asset_materialization or r.asset_observation
            return (event.tags or {}).get(DATA_VERSION_TAG) if event is not None else None
    return None


def _provenance_moves(instance: dg.DagsterInstance, before: dict, after: dict, into: dict[str, set],
                      code: dict[str, set], asset: str) -> None:
    """The inputs whose data version moved between what ``before`` and ``after`` (states of ``asset``)
    read, into ``into`` (input -> partitions); the asset's code versions that moved, into ``code`` (as
    ``(before, after)`` pairs). An input's version is the one each materialization recorded, and where it
    read another record of the input (its recorded storage id), that record's version: Dagster records
    no version of its own for a partitioned source (a model's videos), only the record it read."""
    for p, a in after.items():
        b = before.get(p)
        if b is None or b.storage_id == a.storage_id:
            continue
        pa, pb = dg.DataProvenance.from_tags(a.event_tags), dg.DataProvenance.from_tags(b.event_tags)
        if pa is None or pb is None:
            continue
        for dep, v in pa.input_data_versions.items():
            moved = pb.input_data_versions.get(dep) != v
            ida, idb = pa.input_storage_ids.get(dep), pb.input_storage_ids.get(dep)
            if not moved and ida is not None and idb is not None and ida != idb:
                moved = _version_at(instance, dep, ida) != _version_at(instance, dep, idb)
            if moved:
                into.setdefault(dep.to_user_string(), set()).add(p)
        if pa.code_version != pb.code_version:
            code.setdefault(asset, set()).add((pb.code_version, pa.code_version))


def diff(instance: dg.DagsterInstance, storage: Storage, asset: str = "video_scores", a: str | None = None,
         b: str | None = None, top: int = 10) -> Diff:
    """Compare the state of ``asset`` after pass ``a`` with its state after pass ``b`` (default: the
    latest two passes). ``asset``: ``video_scores`` or ``criterion_scores``, whose tables hold scores."""
    history = materializations(instance, asset)
    order = passes(history)
    if a is None and b is None:
        if len(order) < 2:
            raise ValueError(f"{asset} was materialized by {len(order)} pass{'es' if len(order) != 1 else ''}: "
                             "a diff needs two (argus history lists them)")
        a, b = order[-2], order[-1]
    else:
        a, b = resolve(history, a or ""), resolve(history, b) if b else order[-1]
    bound_a, bound_b = bound_of(history, a), bound_of(history, b)
    state_a, state_b = state_after(history, bound_a), state_after(history, bound_b)
    tables_a, tables_b = _tables(state_a, history, storage), _tables(state_b, history, storage)
    missing = sorted(str(p) for p, t in {**tables_a, **tables_b}.items() if t is None
                     and (p in state_a and tables_a.get(p) is None or p in state_b and tables_b.get(p) is None))

    videos, crits = [], []
    video_asset = asset == "video_scores"
    crit_history = materializations(instance, "criterion_scores") if video_asset else history
    crit_a = _tables(state_after(crit_history, bound_a), crit_history, storage)
    crit_b = _tables(state_after(crit_history, bound_b), crit_history, storage)
    for p in sorted(set(crit_a) | set(crit_b), key=str):
        task, model = split_partition(p)
        if crit_b.get(p) is None:
            continue
        d = criterion_deltas(crit_a.get(p), crit_b[p]) if crit_a.get(p) is not None else None
        if d is not None and d.height:
            crits.append(d.with_columns(pl.lit(task).alias("task"), pl.lit(model).alias("model")))
    if video_asset:
        for p in sorted(set(tables_a) | set(tables_b), key=str):
            task, model = split_partition(p)
            if tables_b.get(p) is None or tables_a.get(p) is None:
                continue
            d = video_deltas(tables_a[p], tables_b[p])
            if d.height:
                videos.append(d.with_columns(pl.lit(task).alias("task"), pl.lit(model).alias("model")))
    by_size = pl.col("delta").abs()
    video_moves = (pl.concat(videos).sort(by_size, descending=True, nulls_last=True).head(top) if videos
                   else pl.DataFrame())
    crit_moves = (pl.concat(crits).sort(by_size, descending=True, nulls_last=True).head(top) if crits
                  else pl.DataFrame())

    def board(tables: dict) -> pl.DataFrame:
        parts = [t for t in tables.values() if t is not None and t.height]
        return build_leaderboard(pl.concat(parts, how="diagonal_relaxed")) if parts and video_asset else pl.DataFrame()

    cols = ["task", "model", "mean_final", "ci_low", "ci_high", "judge"]
    lb_a, lb_b = board(tables_a), board(tables_b)
    if lb_a.height or lb_b.height:
        empty = pl.DataFrame(schema={c: pl.String if c in ("task", "model", "judge") else pl.Float64 for c in cols})
        sel_a = (lb_a.select(cols) if lb_a.height else empty).rename({c: f"{c}_before" for c in cols[2:]})
        sel_b = (lb_b.select(cols) if lb_b.height else empty).rename({c: f"{c}_after" for c in cols[2:]})
        models = sel_a.join(sel_b, on=["task", "model"], how="full", coalesce=True).sort("task", "model")
    else:
        models = pl.DataFrame()

    rubric_history = materializations(instance, "rubrics")
    rubrics_changed = []
    for task in sorted({split_partition(p)[0] for p in set(state_b)} - {""}):
        ra = materialized_table(state_after(rubric_history, bound_a).get(task), storage,
                        latest=False) if rubric_history else None
        rb_state = state_after(rubric_history, bound_b).get(task)
        newest = max((s.storage_id for s in rubric_history if s.partition == task), default=None)
        rb = materialized_table(rb_state, storage, latest=rb_state is not None and rb_state.storage_id == newest)
        if ra is None or rb is None:
            continue
        old = {r["input_id"]: r["rubric_hash"] for r in ra.iter_rows(named=True)}
        new = {r["input_id"]: r["rubric_hash"] for r in rb.iter_rows(named=True)}
        rubrics_changed += [(task, i) for i in sorted(set(old) | set(new)) if old.get(i) != new.get(i)]

    moved: dict[str, set] = {}  # an input -> the partitions (of any asset) whose recorded version of it moved
    code: dict[str, set] = {}  # an asset -> its (code version before, after) pairs
    for name in ("input_instances", "rubrics", "candidate_videos", "criterion_evidence", "criterion_scores",
                 "video_scores"):
        h = history if name == asset else crit_history if name == "criterion_scores" else materializations(instance, name)
        if not h:
            continue
        _provenance_moves(instance, state_after(h, bound_a), state_after(h, bound_b), moved, code, name)
    inputs_changed = {k: len(v) for k, v in moved.items() if k in SOURCE_INPUTS}
    code_changed = {k: (", ".join(sorted({str(b) for b, _ in v})), ", ".join(sorted({str(a) for _, a in v})))
                    for k, v in code.items()}

    time_of = {s.command: s.time for s in history}
    # Why the later pass ran, as its runs recorded it (the plan's reasons, in the words the run used).
    reasons = list(dict.fromkeys(r.strip() for s in history + crit_history if s.command == b
                                 for r in s.reason.split("; ") if r.strip()))
    fp_a, fp_b = pass_fingerprint(crit_history, a), pass_fingerprint(crit_history, b)
    return Diff(asset, a, b, time_of.get(a, ""), time_of.get(b, ""), models, video_moves, crit_moves,
                (_judges(crit_a), _judges(crit_b)),  # the criterion rows name the judge's identity
                rubrics_changed, inputs_changed, missing, code_changed, reasons,
                (fingerprint_id(fp_a) if fp_a else None, fingerprint_id(fp_b) if fp_b else None),
                differences(fp_a, fp_b) if fp_a and fp_b else [])
