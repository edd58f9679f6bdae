"""Judge and vlm_qa requests ask OpenAI-compatible servers not to think aloud (method §7); a server that
answers 400 to the switch is asked again without it, and the endpoint is remembered."""

from concurrent.futures import ThreadPoolExecutor

import cv2
import numpy as np
import pytest

from argus_dagster.infra.media import JUDGE_POLICY, write_video
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.evidence.tools.vlm_qa import VlmQa
from argus_dagster.method.judge import VlmJudge, judge_view
from argus_dagster.method.rubric.schema import parse_rubric
from argus_dagster.vlm.ledger import CallStats
from argus_dagster.vlm.openai_compatible import OpenAICompatibleClient
from argus_dagster.vlm.reply import VlmError
from tests.servers.openai_server import FakeVlmServer, Scripted, kind_of, rubric_for

pytestmark = pytest.mark.integration

SWITCH = {"enable_thinking": False}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("thinking")
    rng = np.random.default_rng(3)
    write_video(d / "out.mp4", rng.integers(0, 255, (12, 48, 64, 3), dtype=np.uint8), 12.0)
    cv2.imwrite(str(d / "subject.png"), rng.integers(0, 255, (40, 40, 3), dtype=np.uint8))
    return MediaStore({"output_video": str(d / "out.mp4"), "subject_image": str(d / "subject.png")})


def ask_both(client, store, stats=None, n=2):
    """``n`` judge calls and ``n`` vlm_qa calls; all must succeed."""
    c = parse_rubric(rubric_for("TS2V")).criteria[0]
    frames = store.frames("output_video", JUDGE_POLICY)
    judge, qa = VlmJudge(client, stats=stats), VlmQa(client, stats=stats)
    for _ in range(n):
        assert judge.judge(judge_view(c), [{"tool": "sam_track", "ok": True, "coverage": 0.9}], frames).score is not None
        assert qa.run({"question": "Is the subject there?", "on": "subject_image"}, store)["ok"]


def test_every_judge_and_vlm_qa_request_carries_the_switch(store):
    with FakeVlmServer() as srv:
        ask_both(OpenAICompatibleClient(srv.base_url, "m", backoff_s=0.01), store)
        bodies = srv.bodies()
    assert sorted(kind_of(b) for b in bodies) == ["judge", "judge", "qa", "qa"]
    assert all(b["chat_template_kwargs"] == SWITCH for b in bodies)


def test_a_server_that_rejects_the_switch_is_asked_again_without_it_and_remembered(store):
    with FakeVlmServer(rejects=("chat_template_kwargs",)) as srv:
        stats = CallStats()
        client = OpenAICompatibleClient(srv.base_url, "m", backoff_s=0.01)
        ask_both(client, store, stats)
        bodies = srv.bodies()
    # The first request carried the switch and got a 400; every later one went without it.
    assert srv.requests[0]["body"]["chat_template_kwargs"] == SWITCH
    assert [("chat_template_kwargs" in b) for b in bodies] == [True] + [False] * 4
    assert sorted(kind_of(b) for b in bodies[1:]) == ["judge", "judge", "qa", "qa"]
    assert client.endpoints[0].rejects_thinking_switch
    assert stats.failures == 0 and stats.errors == {"http_400_thinking_switch": 1}


def test_the_memory_is_per_endpoint(store):
    with FakeVlmServer(rejects=("chat_template_kwargs",), latency_s=0.05) as old, FakeVlmServer(latency_s=0.05) as new:
        client = OpenAICompatibleClient([old.base_url, new.base_url], "m", concurrency=1, backoff_s=0.01)
        with ThreadPoolExecutor(2) as pool:  # two at a time: both endpoints take requests
            list(pool.map(lambda _: ask_both(client, store, n=1), range(4)))
        old_bodies, new_bodies = old.bodies(), new.bodies()
    assert old_bodies and new_bodies
    assert all(b["chat_template_kwargs"] == SWITCH for b in new_bodies)
    assert ["chat_template_kwargs" in b for b in old_bodies] == [True] + [False] * (len(old_bodies) - 1)
    assert [e.rejects_thinking_switch for e in client.endpoints] == [True, False]


def test_a_400_for_another_reason_is_not_blamed_on_the_switch(store):
    with FakeVlmServer() as srv:
        srv.queue(Scripted(status=400, raw=b'{"error": "context too long"}'),
                  Scripted(status=400, raw=b'{"error": "context too long"}'))
        client = OpenAICompatibleClient(srv.base_url, "m", backoff_s=0.01)
        with pytest.raises(VlmError, match="HTTP 400"):
            client.chat([{"role": "user", "content": ["hi"]}], thinking=False)
        assert len(srv.requests) == 2 and not client.endpoints[0].rejects_thinking_switch
        client.chat([{"role": "user", "content": ["hi"]}], thinking=False)
        assert srv.requests[-1]["body"]["chat_template_kwargs"] == SWITCH


def test_rubric_generation_and_plain_calls_do_not_send_it(store):
    with FakeVlmServer() as srv:
        OpenAICompatibleClient(srv.base_url, "m").chat([{"role": "user", "content": ["hi"]}])
        assert "chat_template_kwargs" not in srv.requests[0]["body"]
