"""The ``evaluate`` job: a whole pass in one run (the command line's loop in a run worker), requested by the
candidate-store sensor for each change it records; the automation sensor holds back while one is queued
or in flight; and the launch gate: two processes never both find a partition free and both compute it.

Everything waits on conditions (a barrier, a run's status), never on a sleep.
"""

from __future__ import annotations

import multiprocessing

import dagster as dg
import polars as pl
import pytest

from argus_dagster.client.instance import local_instance
from argus_dagster.client.results import evaluation_storage, load_stored
from argus_dagster.infra.media import write_video

from .helpers import evaluation_in, pattern_clip, t2v_bench

pytestmark = pytest.mark.integration


def key(task: str, model: str) -> str:
    return str(dg.MultiPartitionKey({"task": task, "model": model}))


@pytest.fixture
def evaluation(tmp_path, monkeypatch):
    bench, cands = t2v_bench(tmp_path, n_inputs=2)
    settings = evaluation_in(monkeypatch, tmp_path / "home", bench, cands)
    monkeypatch.setenv("DAGSTER_HOME", str(settings.dagster_home))  # as argus ui pins it for the code location
    instance = local_instance(settings)
    yield settings, instance, cands
    instance.dispose()


def _runs_of_pass(instance: dg.DagsterInstance, run_id: str) -> list[dg.DagsterRun]:
    from argus_dagster.client.pass_job import PASS_RUN_TAG

    return instance.get_runs(dg.RunsFilter(tags={PASS_RUN_TAG: run_id}))


def test_the_evaluate_job_brings_the_evaluation_up_to_date_in_one_run(evaluation):
    from argus_dagster.client.pass_job import evaluate_job
    from argus_dagster.infra.processes import LAUNCHER_TAG, PROCESS_TAG

    settings, instance, cands = evaluation
    result = evaluate_job.execute_in_process(instance=instance)
    assert result.success
    outer = instance.get_run_by_id(result.run_id)
    assert outer.tags[LAUNCHER_TAG] == "pass" and PROCESS_TAG in outer.tags
    inner = _runs_of_pass(instance, result.run_id)
    kinds = sorted(r.tags.get("dagster/partition") or r.tags.get("dagster/asset_partition_range_start") or "-"
                   for r in inner)
    # the task's inputs and rubrics, its one model's chain, the leaderboard with the pages: three runs
    assert kinds == sorted(["-", "T2V", key("T2V", "m")]), kinds
    assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in inner)
    board = load_stored(instance, "leaderboard", storage=evaluation_storage(settings))
    assert board["model"].to_list() == ["m"] and board["n_videos"].to_list() == [2]
    assert (settings.reports_dir / "index.html").is_file()

    again = evaluate_job.execute_in_process(instance=instance)  # nothing changed: nothing runs
    assert again.success and _runs_of_pass(instance, again.run_id) == []

    for i in range(2):  # a new model: the next pass scores it alone, then the leaderboard and the pages
        write_video(cands / "T2V" / "n" / f"p{i}.mp4", pattern_clip(20 + i)[:, :, ::-1], 12)
    third = evaluate_job.execute_in_process(instance=instance, run_config={"ops": {"evaluate_pass": {
        "config": {"models": ["n"]}}}})
    assert third.success
    keys = sorted(r.tags.get("dagster/partition") or "-" for r in _runs_of_pass(instance, third.run_id))
    assert keys == ["-", key("T2V", "n")], keys
    board = load_stored(instance, "leaderboard", storage=evaluation_storage(settings))
    assert sorted(board["model"].to_list()) == ["m", "n"]


def _absolute_places(value, root: str) -> list[str]:
    """What in a metadata value names a place by its absolute path under ``root`` (a link excepted:
    a URL is what a person clicks)."""
    if isinstance(value, dg.UrlMetadataValue):
        return []
    raw = value.value if hasattr(value, "value") else value
    text = str(raw)
    return [text[:200]] if root in text else []


