"""Every materialization of an asset, and what moved between two of them (``argus history``, ``argus diff``).

Dagster's records are the history: each materialization's time, run, data version and the table the IO
manager kept for it (``stored_version``, :class:`resources.storage.StorageIOManager`); the run's tags
say why it ran (:data:`REASON_TAG`, the plan's reasons) and which command launched it
(:data:`COMMAND_TAG`: the runs of one ``argus evaluate`` are one *pass*). The state of an asset after
a pass is, per partition, its latest materialization up to that pass's last one; a diff compares two
such states: per model the mean final score and its interval, the videos and criteria that moved
most, and what changed between them (the judge, the rubrics, the inputs by their data versions).
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from datetime import datetime, timezone

import dagster as dg
import polars as pl

from argus_dagster.outputs.deltas import criterion_deltas, video_deltas
from argus_dagster.infra.storage import Storage

COMMAND_TAG = "argus/command"  # the argus evaluate (or demo) whose runs these are, one id per command
REASON_TAG = "argus/reason"  # why the run was requested, in words (the plan's reasons)
EVALUATOR_TAG = "argus/evaluator"  # the judge the run's evaluation was configured with
DATA_VERSION_TAG = "dagster/data_version"
MAX_TAG = 2000  # characters a reason tag keeps


def evaluator_label(identity: str | None) -> str:
    """A judge's identity in a person's words: ``vlm/openai/Qwen2.5-VL-7B/judge-4`` is
    ``openai:Qwen2.5-VL-7B``, ``evidence-only/5`` is ``evidence-only``; a rubric generator's identity
    (``{"backend", "model", ...}``) is ``backend:model`` (``offline`` for the rules)."""
    if isinstance(identity, dict):
        backend, model = identity.get("backend"), identity.get("model")
        return "offline" if backend == "offline" else f"{backend}:{model}"
    text = str(identity or "")
    if text.startswith("vlm/"):
        parts = text.split("/")
        return f"{parts[1]}:{'/'.join(parts[2:-1])}" if len(parts) >= 4 else text
    return text.split("/")[0] if text else "none"


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
    records, cursor = [], None
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
        md, part = m.metadata, str(m.partition) if m.partition is not None else None
        kept = md.get("stored_version") or None
        if kept is None and "stored_versions" in md:
            kept = (md["stored_versions"].value or {}).get(part)
        table = kept.value if hasattr(kept, "value") else kept
        if table is None:
            path = md.get("path")
            table = path.value if path is not None else ((md["paths"].value or {}).get(part) if "paths" in md else None)
        out.append(Stored(r.storage_id, r.timestamp, r.run_id, part, m.tags.get(DATA_VERSION_TAG, "") if m.tags else "",
                          str(table) if table else None, kept is not None, tags.get(r.run_id, {}), dict(m.tags or {})))
    return out


def passes(history: list[Stored]) -> list[str]:
    """The passes (commands, or runs launched elsewhere) that materialized the asset, oldest first."""
    last: dict[str, int] = {}
    for s in history:
        last[s.command] = max(last.get(s.command, 0), s.storage_id)
    return sorted(last, key=last.get)


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


def read_table(stored: Stored | None, storage: Storage, latest: bool = False) -> pl.DataFrame | None:
    """The table a materialization stored: its kept version, or (for the latest one only, which the
    next materialization has not replaced yet) the path recorded; None when it is gone."""
    if stored is None or stored.table is None or not (stored.kept or latest):
        return None
    try:
        return pl.read_parquet(io.BytesIO(storage.read_bytes(stored.table)))
    except Exception:  # pruned by retention, or removed by hand
        return None


def _tables(state: dict, history: list[Stored], storage: Storage) -> dict:
    newest = {s.partition: s.storage_id for s in history}
    return {p: read_table(s, storage, latest=newest.get(p) == s.storage_id) for p, s in state.items()}


def _split(partition: str | None) -> tuple[str, str]:
    """``(task, model)`` of a task x model key (``model|task``), ``(task, "")`` of a task key."""
    if partition and "|" in partition:
        model, task = partition.split("|", 1)
        return task, model
    return partition or "", ""


@dataclass
class Diff:
    """Two passes of an asset compared (:func:`diff`)."""

    asset: str
    before: str
    after: str
    before_time: str
    after_time: str
    models: pl.DataFrame  # task, model, mean_before, ci_low_before, ci_high_before, judge_before, *_after
    videos: pl.DataFrame  # task, model, input_id, sample, final_before, final_after, delta, change
    criteria: pl.DataFrame  # task, model, input_id, sample, criterion_id, before, after, delta, change
    judges: tuple[list[str], list[str]]
    rubrics_changed: list[tuple[str, str]]  # (task, input_id)
    inputs_changed: dict[str, int]  # input asset -> partitions whose recorded data version moved
    missing: list[str]  # partitions whose table is no longer kept


def _judges(tables: dict) -> list[str]:
    out = set()
    for df in tables.values():
        if df is not None and "judge" in df.columns:
            out |= {j.strip() for v in df["judge"].drop_nulls().to_list() for j in str(v).split(",") if j.strip()}
    return sorted(out)


def _provenance_moves(before: dict, after: dict, into: dict[str, set]) -> None:
    for p, a in after.items():
        b = before.get(p)
        if b is None or b.storage_id == a.storage_id:
            continue
        pa, pb = dg.DataProvenance.from_tags(a.event_tags), dg.DataProvenance.from_tags(b.event_tags)
        if pa is None or pb is None:
            continue
        for dep, v in pa.input_data_versions.items():
            if pb.input_data_versions.get(dep) != v:
                into.setdefault(dep.to_user_string(), set()).add(p)


def diff(instance: dg.DagsterInstance, storage: Storage, asset: str = "video_scores", a: str | None = None,
         b: str | None = None, top: int = 10) -> Diff:
    """Compare the state of ``asset`` after pass ``a`` with its state after pass ``b`` (default: the
    latest two passes). ``asset``: ``video_scores`` or ``criterion_scores``, whose tables hold scores."""
    from argus_dagster.method.leaderboard import build_leaderboard

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
        task, model = _split(p)
        if crit_b.get(p) is None:
            continue
        d = criterion_deltas(crit_a.get(p), crit_b[p]) if crit_a.get(p) is not None else None
        if d is not None and d.height:
            crits.append(d.with_columns(pl.lit(task).alias("task"), pl.lit(model).alias("model")))
    if video_asset:
        for p in sorted(set(tables_a) | set(tables_b), key=str):
            task, model = _split(p)
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
    for task in sorted({_split(p)[0] for p in set(state_b)} - {""}):
        ra = read_table(state_after(rubric_history, bound_a).get(task), storage,
                        latest=False) if rubric_history else None
        rb_state = state_after(rubric_history, bound_b).get(task)
        newest = max((s.storage_id for s in rubric_history if s.partition == task), default=None)
        rb = read_table(rb_state, storage, latest=rb_state is not None and rb_state.storage_id == newest)
        if ra is None or rb is None:
            continue
        old = {r["input_id"]: r["rubric_hash"] for r in ra.iter_rows(named=True)}
        new = {r["input_id"]: r["rubric_hash"] for r in rb.iter_rows(named=True)}
        rubrics_changed += [(task, i) for i in sorted(set(old) | set(new)) if old.get(i) != new.get(i)]

    moved: dict[str, set] = {}  # an input -> the partitions (of any asset) whose recorded version of it moved
    for name in ("input_instances", "rubrics", "candidate_videos", "criterion_evidence", "criterion_scores",
                 "video_scores"):
        h = history if name == asset else crit_history if name == "criterion_scores" else materializations(instance, name)
        if not h:
            continue
        _provenance_moves(state_after(h, bound_a), state_after(h, bound_b), moved)
    inputs_changed = {k: len(v) for k, v in moved.items() if k in SOURCE_INPUTS}

    time_of = {s.command: s.time for s in history}
    return Diff(asset, a, b, time_of.get(a, ""), time_of.get(b, ""), models, video_moves, crit_moves,
                (_judges(crit_a), _judges(crit_b)),  # the criterion rows name the judge's identity
                rubrics_changed, inputs_changed, missing)


# What "inputs" means to a person reading a diff: the sources and the rubrics (an intermediate table's
# new data version follows from these).
SOURCE_INPUTS = ("candidate_files", "bench_files", "rubric_files", "rubrics", "rubric_generator_config",
                 "tool_suite_config", "judge_config", "aggregation_config")


# ---------------------------------------------------------------- why a partition runs again, in words

EVALUATOR_PARTS = {"judge_config": "judge", "rubric_generator_config": "rubric generator",
                   "tool_suite_config": "tools", "aggregation_config": "aggregation"}
INPUT_WORDS = {"bench_files": "bench files (manifest, conditions) of", "rubric_files": "frozen rubrics of",
               "candidate_files": "videos of"}


class Labels:
    """The evaluator parts' observations in words (their ``evaluator`` metadata), by data version."""

    def __init__(self, instance: dg.DagsterInstance):
        self.instance = instance
        self._by_part: dict[str, dict[str, str]] = {}

    def of(self, part: str, version: str | None) -> str | None:
        if version is None:
            return None
        if part not in self._by_part:
            found: dict[str, str] = {}
            got = self.instance.fetch_observations(dg.AssetRecordsFilter(asset_key=dg.AssetKey(part)), limit=500)
            for r in got.records:  # newest first: a version's latest words
                ev = r.asset_observation
                v, label = (ev.tags or {}).get(DATA_VERSION_TAG), ev.metadata.get("evaluator")
                if v and label is not None and v not in found:
                    found[v] = str(label.value)
            self._by_part[part] = found
        return self._by_part[part].get(version)


