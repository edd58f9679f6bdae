"""What is stale: one answer for ``argus evaluate``, the candidate-store sensor and the nightly reconcile.

A partition is judged from what Dagster recorded with its materializations, whoever launched them
(the CLI, the UI, the sensor, a schedule):

* **missing**: an asset of the partition never materialized;
* **code**: an asset's code version (``dagster/code_version``) differs from the code's;
* **inputs**: an asset's input moved on: the upstream materialization it read
  (``dagster/input_event_pointer/<input>``) is no longer the latest, and the latest has another data
  version;
* **outside data**: what the graph reads from outside it, recorded in metadata by the asset that
  reads it: the task's bench files (``bench_files`` of ``input_instances``), the partition's video
  hashes (the ``candidate_videos`` table), and the evaluator (``evaluator`` of ``rubrics``,
  ``criterion_evidence``, ``criterion_scores``, ``video_scores``: a digest of the rubric generator,
  tools, judge and aggregation settings that shaped it);
* **transient failures**: the last run left work to retry (``n_retryable`` of ``rubrics``,
  ``tool_steps_failed`` of ``criterion_evidence``, ``n_unscored_retryable`` of ``criterion_scores``).

A row with a permanent error (an invalid manifest line, a 2-frame clip, a missing video) does not make
its partition stale: rerunning would give the same error.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import dagster as dg
import polars as pl

from argus_dagster.bench import task_location
from argus_dagster.candidate_store import video_hashes
from argus_dagster.media import SAMPLING_ID, file_digest
from argus_dagster.names import file_name
from argus_dagster.storage import current, is_remote, join

from .lineage import latest_record, stored_table

CODE_VERSION_TAG = "dagster/code_version"
DATA_VERSION_TAG = "dagster/data_version"
POINTER_TAG = "dagster/input_event_pointer/"


def _digest(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


# ---------------------------------------------------------------- what each asset records about the evaluator

def generator_digest(rubric_generator, rubric_vlm) -> str:
    return _digest({"generator": rubric_generator.identity(rubric_vlm)})


def evidence_digest(tools, vlm) -> str:
    from argus_dagster.evidence.tools.vlm_qa import qa_version

    versions = dict(tools.suite().versions())
    if vlm.configured:
        versions["vlm_qa"] = qa_version(vlm.backend, vlm.model_name())
    return _digest({"tools": versions, "vlm_only": tools.vlm_only, "web_search": tools.web_search,
                    "sampling": SAMPLING_ID})


def judge_digest(judge, vlm, tools) -> str:
    return _digest({"judge": judge.identity(vlm), "evidence": evidence_digest(tools, vlm)})


def scoring_digest(scoring) -> str:
    return _digest({"cap_alpha": scoring.cap_alpha})


def evaluator_digests(resources: dict) -> dict[str, str]:
    """The ``evaluator`` metadata each asset would record with these resources."""
    r = resources
    return {"rubrics": generator_digest(r["rubric_generator"], r["rubric_vlm"]),
            "criterion_evidence": evidence_digest(r["tools"], r["vlm"]),
            "criterion_scores": judge_digest(r["judge"], r["vlm"], r["tools"]),
            "video_scores": scoring_digest(r["scoring"])}


def _files_digest(folder: str | None, skip: str | None = None) -> dict[str, str]:
    """``{relative path: sha256}`` of the files under a folder or an ``s3://`` prefix (on S3 each
    object's sha256 is remembered by its ETag: nothing is downloaded twice)."""
    if folder is None:
        return {}
    storage = current()
    return {o.rel: storage.sha256(o.uri, o.token) if is_remote(o.uri) else file_digest(o.uri)
            for o in storage.list(folder) if skip is None or o.rel.split("/")[0] != skip}


def bench_files_digest(bench_dir: str | Path, task: str) -> str:
    """The content of a task's bench files (manifest, conditions; its ``rubrics/`` count as rubric
    files), as one hash; the bench is a folder or an ``s3://`` prefix."""
    return _digest(_files_digest(task_location(bench_dir, task), skip="rubrics"))


