"""What to run, as declarative automation conditions: one question, asked of Dagster's own records.

A partition of the VideoArgus graph is run when

* it is **missing** (never materialized: a new model, a new task),
* its asset's **code version changed**,
* a **dependency updated**: an upstream asset materialized, or a source (:mod:`assets.sources`) was
  observed with a new data version (a replaced video, an edited prompt or rubric, another judge), or
* its last materialization **left work to retry** (:class:`RetryableWorkLeft`: a rubric the generator
  failed to make, a tool step that raised, a judgment the VLM did not answer). A row with a permanent
  error (an invalid manifest line, a 2-frame clip, a missing video) leaves nothing to retry: rerunning
  would give the same error, so it does not make its partition run again.

and nothing it reads is missing or in flight. The automation sensor evaluates these conditions under
the daemon (``make ui``); ``argus evaluate`` evaluates the same ones with
``dg.evaluate_automation_conditions`` and executes what they request (:mod:`argus_dagster.runner`).
"""

from __future__ import annotations

import dagster as dg

AC = dg.AutomationCondition

# The materialization metadata each asset records of the work its run left to retry.
RETRY_METADATA = {"rubrics": ("n_retryable",), "criterion_evidence": ("tool_steps_failed",),
                  "criterion_scores": ("n_unscored_retryable",)}


class RetryableWorkLeft(dg.AutomationCondition):
    """True for the partitions whose latest materialization recorded work to retry (its
    :data:`RETRY_METADATA` counts): transient failures run again; permanent row errors do not."""

    @property
    def name(self) -> str:
        return "retryable_work_left"

    def evaluate(self, context: dg.AutomationContext) -> dg.AutomationResult:
        names = RETRY_METADATA.get(context.key.to_user_string(), ())
        if not names:
            return dg.AutomationResult(context, context.get_empty_subset())
        instance = context.asset_graph_view.instance
        left: set[str] = set()
        seen: set[str] = set()
        cursor = None
        while True:  # the latest materialization of each partition, newest first
            page = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=context.key), limit=1000,
                                                   cursor=cursor, ascending=False)
            for record in page.records:
                m = record.asset_materialization
                key = str(m.partition) if m.partition is not None else ""
                if key in seen:
                    continue
                seen.add(key)
                if any((m.metadata[n].value if n in m.metadata else 0) for n in names):
                    left.add(key)
            if not page.has_more:
                break
            cursor = page.cursor
        if context.partitions_def is None:
            subset = context.candidate_subset if "" in left else context.get_empty_subset()
        else:
            subset = context.candidate_subset.compute_intersection_with_partition_keys(left)
        return dg.AutomationResult(context, subset)


def retryable_work_left() -> dg.AutomationCondition:
    return RetryableWorkLeft()


# Missing, code version changed or a dependency updated: each once, until the partition is requested
# or materialized again.
CHANGED = (AC.missing() | AC.code_version_changed() | AC.any_deps_updated()).since(
    AC.newly_requested() | AC.newly_updated()).with_label("missing, new code or an updated dependency")

UP_TO_DATE = ((CHANGED | retryable_work_left()) & ~AC.any_deps_missing() & ~AC.any_deps_in_progress()
              & ~AC.in_progress()).with_label("kept up to date")

# The leaderboard follows every video_scores partition there is: missing partitions do not hold it back
# (a model need not have videos for every task).
FOLLOWS_PARTITIONS = ((AC.missing() | AC.code_version_changed() | AC.any_deps_updated()).since(
    AC.newly_requested() | AC.newly_updated()) & ~AC.any_deps_in_progress() & ~AC.in_progress()).with_label(
    "follows the partitions that exist")
