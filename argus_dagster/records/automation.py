"""What the automation conditions (:mod:`argus_dagster.assets.automation`) and the command line read of
the instance's records: the latest record of each partition (:class:`LatestRecords`, one reading shared
by every condition of an evaluation), what each run queued or in flight planned, the inputs that moved
since a partition's latest materialization read them, the work left to retry and its back-off, and the
passes in flight. A state of the records, not a transition: whoever asks gets the same answer.
"""

from __future__ import annotations

import contextlib
import contextvars
import weakref
from typing import Any, cast

import dagster as dg

from argus_dagster.infra.environment import Backoff, retry_backoff
from argus_dagster.records import DATA_VERSION_TAG

# The materialization metadata each asset records of the work its run left to retry.
RETRY_METADATA = {"rubrics": ("n_retryable",), "criterion_evidence": ("tool_steps_failed",),
                  "criterion_scores": ("n_unscored_retryable",)}
# How many materializations of the partition in a row, this one included, left work to retry (0: none left).
RETRY_ROUND = "retry_round"


class LatestRecords:
    """The latest materialization (or, for a source, observation) of each partition of an asset, as
    the instance recorded it: at most two queries per asset, whatever its number of partitions."""

    def __init__(self, instance: dg.DagsterInstance):
        self.instance = instance
        self._latest: dict[tuple[dg.AssetKey, bool], dict[str | None, dg.EventLogRecord]] = {}
        self._in_flight: set | None = None

    def in_flight(self) -> set[tuple[str, str | None]]:
        """``(asset, partition)`` planned by a run queued or in flight (:func:`planned_in_flight`)."""
        if self._in_flight is None:
            self._in_flight = set().union(*planned_in_flight(self.instance).values())
        return self._in_flight

    # The one process cache of readings: (the instance, weakly; its latest storage id; the reading).
    # Dagster evaluates the conditions of every asset of one sensor tick in one process, each asking for
    # the same records: they share one reading. Bound: one reading, replaced as soon as anything is
    # stored (or another instance asks).
    _shared: tuple = (None, None, None)

    @classmethod
    def _at(cls, instance: dg.DagsterInstance, max_storage_id: int | None) -> "LatestRecords":
        held, at, records = cls._shared
        if held is None or held() is not instance or at != max_storage_id:
            records = cls(instance)
            cls._shared = (weakref.ref(instance), max_storage_id, records)
        return records

    @classmethod
    def of(cls, context: dg.AutomationContext) -> "LatestRecords":
        """One reading per evaluation, shared by every condition of every asset it evaluates (the
        records cannot move under it: it reads up to the evaluation's latest storage id)."""
        return cls._at(context.asset_graph_view.instance, context.max_storage_id)

    @classmethod
    def current(cls, instance: dg.DagsterInstance) -> "LatestRecords":
        """The reading of the instance as it is now: the same one an evaluation started before anything
        else is stored shares (the back-offs a plan reads, then the conditions, then the reasons)."""
        return cls._at(instance, instance.event_log_storage.get_maximum_record_id())

    def latest(self, key: dg.AssetKey, observed: bool = False,
               partitioned: bool | None = None) -> dict[str | None, dg.EventLogRecord]:
        """``{partition: record}`` (partition None for an unpartitioned asset). ``partitioned``: whether
        the asset is (True: no query for an unpartitioned record when no partition has one)."""
        if (key, observed) not in self._latest:
            kind = dg.DagsterEventType.ASSET_OBSERVATION if observed else dg.DagsterEventType.ASSET_MATERIALIZATION
            ids = dict(self.instance.event_log_storage.get_latest_storage_id_by_partition(key, kind))
            fetch = self.instance.fetch_observations if observed else self.instance.fetch_materializations
            out: dict[str | None, dg.EventLogRecord] = {}
            if ids:
                for chunk in range(0, len(ids), 500):
                    part = list(ids.values())[chunk:chunk + 500]
                    for r in fetch(dg.AssetRecordsFilter(asset_key=key, storage_ids=part), limit=len(part)).records:
                        event = r.asset_observation if observed else r.asset_materialization
                        assert event is not None  # a record fetched as an observation (materialization) holds one
                        out[str(event.partition)] = r
            unpartitioned = (fetch(dg.AssetRecordsFilter(asset_key=key), limit=1).records
                             if not ids and not partitioned else [])
            for r in unpartitioned:
                event = r.asset_observation if observed else r.asset_materialization
                assert event is not None  # a record fetched as an observation (materialization) holds one
                if event.partition is None:
                    out[None] = r
            self._latest[(key, observed)] = out
        return self._latest[(key, observed)]

    def moved_after(self, key: dg.AssetKey, partition: str | None, observed: bool, cursor: int | None) -> bool:
        """Whether the latest record of a partition came after ``cursor`` with another data version
        than the record at ``cursor`` had (Dagster's test of an updated partitioned dependency)."""
        latest = self.latest(key, observed).get(partition)
        if latest is None or (cursor is not None and latest.storage_id <= cursor):
            return False
        before = (self.instance.get_latest_data_version_record(key, observed, partition, before_cursor=cursor + 1)
                  if cursor is not None else None)
        was = event_of(before).tags.get(DATA_VERSION_TAG) if before else None
        return event_of(latest).tags.get(DATA_VERSION_TAG) != was