def generator_folder(frozen_root: str | Path, generator: dict) -> str:
    """Where the rubrics of one generator (backend and model) are frozen: profiles that share the
    generator share them (a folder or an ``s3://`` prefix, as ``frozen_root``)."""
    return join(frozen_root, file_name(f"{generator.get('backend')}-{generator.get('model')}"))


def rubric_files_digest(bench_dir: str | Path, frozen_dir: str | Path, task: str) -> str:
    """The content of a task's frozen rubrics: the bench's ``<TASK>/rubrics/`` and ``frozen_dir/<TASK>``."""
    folder = task_location(bench_dir, task)
    return _digest({"bench": _files_digest(join(folder, "rubrics") if folder else None),
                    "frozen": _files_digest(join(frozen_dir, task))})


# ---------------------------------------------------------------- the one question

def _meta(record, name: str, default=None):
    value = record.asset_materialization.metadata.get(name)
    return default if value is None else value.value


def _record_at(instance: dg.DagsterInstance, asset: str, storage_id: int):
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), storage_ids=[storage_id]), limit=1).records
    return records[0] if records else None


def _graph_status(instance: dg.DagsterInstance, assets: list, partitions: dict[str, str]) -> tuple[dict, str | None]:
    """The latest records of ``assets`` (by name) and the first reason from Dagster's own records
    (missing, code version, moved inputs) they are stale; ``partitions``: asset name -> partition key."""
    records = {}
    for a in assets:
        name = a.key.to_user_string()
        records[name] = latest_record(instance, name, partitions[name])
    absent = [n for n, r in records.items() if r is None]
    if absent:
        return records, "missing"
    for a in assets:
        name = a.key.to_user_string()
        ran_with = records[name].asset_materialization.tags.get(CODE_VERSION_TAG)
        if ran_with != a.code_versions_by_key[a.key]:
            return records, f"{name} code version {ran_with} -> {a.code_versions_by_key[a.key]}"
    for a in assets:
        name = a.key.to_user_string()
        for tag, pointer in records[name].asset_materialization.tags.items():
            if not tag.startswith(POINTER_TAG):
                continue
            upstream = tag[len(POINTER_TAG):]
            latest = records.get(upstream) or latest_record(instance, upstream, partitions.get(upstream))
            if latest is None or str(latest.storage_id) == pointer:
                continue
            read = _record_at(instance, upstream, int(pointer))
            if read is None or read.asset_materialization.partition != latest.asset_materialization.partition:
                # Dagster's pointer names another partition's materialization (runs of several partitions
                # at once): what matters is whether this partition's upstream came after this record.
                changed = latest.storage_id > records[name].storage_id
            else:
                changed = (read.asset_materialization.tags.get(DATA_VERSION_TAG)
                           != latest.asset_materialization.tags.get(DATA_VERSION_TAG))
            if changed:
                return records, f"{upstream} changed since {name} read it"
    return records, None


def leaderboard_status(instance: dg.DagsterInstance) -> str | None:
    """``"missing"``, ``"stale: <why>"`` or None: whether the leaderboard follows every ``video_scores``
    partition materialized so far, with the code it has now."""
    from .leaderboard import leaderboard

    record = latest_record(instance, "leaderboard")
    if record is None:
        return "missing"
    ran_with = record.asset_materialization.tags.get(CODE_VERSION_TAG)
    if ran_with != leaderboard.code_versions_by_key[leaderboard.key]:
        return f"stale: leaderboard code version {ran_with} -> {leaderboard.code_versions_by_key[leaderboard.key]}"
    newer = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("video_scores"), after_storage_id=record.storage_id), limit=1)
    return "stale: video_scores materialized since" if newer.records else None


