"""What to run, as declarative automation conditions: one question, asked of Dagster's own records.

A partition of the VideoArgus graph is run when

* it is **missing** (never materialized: a new model, a new task),
* its latest materialization was made by another **code version**,
* an **input moved**: the data version a source (:mod:`assets.sources`) or an upstream asset has now
  differs from the one the latest materialization read (a replaced video, an edited prompt or
  rubric, a tool's new version, another judge: Dagster's own "upstream data version changed"), or
* its last materialization **left work to retry** (:class:`RetryableWorkLeft`: a rubric the generator
  failed to make, a tool step that raised, a judgment the VLM did not answer) and its **back-off is
  over**: the materialization's time plus the wait of its ``retry_round`` (the number of its
  partition's materializations in a row that left work, :func:`retry_round`;
  :class:`~argus_dagster.infra.environment.Backoff`) is not after the evaluation's time. A row with a
  permanent error (an invalid manifest line, a 2-frame clip, a missing video) leaves nothing to
  retry: rerunning would give the same error, so it does not make its partition run again.

and nothing it reads is missing or in flight; an upstream partition requested in the same run brings
its downstream along. Each part reads the instance's latest records, so the answer is a state, not a
transition: the automation sensor (``argus ui``) and ``argus evaluate`` (``dg.evaluate_automation_conditions``,
:mod:`argus_dagster.client.runner`) get the same one without sharing a cursor, and it agrees with the UI's
stale status. The back-off reads the evaluation's time: ``argus evaluate`` asks as of the end of every
back-off (:func:`retries_waiting`), so a person asking now retries at once.
"""

from __future__ import annotations

import dagster as dg

from argus_dagster.records.automation import (
    LatestRecords,
    a_pass_asks,
    changed_inputs,
    event_of,
    passes_in_flight,
    retries_due,
    round_of,
)

AC = dg.AutomationCondition

class _FromRecords(dg.AutomationCondition):
    """A condition on each candidate partition, read from the instance's latest records (no cursor:
    the same answer however often, and by whoever, it is asked)."""

    def partitions_where(self, context: dg.AutomationContext, records: LatestRecords) -> set[str | None]:
        raise NotImplementedError

    def evaluate(self, context: dg.AutomationContext) -> dg.AutomationResult:
        true = self.partitions_where(context, LatestRecords.of(context))
        if context.partitions_def is None:
            subset = context.candidate_subset if None in true else context.get_empty_subset()
        else:
            subset = context.candidate_subset.compute_intersection_with_partition_keys({k for k in true if k})
        return dg.AutomationResult(context, subset)


class NewCode(_FromRecords):
    """True where the latest materialization was made by another ``code_version`` of the asset."""

    @property
    def name(self) -> str:
        return "new_code"

    def partitions_where(self, context, records) -> set[str | None]:
        now = context.asset_graph.get(context.key).code_version
        return {p for p, r in records.latest(context.key, partitioned=context.partitions_def is not None).items()
                if event_of(r).tags.get("dagster/code_version") != now}


class InputsChanged(_FromRecords):
    """True where an input's data version moved since the latest materialization read it: a source
    observed with a new version (a replaced video, an edited prompt or rubric, another judge), or an
    upstream asset materialized with another one. An unpartitioned asset that reads a partitioned
    one (the leaderboard) follows any newer materialization of it."""

    @property
    def name(self) -> str:
        return "inputs_changed"

    def partitions_where(self, context, records) -> set[str | None]:
        return set(changed_inputs(context.asset_graph, context.key, context.partitions_def, records))


def retry_round(context: dg.AssetExecutionContext, left: int) -> int:
    """The :data:`RETRY_ROUND` a materialization that leaves ``left`` to retry records: 0 when it leaves
    nothing; else one more than its partition's previous materialization had when that one left work
    too, 1 when it did not (read from the instance, as the condition reads it)."""
    if not left:
        return 0
    asset = context.asset_key.to_user_string()
    partition = str(context.partition_key) if context.has_partition_key else None
    flt = dg.AssetRecordsFilter(asset_key=context.asset_key, asset_partitions=[partition] if partition else None)
    before = context.instance.fetch_materializations(flt, limit=1).records
    return (round_of(asset, before[0].asset_materialization.metadata) if before else 0) + 1


class RetryableWorkLeft(_FromRecords):
    """True for the partitions whose latest materialization recorded work to retry (its
    :data:`RETRY_METADATA` counts) once its back-off is over at the evaluation's time
    (:func:`retries_due`): transient failures run again, later each time they fail again; permanent
    row errors do not."""

    @property
    def name(self) -> str:
        return "retryable_work_left"

    def partitions_where(self, context, records) -> set[str | None]:
        now = context.evaluation_time.timestamp()
        return {p for p, due in retries_due(records, context.key).items() if due <= now}


class PassInFlight(_FromRecords):
    """True for every candidate partition while a run of the :data:`PASS_JOB` is queued or in flight,
    when the automation sensor asks (not a pass: :func:`asked_by_a_pass`): that run brings the whole
    evaluation up to date in one process, so the sensor's own runs would only race it stage by stage."""

    @property
    def name(self) -> str:
        return "a pass in flight"

    def partitions_where(self, context, records) -> set[str | None]:
        if a_pass_asks() or not passes_in_flight(records.instance):
            return set()
        if context.partitions_def is None:
            return {None}
        return {str(k) for k in context.candidate_subset.expensively_compute_partition_keys()}


class PlannedInFlight(_FromRecords):
    """True for the partitions a run queued or in flight planned to materialize (its range, for a run
    of many): asked while another process's run computes them, the answer is to wait for it."""

    @property
    def name(self) -> str:
        return "planned by a run in flight"

    def partitions_where(self, context, records) -> set[str | None]:
        asset = context.key.to_user_string()
        return {p for a, p in records.in_flight() if a == asset}


# What makes a partition run: missing, made by other code, an input that moved, or work left to retry;
# and an upstream partition requested in the same run (Dagster's lookahead). Each part is a state of
# the instance's records, not a transition: asked twice, or by two clients, it gives the same answer,
# and a change that lands while a run finishes is not lost.
WANTED = (AC.missing() | NewCode() | InputsChanged() | RetryableWorkLeft()
          | AC.any_deps_match(AC.will_be_requested()).with_label("an input will be requested"))

UP_TO_DATE = (WANTED & ~AC.any_deps_missing() & ~AC.any_deps_in_progress() & ~AC.in_progress()
              & ~PlannedInFlight() & ~AC.any_deps_match(PlannedInFlight()) & ~PassInFlight()).with_label(
    "kept up to date")

# The leaderboard follows every video_scores partition there is: missing partitions do not hold it back
# (a model need not have videos for every task).
FOLLOWS_PARTITIONS = (((AC.missing() & AC.any_deps_match(~AC.missing()).with_label("a partition exists"))
                       | NewCode() | InputsChanged()) & ~AC.any_deps_in_progress()
                      & ~AC.in_progress() & ~PlannedInFlight() & ~AC.any_deps_match(PlannedInFlight())
                      & ~PassInFlight()).with_label("follows the partitions that exist")