def test_metadata_names_every_place_relative_to_the_evaluation(evaluation):
    from argus_dagster.client.pass_job import evaluate_job
    from argus_dagster.infra.tables import recorded_path, recorded_version

    settings, instance, cands = evaluation
    for i in range(2):  # two models: the second pass's range and the pages over both
        write_video(cands / "T2V" / "n" / f"p{i}.mp4", pattern_clip(30 + i)[:, :, ::-1], 12)
    assert evaluate_job.execute_in_process(instance=instance).success
    root = str(settings.evaluation_dir)
    found, checked = [], 0
    for asset_key in instance.get_asset_keys():
        for record in instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=asset_key), limit=1000).records:
            m = record.asset_materialization
            for name, value in m.metadata.items():
                found += [f"{asset_key.to_user_string()} {name}: {x}" for x in _absolute_places(value, root)]
                if isinstance(value, dg.PathMetadataValue):  # each named place is the evaluation's, and there
                    assert (settings.evaluation_dir / value.value).exists(), (asset_key, name, value.value)
            for where in (recorded_path(m.metadata, m.partition), recorded_version(m.metadata, m.partition)):
                if where is not None:
                    checked += 1
                    assert where.startswith("storage/") and (settings.evaluation_dir / where).is_file(), where
    assert not found, found
    assert checked >= 2 * 10, checked  # every stored table's path and kept version
    # and the readers find them there
    board = load_stored(instance, "leaderboard", storage=evaluation_storage(settings))
    assert sorted(board["model"].to_list()) == ["m", "n"]


def test_a_refused_protocol_fails_the_run_with_its_line(evaluation):
    from argus_dagster.client.pass_job import evaluate_job

    _, instance, _ = evaluation
    result = evaluate_job.execute_in_process(instance=instance, raise_on_error=False, run_config={
        "ops": {"evaluate_pass": {"config": {"protocol": "nope"}}}})
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
    assert "protocol 'nope': expected one of videoargus, firm, both, vefx" in failure.step_failure_data.error.message


def _requested(defs: dg.Definitions, instance: dg.DagsterInstance, asset: str) -> set[str]:
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance, asset_selection=dg.AssetSelection.assets(asset))
    return {str(p) for p in result.get_requested_partitions(dg.AssetKey(asset))}


def test_the_sensor_requests_one_pass_and_the_automation_sensor_holds_back(evaluation):
    from argus_dagster.client.pass_job import evaluate_job
    from argus_dagster.location import defs as served
    from argus_dagster.records.automation import asked_by_a_pass

    settings, instance, cands = evaluation
    defs = served()
    sensor = defs.get_sensor_def("candidate_store_sensor")

    def tick(cursor=None):
        with dg.build_sensor_context(instance=instance, resources=defs.resources, cursor=cursor,
                                     definitions=defs) as ctx:
            return sensor(ctx)

    first = tick()
    [request] = first.run_requests
    assert request.job_name == "evaluate" and request.tags["argus/why"].startswith("new models: m;")
    # The sensor records nothing itself: the pass adds the models and observes the sources.
    assert not first.asset_events and not first.dynamic_partitions_requests
    assert instance.get_dynamic_partitions("candidate_models") == []
    waiting = instance.create_run_for_job(evaluate_job, status=dg.DagsterRunStatus.NOT_STARTED)
    held = tick(first.cursor)
    assert not held.run_requests and f"run {waiting.run_id[:8]} of the evaluate job" in held.skip_reason.skip_message
    instance.report_run_canceled(waiting)
    [again] = tick(first.cursor).run_requests  # no pass recorded the change yet: asked for again
    assert again.job_name == "evaluate"
    assert evaluate_job.execute_in_process(instance=instance).success
    assert not tick(first.cursor).run_requests  # the pass recorded it: nothing changed since
    write_video(cands / "T2V" / "m" / "p0.mp4", pattern_clip(30)[:, :, ::-1], 12)  # a replaced video
    [replaced] = tick(first.cursor).run_requests
    assert replaced.tags["argus/why"] == "1 sources changed"

    from argus_dagster.definitions import observe_sources
    from argus_dagster.method.candidate_store import open_store, scan

    store = scan(open_store(str(cands), defs.resources["storage"].storage()), None)
    observe_sources(instance, defs.resources, ["T2V"], {("T2V", "m")}, store.known)  # as the pass's first step
    assert _requested(defs, instance, "candidate_videos") == {key("T2V", "m")}  # the automation sensor would run it
    queued = instance.create_run_for_job(evaluate_job, status=dg.DagsterRunStatus.NOT_STARTED)
    assert _requested(defs, instance, "candidate_videos") == set()  # while a pass is waiting to start: held back
    with asked_by_a_pass():  # the pass itself (and argus evaluate) is not held back
        assert _requested(defs, instance, "candidate_videos") == {key("T2V", "m")}
    instance.report_run_canceled(queued)
    assert _requested(defs, instance, "candidate_videos") == {key("T2V", "m")}