RUNS_IN_FLIGHT = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
                  dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]


def planned_by(instance: dg.DagsterInstance, run_id: str) -> set[tuple[str, str | None]]:
    """``(asset, partition)`` of every materialization a run planned when it was created (Dagster's
    planned events: a partition, or a range's subset), whoever launched it."""
    out: set[tuple[str, str | None]] = set()
    cursor = None
    while True:
        got = instance.get_records_for_run(run_id, cursor=cursor, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED,
                                           limit=1000)
        for record in got.records:
            event = record.event_log_entry.dagster_event
            assert event is not None and record.asset_key is not None  # a planned materialization's record has both
            # AssetMaterializationPlannedData (its partition, or a range's subset): not in Dagster's public API.
            planned = cast(Any, event.event_specific_data)
            asset = record.asset_key.to_user_string()
            subset = getattr(planned, "partitions_subset", None)
            if subset is not None:
                out |= {(asset, str(p)) for p in subset.get_partition_keys()}
            else:
                out.add((asset, planned.partition))
        if not got.has_more:
            return out
        cursor = got.cursor


def planned_in_flight(instance: dg.DagsterInstance, statuses=None) -> dict[str, set[tuple[str, str | None]]]:
    """``{run id: its planned (asset, partition)s}`` for every run queued or in flight (``statuses``:
    those counted), launched by anyone: a range run's whole range, which Dagster's own in-progress
    test does not always see."""
    return {r.run_id: planned_by(instance, r.run_id)
            for r in instance.get_runs(dg.RunsFilter(statuses=statuses or RUNS_IN_FLIGHT))}


def event_of(record):
    return getattr(record, "asset_materialization", None) or record.asset_observation


def dep_partition(key_partitions, dep_partitions, partition: str | None) -> str | None:
    """The partition of a dependency that ``partition`` reads: the same key, its task (a task-partitioned
    dependency of a task x model asset), or None (an unpartitioned dependency)."""
    if dep_partitions is None or partition is None:
        return None
    if isinstance(key_partitions, dg.MultiPartitionsDefinition) and not isinstance(dep_partitions,
                                                                                  dg.MultiPartitionsDefinition):
        return key_partitions.get_partition_key_from_str(partition).keys_by_dimension["task"]
    return partition


def latest_records(instance: dg.DagsterInstance) -> LatestRecords:
    """A reading of the instance's latest records, for :func:`changed_inputs` outside an evaluation."""
    return LatestRecords.current(instance)


