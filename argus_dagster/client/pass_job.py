"""The ``evaluate`` job: one run that brings the served evaluation up to date, as ``argus evaluate`` does.

Under the daemon, a new model used to reach the leaderboard stage by stage: the automation sensor
requested a task's rubrics at one tick, its candidates' chain at a later one, the leaderboard at a third,
each run a process of its own that imports the code and opens its resources. This job carries the whole
pass in one run worker instead: its one op runs the command line's loop
(:func:`~argus_dagster.client.evaluate.run_all`: observe, ask Dagster's automation conditions, execute
what they request as in-process runs of ranges, ask again) on the run's own instance, so each stage
starts as soon as the one before it ends.

The candidate-store sensor requests it when a model is added or a source changed
(:func:`assets.sensors.candidate_store_sensor_every`); a person launches it from the UI's Launchpad, its
config choosing tasks, models, ``force`` and the protocol. While one is queued or in flight the
automation sensor holds back (:class:`assets.automation.PassInFlight`), and the pass's runs wait for
any other run that materializes one of their partitions (:func:`~argus_dagster.client.runs.execute`).
"""


import dagster as dg

from argus_dagster.client.evaluate import PROTOCOLS, run_all
from argus_dagster.infra.processes import LAUNCHER_TAG, PROCESS_TAG, process_id
from argus_dagster.infra.settings import served_settings
from argus_dagster.records.automation import PASS_JOB

PASS_TAG = "argus/pass"  # every run of the job: the run queue runs one at a time (the instance's dagster.yaml)
PASS_RUN_TAG = "argus/pass_run"  # on each run the pass executes: the job's run that executed it


class PassConfig(dg.Config):
    """What one pass evaluates: every task and model found (the default), or those named."""

    tasks: list[str] = []
    models: list[str] = []
    force: bool = False  # materialize every selected partition again (argus evaluate --force)
    protocol: str = "videoargus"  # videoargus, firm, both or vefx (argus evaluate --protocol)


@dg.op(name="evaluate_pass", description="Brings the evaluation up to date in this one run, as `argus evaluate` "
                                         "does: what is missing or stale, stage after stage, then the pages.")
def evaluate_pass(context: dg.OpExecutionContext, config: PassConfig) -> None:
    if config.protocol not in PROTOCOLS:
        raise dg.Failure(f"protocol {config.protocol!r}: expected one of {', '.join(PROTOCOLS)}")
    # This process executes the pass's runs: a dead-run sensor fails them (and this run) if it dies.
    context.instance.add_run_tags(context.run_id, {LAUNCHER_TAG: "pass", PROCESS_TAG: process_id()})
    try:
        board = run_all(config.tasks or None, config.models or None, progress=context.log.info,
                        instance=context.instance, force=config.force, protocol=config.protocol,
                        settings=served_settings(), run_tags={PASS_RUN_TAG: context.run_id})
    except SystemExit as stop:  # the command line's one-line refusals and failed runs
        raise dg.Failure(str(stop.code)) from None
    # No output: what the pass made is its runs' materializations (the served IO manager stores assets only).
    context.log.info(f"leaderboard: {board.height if board is not None else 0} rows")


# In process: a step process of its own would be one more start of the code, the cost this job cuts.
@dg.job(name=PASS_JOB, tags={PASS_TAG: "1"}, executor_def=dg.in_process_executor,
        description="One run that brings the evaluation up to date as `argus evaluate` does (the candidate-store "
                    "sensor requests it when a model is added or a source changed).")
def evaluate_job():
    evaluate_pass()