def _videos_changed(record, hashes: dict[str, str]) -> bool:
    """Whether a video of an input the stored ``candidate_videos`` table lists was added, removed or
    changed, a sample included (files of inputs the manifest does not list are not the graph's
    concern). ``hashes``: :func:`~argus_dagster.candidate_store.partition_hashes`."""
    df = stored_table(record)
    if df is None:
        return True
    if "sample" not in df.columns:  # stored before samples were read: single videos
        df = df.with_columns(pl.lit("").alias("sample"))
    stored = {(r["input_id"], r["sample"] or ""): r["sha256"] for r in df.iter_rows(named=True)}
    ids = {iid for iid, _ in stored}
    now = video_hashes(hashes, ids)
    if any(now.get(key) != digest for key, digest in stored.items()):
        return True
    return any(key not in stored for key in now if key[0] in ids)


def task_status(instance: dg.DagsterInstance, task: str, bench_dir: str | Path, frozen_dir: str | Path,
                digests: dict[str, str]) -> str | None:
    """``"missing"``, ``"stale: <why>"`` or None (up to date) for a task's inputs and rubrics;
    ``frozen_dir``: the generator's folder of frozen rubrics (:func:`generator_folder`)."""
    from . import TASK_ASSETS

    records, why = _graph_status(instance, TASK_ASSETS, {a.key.to_user_string(): task for a in TASK_ASSETS})
    if why == "missing":
        return why
    if why:
        return f"stale: {why}"
    if _meta(records["input_instances"], "bench_files") != bench_files_digest(bench_dir, task):
        return "stale: the task's bench files changed"
    if _meta(records["rubrics"], "evaluator") != digests["rubrics"]:
        return "stale: another rubric generator"
    if _meta(records["rubrics"], "rubric_files") != rubric_files_digest(bench_dir, frozen_dir, task):
        return "stale: the task's frozen rubric files changed"
    retry = _meta(records["rubrics"], "n_retryable", 0)
    if retry:
        return f"stale: {retry} rubrics could not be generated (retried)"
    return None


def partition_status(instance: dg.DagsterInstance, task: str, model: str, hashes: dict[str, str] | None,
                     digests: dict[str, str]) -> str | None:
    """``"missing"``, ``"stale: <why>"`` or None (up to date) for a task x model partition; ``hashes``:
    ``{input_id: sha256}`` of its videos now (None: not compared)."""
    from . import CANDIDATE_ASSETS, TASK_ASSETS

    key = str(dg.MultiPartitionKey({"task": task, "model": model}))
    partitions = {a.key.to_user_string(): key for a in CANDIDATE_ASSETS}
    partitions.update({a.key.to_user_string(): task for a in TASK_ASSETS})
    records, why = _graph_status(instance, CANDIDATE_ASSETS, partitions)
    if why == "missing":
        return why
    if why:
        return f"stale: {why}"
    if hashes is not None and _videos_changed(records["candidate_videos"], hashes):
        return "stale: candidate videos changed"
    for asset in ("criterion_evidence", "criterion_scores", "video_scores"):
        if _meta(records[asset], "evaluator") != digests[asset]:
            return f"stale: {asset} was made by another evaluator configuration"
    retry = _meta(records["criterion_evidence"], "tool_steps_failed", 0) + _meta(
        records["criterion_scores"], "n_unscored_retryable", 0)
    if retry:
        return f"stale: {retry} failed tool steps or unanswered judgments (retried)"
    return None


IN_FLIGHT = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
             dg.DagsterRunStatus.STARTED]


def in_flight_partitions(instance: dg.DagsterInstance) -> set[str]:
    """Partitions (``T2V`` or ``model|T2V`` keys) that a queued or running run is materializing, whoever
    launched it (a UI backfill, the sensor, the reconcile, argus evaluate), a run of a range included:
    being brought up to date, so not requested again while it runs."""
    from .partitions import keys_of_run

    records = instance.get_run_records(filters=dg.RunsFilter(statuses=IN_FLIGHT))
    return {k for r in records for k in keys_of_run(r.dagster_run.tags, instance)}
