"""Why Dagster requested each partition, in words: which parts of its automation condition
(:mod:`assets.automation`) were true (new, new code, the inputs that moved, an input requested in the
same run, the work its last run left to retry), read from the condition evaluation's result and the
instance's records (the evaluator parts' observations, the stored ``input_instances``).
"""

from __future__ import annotations

import dagster as dg

from argus_dagster.infra.tables import recorded_table
from argus_dagster.method.bench import read_task_at
from argus_dagster.outputs.history_words import EVALUATOR_PARTS, INPUT_WORDS, RETRIED, input_changes, where
from argus_dagster.records import DATA_VERSION_TAG
from argus_dagster.records.automation import RETRY_METADATA, changed_inputs, latest_records
from argus_dagster.records.lineage import latest_record


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
                assert ev is not None  # fetch_observations returns observation records
                v, label = (ev.tags or {}).get(DATA_VERSION_TAG), ev.metadata.get("evaluator")
                if v and label is not None and v not in found:
                    found[v] = str(label.value)
            self._by_part[part] = found
        return self._by_part[part].get(version)


def _event_of(record):
    return getattr(record, "asset_materialization", None) or record.asset_observation


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


def _keys_of(subset) -> set:
    return set(subset.expensively_compute_partition_keys()) if subset.is_partitioned else (
        {None} if subset.get_internal_bool_value() else set())


def _input_reasons(instance: dg.DagsterInstance, defs: dg.Definitions, task: str) -> list[tuple[str, str]]:
    """The inputs of ``task`` whose manifest row moved since ``input_instances`` stored them, in words
    (:func:`~argus_dagster.outputs.history_words.input_changes`); empty when that cannot be said."""
    assert defs.resources is not None  # build_definitions always binds the evaluation's resources
    storage = defs.resources["storage"].storage()
    stored = recorded_table(latest_record(instance, "input_instances", task), storage)
    try:
        now = read_task_at(defs.resources["bench"].bench_path(), task, storage)
    except Exception:  # the bench unreadable now: the run that reads it says why, on its rows
        return []
    return input_changes(task, stored.to_dicts() if stored is not None else None, now)


def requested_reasons(result, instance: dg.DagsterInstance, defs: dg.Definitions,
         inputs_of: dict[str, set] | None = None) -> dict[tuple[str, str | None], list[str]]:
    """Per requested (asset, partition), which of its condition's parts were true, in words: new
    (missing), new code, the inputs that moved, an input requested in the same run, the work its
    last run left to retry."""
    graph, records, labels = defs.resolve_asset_graph(), latest_records(instance), Labels(instance)
    out: dict[tuple[str, str | None], list[str]] = {}

    def add(asset: str, keys: set, text: str) -> None:
        for k in keys:
            out.setdefault((asset, str(k) if k is not None else None), []).append(text)

    def walk(r, node, requested: set) -> None:
        asset = r.key.to_user_string()
        name, label = node.condition.name, node.condition.get_label()
        keys = _keys_of(node.true_subset) & requested
        if keys and name == "missing":
            add(asset, keys, "new")
        elif keys and name == "new_code":
            add(asset, keys, "new code")
        elif keys and name == "inputs_changed":
            pdef = graph.get(r.key).partitions_def
            moved = changed_inputs(graph, r.key, pdef, records)
            mine = records.latest(r.key, partitioned=pdef is not None)
            for k in keys:
                p = str(k) if k is not None else None
                for dep in moved.get(p, []):
                    if dep == "bench_files" and p is not None and "|" not in p and inputs_of is not None:
                        said = _input_reasons(instance, defs, p)
                        for text, input_id in said:
                            add(asset, {k}, text)
                            inputs_of.setdefault(text, set()).add((p, input_id))
                        if said:
                            continue
                    source = graph.get(dg.AssetKey(dep))
                    latest = records.latest(dg.AssetKey(dep), observed=source.is_observable and not source.is_materializable,
                                            partitioned=source.partitions_def is not None).get(None)
                    add(asset, {k}, change_text(dep, p, mine.get(p), latest, labels))
        elif keys and label == "an input will be requested":
            add(asset, keys, "an input runs first")
        elif keys and name == "retryable_work_left":
            for k in keys:
                add(asset, {k}, _retry_text(instance, asset, k))
        if label in ("any_deps_missing", "any_deps_in_progress", "an input will be requested"):
            return
        for child in node.child_results:
            walk(r, child, requested)

    for r in result.results:
        walk(r, r, _keys_of(r.true_subset))
    return out


def _retry_text(instance: dg.DagsterInstance, asset: str, key) -> str:
    record = latest_record(instance, asset, str(key) if key is not None else None)
    md = record.asset_materialization.metadata if record else {}
    n = sum(int(md[m].value or 0) for m in RETRY_METADATA.get(asset, ()) if m in md)
    return f"{n} {RETRIED.get(asset, 'failures')} retried"
