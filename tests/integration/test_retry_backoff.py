"""Transient failures are retried with a back-off under automation: a partition whose judge was down is
requested again by the automation conditions (asked of the instance as the automation sensor asks them)
only once its back-off is over, later after each run in a row that fails again, and not at all once a
run leaves nothing to retry; `argus evaluate` retries it at once. Time is the evaluation's time, given
to the conditions, never waited for."""

import time
from datetime import datetime, timezone

import dagster as dg
import pytest

from argus_dagster.assets import CANDIDATE_ASSETS, TASK_ASSETS
from argus_dagster.resources import VlmResource
from tests.servers.openai_server import FakeVlmServer

from .helpers import Daemon, graph_resources, t2v_bench

pytestmark = pytest.mark.integration

KEY = str(dg.MultiPartitionKey({"task": "T2V", "model": "m"}))
RETRYING = ("criterion_evidence", "criterion_scores")  # vlm_qa and the judge both ask the VLM that is down
BASE_S, MAX_S = 60, 150  # waits: 60 s after the first failed run, 120 after the second (the cap: unit tests)


def _latest(instance: dg.DagsterInstance, asset: str):
    flt = dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[KEY])
    return instance.fetch_materializations(flt, limit=1).records[0]


def _run(instance, resources, videos: bool = False) -> tuple[float, float, dict[str, dict]]:
    """Materialize the partition's retrying assets (and its ``candidate_videos`` first): (first, last)
    time of their materializations, and their metadata."""
    selection = (["candidate_videos"] if videos else []) + list(RETRYING)
    assert dg.materialize(CANDIDATE_ASSETS + TASK_ASSETS, selection=selection, partition_key=KEY,
                          instance=instance, resources=resources).success
    records = {a: _latest(instance, a) for a in RETRYING}
    stamps = [r.timestamp for r in records.values()]
    return min(stamps), max(stamps), {a: {k: v.value for k, v in r.asset_materialization.metadata.items()}
                                      for a, r in records.items()}


def _asked(defs: dg.Definitions, instance: dg.DagsterInstance, at: float) -> set[str]:
    """Which of the retrying assets the automation conditions request for the partition, asked at POSIX
    time ``at`` (the sensor asks every automated asset; these two are the ones this test is about)."""
    keys = [dg.AssetKey(a) for a in RETRYING]
    result = dg.evaluate_automation_conditions(defs=defs, instance=instance,
                                               asset_selection=dg.AssetSelection.assets(*keys),
                                               evaluation_time=datetime.fromtimestamp(at, timezone.utc))
    return {k.to_user_string() for k in keys if KEY in {str(p) for p in result.get_requested_partitions(k)}}


def test_a_partition_whose_judge_is_down_is_retried_after_a_back_off_that_grows(tmp_path, monkeypatch):
    from argus_dagster.client.runs import plan

    monkeypatch.setenv("ARGUS_RETRY_BACKOFF_S", str(BASE_S))
    monkeypatch.setenv("ARGUS_RETRY_BACKOFF_MAX_S", str(MAX_S))
    bench, cands = t2v_bench(tmp_path, n_inputs=1)
    home = tmp_path / "home"
    monkeypatch.setenv("ARGUS_HOME", str(home))
    with FakeVlmServer(error_rate=1.0) as srv, dg.instance_for_test() as instance:  # every request: HTTP 500
        vlm = VlmResource(backend="openai", base_urls=srv.base_url, model="judge", max_retries=0)
        resources = graph_resources(bench, cands, home, vlm=vlm, rubric_vlm=VlmResource())
        daemon = Daemon(instance, resources)
        assert "T2V" in daemon.tick()["rubrics"]  # the sources observed, the partition added; rubrics first
        assert dg.materialize(TASK_ASSETS, partition_key="T2V", instance=instance, resources=resources).success

        waits = []
        for n, wait in enumerate((BASE_S, 2 * BASE_S), start=1):
            first, last, meta = _run(instance, resources, videos=n == 1)
            for a in RETRYING:  # work left to retry, and how many runs in a row left some
                assert meta[a]["retry_round"] == n, (a, meta[a])
            assert meta["criterion_scores"]["n_unscored_retryable"] > 0
            assert meta["criterion_evidence"]["tool_steps_failed"] > 0
            # Held back until the wait of its round is over, then requested.
            assert _asked(daemon.defs, instance, first + wait - 1) & set(RETRYING) == set(), n
            if n > 1:  # the previous round's wait is over, and still not: the wait grew
                assert _asked(daemon.defs, instance, last + waits[-1] + 1) & set(RETRYING) == set(), n
            assert set(RETRYING) <= _asked(daemon.defs, instance, last + wait + 1), n
            waits.append(wait)

        # argus evaluate is a person asking now: it retries at once, and says what the sensor holds back.
        assert _asked(daemon.defs, instance, time.time()) & set(RETRYING) == set()
        asked = plan(instance, daemon.defs, ["T2V"], {("T2V", "m")})
        assert set(RETRYING) <= {a for a, keys in asked.requested.items() if KEY in keys}, asked.requested
        when = time.strftime("%H:%M", time.localtime(first + 2 * BASE_S))
        assert asked.waiting == (f"1 partition waits to retry (failed tool steps, unanswered judgments), next at "
                                 f"{when}; argus evaluate retries them now"), asked.waiting

        srv.error_rate = 0.0  # the judge is back: a run leaves nothing to retry, and no back-off is left
        _, last, meta = _run(instance, resources)
        for a in RETRYING:
            assert meta[a]["retry_round"] == 0, (a, meta[a])
        assert _asked(daemon.defs, instance, last + 100 * MAX_S) & set(RETRYING) == set()
        assert plan(instance, daemon.defs, ["T2V"], {("T2V", "m")}).waiting == ""