def test_a_partition_a_range_run_in_flight_planned_is_not_requested_again(tmp_path):
    """A run of a range (T2V x a .. T2V x b, as a pass or a backfill cuts them) is in flight: asked
    meanwhile, Dagster's conditions request T2V x c alone."""
    import threading

    from argus_dagster.assets.partitions import RANGE_END_TAG, RANGE_START_TAG, task_model_partitions
    from argus_dagster.client.instance import ensure_instance
    from argus_dagster.definitions import UP_TO_DATE

    home = ensure_instance(tmp_path / "dagster_home", tmp_path)
    dg.DagsterInstance.from_config(str(home)).add_dynamic_partitions("candidate_models", ["a", "b", "c"])
    reached, release = threading.Event(), threading.Event()

    @dg.asset(partitions_def=task_model_partitions, automation_condition=UP_TO_DATE,
              backfill_policy=dg.BackfillPolicy.single_run())
    def ranged(context) -> None:
        reached.set()
        assert release.wait(120), "never released"

    def in_flight():
        dg.materialize([ranged], instance=dg.DagsterInstance.from_config(str(home)),
                       tags={RANGE_START_TAG: key("T2V", "a"), RANGE_END_TAG: key("T2V", "b")})

    instance = dg.DagsterInstance.from_config(str(home))
    before = dg.evaluate_automation_conditions(defs=[ranged], instance=instance)  # asked before: Dagster caches
    assert len(before.get_requested_partitions(ranged.key)) == 15  # every task x model, missing
    thread = threading.Thread(target=in_flight)
    thread.start()
    try:
        assert reached.wait(120)
        asked = dg.evaluate_automation_conditions(defs=[ranged], instance=instance)
        got = {str(p) for p in asked.get_requested_partitions(ranged.key)}
        assert key("T2V", "a") not in got and key("T2V", "b") not in got and key("T2V", "c") in got, got
        # What a pass that finds nothing to run says of them: which run is materializing them.
        from argus_dagster.client.evaluate import _say_up_to_date

        said: list[str] = []
        busy = _say_up_to_date([], ["T2V"], {("T2V", "a"), ("T2V", "c")}, {}, said.append, lambda: "[t]", instance)
        [run] = instance.get_runs(dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
        assert said == ["[t] T2V: inputs and rubrics up to date", f"[t] T2V x a: being materialized by run {run.run_id[:8]}",
                        "[t] T2V x c: up to date"] and busy == 1
    finally:
        release.set()
        thread.join(120)


def _launch_inputs(home: str, barrier, out) -> None:
    """A process that launches the task's inputs run through the launch gate, as a pass does."""
    from argus_dagster.client.runs import Replan, RunSpec, execute
    from argus_dagster.definitions import build_definitions
    from argus_dagster.infra.settings import load_settings

    try:
        instance = dg.DagsterInstance.from_config(home)
        defs = build_definitions(load_settings())
        barrier.wait(timeout=60)
        try:
            result = execute(instance, defs.resources, RunSpec("task", ["input_instances"], ["T2V"]), lambda _m: None,
                             replan_after_wait=True)
            out.put(("ran", result.run_id))
        except Replan:
            out.put(("replanned", ""))
    except BaseException as exc:
        out.put(("error", f"{type(exc).__name__}: {exc}"))
        raise


def test_processes_started_together_never_compute_one_partition_at_once(evaluation):
    settings, instance, _ = evaluation
    # Spawned, not forked: a run in a child forked from this process (its threads, its open instance) can hang.
    ctx = multiprocessing.get_context("spawn")
    for round_ in range(3):
        barrier, out = ctx.Barrier(3), ctx.Queue()
        procs = [ctx.Process(target=_launch_inputs, args=(str(settings.dagster_home), barrier, out)) for _ in range(3)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=240)
        got = [out.get(timeout=5) for _ in procs]
        assert all(p.exitcode == 0 for p in procs), got
        assert not [g for g in got if g[0] == "error"], got
        ran = [run_id for what, run_id in got if what == "ran"]
        assert ran, got
        spans = sorted((s.start_time, s.end_time) for s in
                       (instance.get_run_stats(r) for r in ran))
        for (_, end), (start, _) in zip(spans, spans[1:]):
            assert end <= start, (round_, spans)  # one after another, never at once
    stored = load_stored(instance, "input_instances", "T2V", storage=evaluation_storage(settings))
    assert isinstance(stored, pl.DataFrame) and stored.height == 2
