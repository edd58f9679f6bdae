"""The cost ledger counts requests as the server saw them: a 500, a connection the server closed and
a request that timed out on the client's side are requests (with their outcomes), a connection that
was refused is none; tokens are what the server said it served. One client, the loopback server."""

import numpy as np
import pytest

from argus_dagster.vlm.ledger import CallStats, cost_ledger
from argus_dagster.vlm.openai_compatible import OpenAICompatibleClient
from argus_dagster.vlm.protocol import chat_json
from tests.servers.openai_server import FakeVlmServer, Scripted, dead_url, request_text

pytestmark = pytest.mark.integration

HELLO = [{"role": "user", "content": ["hello"]}]
FRAME = [{"role": "user", "content": ["what is shown?", np.full((32, 48, 3), 90, "uint8")]}]


def _client(urls, **kw) -> OpenAICompatibleClient:
    return OpenAICompatibleClient(urls, "m", backoff_s=0.01, backoff_max_s=0.05, seed=1, **kw)


def test_a_500_a_closed_connection_and_a_timeout_are_requests_the_server_saw():
    with FakeVlmServer() as srv:
        srv.queue(Scripted(status=500, raw=b'{"error": "overloaded"}'), Scripted(close=True),
                  Scripted(content="late", delay_s=2.5), Scripted(content='{"ok": 1}'))
        stats = CallStats()
        with cost_ledger() as ledger:
            value, _ = chat_json(_client(srv.base_url, timeout_s=1.0), FRAME, lambda t: t, stats=stats)
        assert value == '{"ok": 1}'
        srv.wait_for(lambda s: [r.get("outcome") for r in s.requests] == ["http_500", "closed", "abandoned", "ok"],
                     what="the server's four outcomes")
        for counted in (ledger, stats):
            costs = counted.costs()
            assert costs["vlm_requests"] == srv.served["requests"] == 4  # all four reached it
            assert counted.errors == {"http_500": 1, "connection_closed": 1, "timeout": 1}
            # the one answer's usage (the abandoned answer's was never served)
            assert costs["prompt_tokens"] == srv.served["prompt_tokens"] > 0 and srv.served["usage_answers"] == 1
            assert costs["completion_tokens"] == srv.served["completion_tokens"]
            assert costs["images_sent"] == srv.served["images"] == 4  # the frame went out with each request
            assert costs["image_bytes_sent"] == srv.served["image_bytes"] > 0
            assert costs["request_ms"] >= 1000  # the timed-out request waited its whole second


def test_a_call_made_without_stage_stats_is_still_the_open_ledgers():
    with FakeVlmServer() as srv:
        with cost_ledger() as ledger:  # as a rubric generator or a tool that was given no stats
            chat_json(_client(srv.base_url), FRAME, lambda t: t)
        assert (ledger.calls, ledger.requests, ledger.images) == (1, 1, 1) == (1, srv.served["requests"], 1)
        assert ledger.prompt_tokens == srv.served["prompt_tokens"] > 0


def test_a_refused_connection_is_no_request():
    with FakeVlmServer() as srv:
        dead = dead_url()
        with cost_ledger() as ledger:
            # the dead endpoint first (fewest failures, first in the pool), then the live one
            _client([dead, srv.base_url], exclude_after=1).chat(HELLO, stats=CallStats())
        assert ledger.requests == srv.served["requests"] == 1
        assert ledger.unsent == ledger.errors.get("connection_error", 0) == ledger.by_endpoint.get(dead, 0) == 1


def test_rubric_generation_is_in_the_ledger_failed_generation_included(tmp_path):
    """The rubrics asset on a loopback generator: each row carries what its rubric cost; an input whose
    generation failed (every attempt answered 500) carries its failed requests."""
    import dagster as dg
    import polars as pl

    from argus_dagster.assets import TASK_ASSETS
    from argus_dagster.resources import VlmResource
    from tests.integration.helpers import graph_resources, load, t2v_bench

    bench, cands = t2v_bench(tmp_path, n_inputs=2)  # prompts "..., take 0." and "..., take 1."

    def fault(body: dict):  # the first input's rubric is never made
        return Scripted(status=500, raw=b"{}") if "take 0." in request_text(body) else None

    with FakeVlmServer(fault=fault) as srv:
        rubric_vlm = VlmResource(backend="openai", base_urls=srv.base_url, model="rubric-model", max_retries=1)
        resources = graph_resources(bench, cands, tmp_path / "home", rubric_vlm=rubric_vlm)
        with dg.instance_for_test() as instance:
            assert dg.materialize(TASK_ASSETS, partition_key="T2V", instance=instance, resources=resources).success
            rubrics = load("rubrics", resources, instance, "T2V")
    failed = rubrics.filter(pl.col("error").is_not_null())
    assert failed.height == 1 and failed["vlm_requests"].item() == 2  # one try and one retry, both 500
    made = rubrics.filter(pl.col("error").is_null())
    assert made.height == 1 and made["vlm_requests"].item() >= 1 and made["prompt_tokens"].item() > 0
    assert int(rubrics["vlm_requests"].sum()) == srv.served["requests"] == 2 + made["vlm_requests"].item()
    assert int(rubrics["prompt_tokens"].sum()) == srv.served["prompt_tokens"]
    assert int(rubrics["images_sent"].sum()) == srv.served["images"]