def _event_of(record):
    return getattr(record, "asset_materialization", None) or record.asset_observation


def where(partition: str | None) -> str:
    task, model = _split(partition)
    return f"{task} x {model}" if model else task


def change_text(dep: str, partition: str | None, record, latest_dep, labels: Labels) -> str:
    """Why an input that moved makes ``partition`` run again, in words: an evaluator part named before
    and after ("judge: evidence-only -> openai:Qwen2.5-VL-7B"), or the input and the partition.
    ``record``: the partition's latest materialization (what it read); ``latest_dep``: the input's
    latest record (for an evaluator part, its latest observation)."""
    if dep in EVALUATOR_PARTS:
        prov = dg.DataProvenance.from_tags(_event_of(record).tags or {}) if record is not None else None
        was = prov.input_data_versions.get(dg.AssetKey(dep)) if prov is not None else None
        now = (_event_of(latest_dep).tags or {}).get(DATA_VERSION_TAG) if latest_dep is not None else None
        before, after = labels.of(dep, was.value if was is not None else None), labels.of(dep, now)
        if before and after and before != after:
            return f"{EVALUATOR_PARTS[dep]}: {before} -> {after}"
        if after:
            return f"{EVALUATOR_PARTS[dep]}: {after} (another version)"
        return f"{EVALUATOR_PARTS[dep]} changed"
    place = where(partition)
    if dep in INPUT_WORDS:
        return f"{INPUT_WORDS[dep]} {place} changed"
    return f"{dep} of {place} changed" if place else f"{dep} changed"