def changed_inputs(graph, key: dg.AssetKey, partitions_def, records: LatestRecords) -> dict[str | None, list[str]]:
    """Per partition of ``key``, the inputs whose data version moved since its latest materialization
    read them, by Dagster's own rule (what the UI's stale status says): an unpartitioned input's
    data version now against the one recorded; a partition of a partitioned input, its latest record
    after the recorded event pointer against its record at that pointer (an unpartitioned asset reads
    every partition of a partitioned input). ``graph``: an asset graph (the automation context's or
    the definitions')."""
    mine = records.latest(key, partitioned=partitions_def is not None)
    out: dict[str | None, list[str]] = {}
    for dep in sorted(graph.get(key).parent_keys, key=lambda k: k.to_user_string()):
        node = graph.get(dep)
        source = node.is_observable and not node.is_materializable
        latest = records.latest(dep, observed=source, partitioned=node.partitions_def is not None)
        for p, r in mine.items():
            read = dg.DataProvenance.from_tags(event_of(r).tags)
            if read is None:
                continue
            if node.partitions_def is None:
                upstream = latest.get(None)
                now = event_of(upstream).tags.get(DATA_VERSION_TAG) if upstream else None
                was = read.input_data_versions.get(dep)
                moved = now is not None and (was is None or was.value != now)
            else:
                cursor = read.input_storage_ids.get(dep)
                if partitions_def is None:
                    parts = list(latest)
                else:
                    parts = [dep_partition(partitions_def, node.partitions_def, p)]
                moved = any(records.moved_after(dep, q, source, cursor) for q in parts)
            if moved:
                out.setdefault(p, []).append(dep.to_user_string())
    return out


def work_left(asset: str, metadata) -> int:
    """The work a materialization of ``asset`` left to retry, by its :data:`RETRY_METADATA` counts."""
    return sum(int(metadata[n].value or 0) for n in RETRY_METADATA.get(asset, ()) if n in metadata)


def round_of(asset: str, metadata) -> int:
    """A materialization's :data:`RETRY_ROUND` (1 for one that left work and was recorded without it)."""
    if not work_left(asset, metadata):
        return 0
    return int(metadata[RETRY_ROUND].value or 1) if RETRY_ROUND in metadata else 1


def retries_due(records: "LatestRecords", key: dg.AssetKey, backoff: Backoff | None = None) -> dict[str | None, float]:
    """``{partition: when it may be retried}`` (a POSIX time) for the partitions of ``key`` whose latest
    materialization left work to retry: its time plus the back-off of its retry round."""
    asset = key.to_user_string()
    if asset not in RETRY_METADATA:
        return {}
    backoff = backoff or retry_backoff()
    out = {}
    for p, r in records.latest(key, partitioned=True).items():  # every asset that leaves work is partitioned
        n = round_of(asset, event_of(r).metadata)
        if n:
            out[p] = r.timestamp + backoff.delay_s(n)
    return out


def retries_waiting(instance: dg.DagsterInstance, now: float) -> dict[tuple[str, str | None], float]:
    """``{(asset, partition): when it may be retried}`` for the work left to retry whose back-off is not
    over at ``now`` (what the automation sensor holds back)."""
    records, backoff = LatestRecords.current(instance), retry_backoff()
    return {(asset, p): due for asset in RETRY_METADATA
            for p, due in retries_due(records, dg.AssetKey(asset), backoff).items() if due > now}


# The job that carries a whole pass in one run (the command line's loop, in a run worker:
# :mod:`argus_dagster.client.pass_job`): the candidate-store sensor requests it when something changed,
# and a person launches it from the UI.
PASS_JOB = "evaluate"
PASS_IN_FLIGHT = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
                  dg.DagsterRunStatus.STARTED]
_ASKED_BY_A_PASS: contextvars.ContextVar[bool] = contextvars.ContextVar("argus_asked_by_a_pass", default=False)


def a_pass_asks() -> bool:
    """Whether the conditions are asked by a pass itself (within :func:`asked_by_a_pass`)."""
    return _ASKED_BY_A_PASS.get()


@contextlib.contextmanager
def asked_by_a_pass():
    """Within it, the conditions are asked by a pass itself (``argus evaluate``, or the run of the
    :data:`PASS_JOB`): a pass in flight does not hold back another (they wait for each other's runs
    partition by partition, :func:`argus_dagster.client.runs.wait_for_writers`)."""
    token = _ASKED_BY_A_PASS.set(True)
    try:
        yield
    finally:
        _ASKED_BY_A_PASS.reset(token)


def passes_in_flight(instance: dg.DagsterInstance) -> list[str]:
    """The run ids of the :data:`PASS_JOB` runs queued or in flight on ``instance``."""
    return [r.dagster_run.run_id for r in
            instance.get_run_records(dg.RunsFilter(job_name=PASS_JOB, statuses=PASS_IN_FLIGHT), limit=20)]