def input_changes(task: str, before: list[dict] | None, now: list[dict]) -> list[tuple[str, str]]:
    """``(reason, input_id)`` for each input of a task whose manifest row moved between the stored
    ``input_instances`` rows (``before``) and the bench's rows now: "prompt of T2V/apple changed",
    "conditions of T2V/apple changed" (its media), "input T2V/apple added" or "removed"."""
    if before is None:
        return []
    was, is_ = {r["input_id"]: r for r in before}, {r["input_id"]: r for r in now}
    out = []
    for i in sorted(set(was) | set(is_), key=str):
        if i not in was:
            out.append((f"input {task}/{i} added", i))
        elif i not in is_:
            out.append((f"input {task}/{i} removed", i))
        elif (was[i].get("content_hash"), was[i].get("error")) != (is_[i].get("content_hash"), is_[i].get("error")):
            what = "prompt" if was[i].get("prompt") != is_[i].get("prompt") else "conditions"
            out.append((f"{what} of {task}/{i} changed", i))
    return out


def reason_lines(why: dict[tuple[str, str | None], list[str]], requested: dict[str, set],
                 n_videos: dict[tuple[str, str], int], inputs_of: dict[str, set] | None = None,
                 per_input: dict[tuple[str, str], int] | None = None) -> list[str]:
    """Each reason a plan gives, with what it touches: ``judge: evidence-only -> openai:X: 9 partitions,
    32 videos`` (``why``: per (asset, partition) its reasons; ``requested``: the plan's partitions per
    asset; ``n_videos``: per (task, model) its videos). A reason about inputs (``inputs_of``: its
    ``(task, input_id)``s) counts them and their videos (``per_input``): ``prompt of T2V/apple
    changed: 1 input, 5 videos``. The lookahead ("an input runs first") is not a reason of its own."""
    inputs_of, per_input = inputs_of or {}, per_input or {}
    touched: dict[str, tuple[set, set]] = {}
    for asset, parts in requested.items():
        for p in parts:
            if p is None:
                continue
            for text in why.get((asset, p), []):
                if text == "an input runs first":
                    continue
                tasks, keys = touched.setdefault(text, (set(), set()))
                task, model = _split(p)
                (keys if model else tasks).add((task, model) if model else task)
    lines = []
    for text, (tasks, keys) in touched.items():
        if text in inputs_of:
            n = sum(per_input.get(k, 0) for k in inputs_of[text])
            k = len(inputs_of[text])
            lines.append(f"{text}: {k} input{'s' if k != 1 else ''}, {n} video{'s' if n != 1 else ''}")
            continue
        videos = {k for k in n_videos if k in keys or k[0] in tasks}
        counts = ([f"{len(tasks)} task{'s' if len(tasks) != 1 else ''}"] if tasks else []) + (
            [f"{len(keys)} partition{'s' if len(keys) != 1 else ''}"] if keys else [])
        n = sum(n_videos[k] for k in videos)
        lines.append(f"{text}: {', '.join(counts)}, {n} video{'s' if n != 1 else ''}")
    return lines
