"""The OpenAI-compatible client against a loopback server: retries, exclusions, bounds, parsing."""

import ctypes
import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from argus_dagster.vlm.images import encode_image
from argus_dagster.vlm.ledger import CallStats, cost_ledger
from argus_dagster.vlm.openai_compatible import OpenAICompatibleClient
from argus_dagster.vlm.parsing import extract_json, strip_think
from argus_dagster.vlm.priorities import (
    STAGE_EVIDENCE,
    STAGE_JUDGMENTS,
    STAGE_RUBRICS,
    request_pool,
    request_priority,
    video_group,
)
from argus_dagster.vlm.protocol import chat_json
from argus_dagster.vlm.reply import ParseError, VlmError
from tests.servers.openai_server import FakeVlmServer, Scripted, dead_url
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

HELLO = [{"role": "user", "content": ["hello"]}]


def queued(c: OpenAICompatibleClient) -> int:
    """Requests waiting in the client for a slot (not yet sent)."""
    with c._lock:
        return sum(1 for w in c._waiting if not w.gone)


def client(urls, **kw) -> OpenAICompatibleClient:
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("seed", 0)
    return OpenAICompatibleClient(urls, "test-model", kw.pop("api_key", ""), **kw)


def test_a_plain_answer_and_its_usage(server):
    server.queue(Scripted(content="fine"))
    stats = CallStats()
    reply = client(server.base_url).chat(HELLO, stats=stats)
    assert reply.text == "fine" and reply.attempts == 1
    assert reply.prompt_tokens > 0 and reply.endpoint == server.base_url
    body = server.requests[0]["body"]
    assert server.requests[0]["path"] == "/v1/chat/completions"
    assert body["model"] == "test-model" and body["messages"] == [{"role": "user", "content": "hello"}]
    assert stats.requests == 1 and stats.errors == {}


def test_the_cost_ledger_counts_every_answer_retry_image_and_cached_token_the_server_served(server):
    """A 500, an unparseable answer, then a good one: the ledger of the block and the stage's stats
    both hold what the server counted (its usage, cached prompt tokens included, and its images)."""
    frame = np.random.default_rng(0).integers(0, 255, (64, 96, 3), dtype=np.uint8)
    messages = [{"role": "system", "content": ["Answer in JSON."]},
                {"role": "user", "content": ["[output_video] 2 frames:", frame, frame[::-1].copy(), "Say ok."]}]
    server.queue(Scripted(status=500, raw=b"{}"), Scripted(content="not json"), Scripted(content='{"ok": true}'))
    stats = CallStats()
    with cost_ledger() as ledger:
        value, _ = chat_json(client(server.base_url), messages, extract_json, stats=stats)
    assert value == {"ok": True}
    served = server.served
    for counted in (ledger, stats):
        spent = counted.costs()
        assert 0 < spent.pop("request_ms") <= sum(counted.latencies) * 1000 + 1  # the requests' latencies summed
        assert spent == {
            "vlm_requests": 3, "vlm_retries": 1, "vlm_parse_retries": 1, "prompt_tokens": served["prompt_tokens"],
            "cached_tokens": served["cached_tokens"], "completion_tokens": served["completion_tokens"],
            "images_sent": 6, "image_bytes_sent": served["image_bytes"]}
    assert served["images"] == 6 and served["usage_answers"] == 2
    # the parse retry repeats the request it follows: the server found its whole prefix cached
    assert served["cached_tokens"] > 0.9 * (served["prompt_tokens"] / 2)
    outside = CallStats()
    client(server.base_url).chat(HELLO, stats=outside)  # recorded outside the block: not the ledger's
    assert ledger.requests == 3 and outside.requests == 1


def test_429_waits_for_retry_after_then_succeeds(server):
    server.queue(Scripted(status=429, raw=b"{}", headers={"Retry-After": "0.4"}), Scripted(content="after"))
    stats = CallStats()
    t0 = time.perf_counter()
    reply = client(server.base_url).chat(HELLO, stats=stats)
    assert reply.text == "after" and reply.attempts == 2
    assert time.perf_counter() - t0 >= 0.4
    assert stats.errors == {"http_429": 1} and stats.requests == 2


def test_server_errors_are_retried_with_backoff_until_exhausted(server):
    server.queue(*[Scripted(status=500, raw=b"{}") for _ in range(3)], Scripted(content="third time"))
    assert client(server.base_url, max_retries=3).chat(HELLO).text == "third time"
    server.queue(*[Scripted(status=503, raw=b"{}") for _ in range(3)])
    with pytest.raises(VlmError, match=r"after 3 attempts: .*server error 503"):
        client(server.base_url, max_retries=2).chat(HELLO)


def test_a_timeout_is_retried(server):
    # The first answer comes long after the client's timeout; the retry is answered at once. The timeout
    # leaves a loaded machine ample time for the retry.
    server.queue(Scripted(content="late", delay_s=30.0), Scripted(content="on time"))
    stats = CallStats()
    reply = client(server.base_url, timeout_s=2.0).chat(HELLO, stats=stats)
    assert reply.text == "on time" and stats.errors == {"timeout": 1}


def test_a_bad_request_is_not_retried(server):
    server.queue(Scripted(status=400, raw=b'{"error": "context too long"}'))
    with pytest.raises(VlmError, match="HTTP 400 .*context too long"):
        client(server.base_url).chat(HELLO)
    assert len(server.requests) == 1


def test_a_body_that_is_not_a_completion_is_retried(server):
    server.queue(Scripted(raw=b"<html>proxy error</html>"), Scripted(content="ok"))
    assert client(server.base_url).chat(HELLO).text == "ok"


def test_a_dead_endpoint_in_a_pool_of_three_is_excluded():
    # A little latency keeps requests in flight side by side, so the pool spreads them.
    with FakeVlmServer(latency_s=0.02) as a, FakeVlmServer(latency_s=0.02) as b:
        dead = dead_url()
        c = client([a.base_url, dead, b.base_url], exclude_after=2, exclude_for_s=60)
        stats = CallStats()
        with ThreadPoolExecutor(8) as pool:
            replies = list(pool.map(lambda i: c.chat(HELLO, stats=stats), range(60)))
        assert all(r.text == "ok" for r in replies)
        # The dead one is tried until it is excluded, then never again in this run.
        assert stats.by_endpoint.get(dead, 0) <= 8
        assert stats.errors.get("connection_error", 0) == stats.by_endpoint.get(dead, 0)
        assert len(a.requests) > 15 and len(b.requests) > 15


def test_a_dead_endpoint_one_process_found_is_left_out_by_the_others(tmp_path):
    # Two clients with one slots folder stand for two processes of one machine (two runs at once).
    with FakeVlmServer() as a:
        dead = dead_url()
        first, second = (client([dead, a.base_url], exclude_after=1, exclude_for_s=60, slots_dir=tmp_path)
                         for _ in range(2))
        s1, s2 = CallStats(), CallStats()
        assert first.chat(HELLO, stats=s1).text == "ok" and s1.by_endpoint.get(dead) == 1
        for _ in range(5):
            second.chat(HELLO, stats=s2)
        assert dead not in s2.by_endpoint and s2.by_endpoint[a.base_url] == 5
        # Once the exclusion has run out, the other process tries the endpoint again (still dead: once).
        for ep in second.endpoints:
            ep.machine.exclude(-1)
        assert not any(ep.machine.excluded() for ep in second.endpoints)
        s3 = CallStats()
        assert second.chat(HELLO, stats=s3).text == "ok" and s3.by_endpoint.get(dead) == 1
        assert second.endpoints[0].machine.excluded()  # and left out again, for everyone


def test_every_endpoint_dead_fails_with_a_clear_error():
    c = client([dead_url(), dead_url()], max_retries=2)
    with pytest.raises(VlmError, match="connection failed"):
        c.chat(HELLO)


def test_concurrency_never_exceeds_the_bound_per_endpoint():
    with FakeVlmServer(latency_s=0.05) as a, FakeVlmServer(latency_s=0.05) as b:
        c = client([a.base_url, b.base_url], concurrency=3)
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda i: c.chat(HELLO), range(48)))
        assert a.max_in_flight <= 3 and b.max_in_flight <= 3
        assert len(a.requests) + len(b.requests) == 48


def test_the_bound_is_reached_when_more_requests_wait():
    """Both servers hold what they receive: 8 requests at a bound of 3 per endpoint fill 3 + 3 slots
    and leave 2 waiting in the client, then all are answered once released."""
    with FakeVlmServer() as a, FakeVlmServer() as b:
        a.hold_after(0)
        b.hold_after(0)
        c = client([a.base_url, b.base_url], concurrency=3)
        with ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(c.chat, HELLO) for _ in range(8)]
            a.wait_received(3)
            b.wait_received(3)
            wait_until(lambda: queued(c) == 2, what="2 requests waiting for a slot")
            assert (len(a.requests), len(b.requests)) == (3, 3) and a.in_flight == b.in_flight == 3
            a.release()
            b.release()
            assert [f.result(timeout=60).text for f in futures] == ["ok"] * 8
        assert a.max_in_flight == b.max_in_flight == 3 and len(a.requests) + len(b.requests) == 8


_MANY = """
import sys
from concurrent.futures import ThreadPoolExecutor
from argus_dagster.vlm.openai_compatible import OpenAICompatibleClient
c = OpenAICompatibleClient(sys.argv[1], "judge", concurrency=2, slots_dir=sys.argv[2] or None)
with ThreadPoolExecutor(8) as pool:
    list(pool.map(lambda i: c.chat([{"role": "user", "content": ["hello"]}]), range(12)))
"""


@pytest.mark.parametrize("shared", [True, False])
def test_the_bound_holds_for_every_process_on_the_machine(tmp_path, shared):
    """Three processes (three runs at once) with a bound of 2 each: with the slot files, 2 in flight
    in all; without them (``slots_dir`` unset), each process keeps its own bound."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    with FakeVlmServer(latency_s=0.1) as srv:
        procs = [subprocess.Popen([sys.executable, "-c", _MANY, srv.base_url, str(tmp_path / "slots") if shared else ""],
                                  cwd=root) for _ in range(3)]
        assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
        assert len(srv.requests) == 36
        assert srv.max_in_flight <= 2 if shared else srv.max_in_flight <= 3 * 2, srv.max_in_flight


def test_processes_without_slot_files_each_fill_their_own_bound(tmp_path):
    """The server holds what it receives: three processes with a bound of 2 each and no slot files
    put 6 requests in flight; with one slots folder, 2 in all (the bound is reached, then holds)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for shared, reached in ((False, 6), (True, 2)):
        with FakeVlmServer() as srv:
            srv.hold_after(0)
            procs = [subprocess.Popen([sys.executable, "-c", _MANY, srv.base_url,
                                       str(tmp_path / "slots") if shared else ""], cwd=root) for _ in range(3)]
            try:
                srv.wait_received(reached, timeout_s=120)
                assert srv.in_flight == reached
            finally:
                srv.release()
            assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
            assert len(srv.requests) == 36 and srv.max_in_flight == reached, (shared, srv.max_in_flight)
    if shared:  # one folder of slot files per endpoint and model, named by a hash (no URL on disk)
        [folder] = list((tmp_path / "slots").iterdir())
        assert sorted(p.name for p in folder.iterdir()) == ["slot-0", "slot-1"]
        assert "127.0.0.1" not in str(folder)


def _arrive_in_order(c, srv, arrivals: list[tuple], ask) -> list[threading.Thread]:
    """A thread per arrival calling ``ask(*args)``: the first holds the server's only slot, each next
    one starts once the one before waits in the client, so the arrival order is the list's."""
    threads = []
    for n, args in enumerate(arrivals):
        threads.append(threading.Thread(target=ask, args=args))
        threads[-1].start()
        if n == 0:
            srv.wait_received(1)
        else:
            wait_until(lambda n=n: queued(c) == n, what=f"{args[0]} waiting")
    return threads


def test_waiting_requests_are_served_by_stage_then_priority_then_arrival():
    """One slot, held by a first request: the ones that queue behind it go by stage, then priority,
    then arrival, whatever order they arrived in; threads of a request_pool carry both."""
    with FakeVlmServer() as srv:
        c = client(srv.base_url, concurrency=1)
        srv.hold_after(0)  # "first" holds the only slot at the server until released

        def ask(name: str, priority: int, stage: int) -> None:
            with request_priority(priority, stage=stage):
                c.chat([{"role": "user", "content": [name]}])

        arrivals = [("first", 9, 0), ("judge-p0", 0, STAGE_JUDGMENTS), ("p5", 5, STAGE_EVIDENCE),
                    ("p1-a", 1, STAGE_EVIDENCE), ("p3", 3, STAGE_EVIDENCE), ("p1-b", 1, STAGE_EVIDENCE)]
        threads = _arrive_in_order(c, srv, arrivals, ask)
        with request_priority(9, stage=STAGE_RUBRICS), request_pool(2) as pool:  # arrives last, earliest stage
            rubric = pool.submit(c.chat, [{"role": "user", "content": ["rubric-pool"]}])
            wait_until(lambda: queued(c) == len(arrivals), what="rubric-pool waiting")
            srv.release()
            rubric.result(timeout=60)
        for t in threads:
            t.join(timeout=60)
        order = [r["body"]["messages"][0]["content"] for r in srv.requests]
        assert order == ["first", "rubric-pool", "p1-a", "p1-b", "p3", "p5", "judge-p0"]
        assert srv.max_in_flight == 1


def test_within_a_stage_a_videos_requests_wait_together_before_a_later_videos():
    """Requests of two videos arrive interleaved behind a held slot; the earlier video's go first (its
    frames are then still in a prefix-caching server's cache), each video's in arrival order."""
    with FakeVlmServer() as srv:
        c = client(srv.base_url, concurrency=1)
        srv.hold_after(0)  # "first" holds the only slot at the server until released
        first_video, second_video = video_group(), video_group()

        def ask(name: str, group: int) -> None:
            with request_priority(0, stage=STAGE_JUDGMENTS, group=group):
                c.chat([{"role": "user", "content": [name]}])

        arrivals = [("first", first_video), ("b1", second_video), ("a1", first_video), ("b2", second_video),
                    ("a2", first_video)]
        threads = _arrive_in_order(c, srv, arrivals, ask)
        srv.release()
        for t in threads:
            t.join(timeout=60)
        assert [r["body"]["messages"][0]["content"] for r in srv.requests] == ["first", "a1", "a2", "b1", "b2"]


def test_a_request_interrupted_while_it_waits_leaves_no_slot_taken():
    """A thread that stops waiting (here: an exception raised in it while it waits) must not keep
    the slot a release would hand it, or the next request would wait for ever."""

    class Interrupted(Exception):
        pass

    with FakeVlmServer() as srv:
        c = client(srv.base_url, concurrency=1)
        srv.hold_after(0)
        holder = threading.Thread(target=c.chat, args=(HELLO,))
        holder.start()
        srv.wait_received(1)  # the only slot is taken until the server is released
        outcome: list[str] = []

        def wait_then_get_interrupted() -> None:
            try:
                c.chat(HELLO)
                outcome.append("answered")
            except Interrupted:
                outcome.append("interrupted")

        waiter = threading.Thread(target=wait_then_get_interrupted)
        waiter.start()
        wait_until(lambda: queued(c) == 1, what="the waiter queued behind the holder")
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(waiter.ident), ctypes.py_object(Interrupted))
        waiter.join(timeout=30)
        assert outcome == ["interrupted"]
        srv.release()
        holder.join(timeout=30)
        later = threading.Thread(target=c.chat, args=(HELLO,))
        later.start()
        later.join(timeout=30)
        assert not later.is_alive(), "the interrupted request kept the slot"
        assert len(srv.requests) == 2 and sum(e.in_flight for e in c.endpoints) == 0


def test_images_go_as_small_jpeg_data_urls(server):
    rng = np.random.default_rng(0)
    frame = (rng.random((1080, 1920, 3)) * 40 + np.linspace(0, 200, 1920)[None, :, None]).astype(np.uint8)
    client(server.base_url).chat([{"role": "user", "content": ["look", frame]}])
    parts = server.requests[0]["body"]["messages"][0]["content"]
    assert parts[0] == {"type": "text", "text": "look"}
    url = parts[1]["image_url"]["url"]
    assert url.startswith("data:image/jpeg;base64,")
    import base64

    import cv2
    img = cv2.imdecode(np.frombuffer(base64.b64decode(url.split(",", 1)[1]), np.uint8), cv2.IMREAD_COLOR)
    assert max(img.shape[:2]) == 768 and img.shape[1] == 768
    png = cv2.imencode(".png", cv2.resize(frame, (768, 432)))[1]
    assert len(encode_image(frame)) * 4 <= len(png)


def test_the_api_key_is_sent_but_never_logged_or_raised(server, caplog):
    key = "sk-test-SECRET-4242"
    server.queue(Scripted(status=401, raw=json.dumps({"error": f"bad key {key}"}).encode()))
    c = client(server.base_url, api_key=key)
    with caplog.at_level(logging.DEBUG), pytest.raises(VlmError) as err:
        c.chat(HELLO)
    assert server.requests[0]["headers"]["Authorization"] == f"Bearer {key}"
    assert key not in str(err.value) and key not in repr(c) and key not in caplog.text


# -- parsing ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, value", [
    ('{"score": 7}', {"score": 7}),
    ('```json\n{"score": 7}\n```', {"score": 7}),
    ('Here is my verdict:\n{"score": 7, "rationale": "ok"}\nThanks.', {"score": 7, "rationale": "ok"}),
    ('<think>maybe {"score": 1}</think>{"score": 8}', {"score": 8}),
    ('```\n[1, 2]\n```', [1, 2]),
])
def test_extract_json_finds_the_value(text, value):
    assert extract_json(text) == value


@pytest.mark.parametrize("text", ["", "   ", "<think>all thinking</think>", "no json here", '{"score": 7'])
def test_extract_json_rejects(text):
    with pytest.raises(ParseError):
        extract_json(text)


def test_strip_think_drops_an_unterminated_block():
    assert strip_think("answer <think>and then") == "answer"


def test_parse_retry_shows_the_model_its_mistake(server):
    server.queue(Scripted(content=""), Scripted(content='{"score": 7'), Scripted(content='{"score": 6}'))
    stats = CallStats()

    def parse(text):
        return extract_json(text)["score"]

    value, _ = chat_json(client(server.base_url), HELLO, parse, parse_retries=2, stats=stats)
    assert value == 6 and stats.parse_retries == 2 and stats.calls == 3 and stats.failures == 0
    last = server.requests[-1]["body"]["messages"]
    assert last[-2] == {"role": "assistant", "content": '{"score": 7'}
    assert "could not be used" in last[-1]["content"]


def test_parse_retries_are_bounded(server):
    server.queue(*[Scripted(content="no") for _ in range(5)])
    with pytest.raises(ParseError, match="after 2 attempts"):
        chat_json(client(server.base_url), HELLO, extract_json, parse_retries=1)
    assert len(server.requests) == 2


def test_any_exception_of_a_parser_is_an_unusable_answer(server):
    """A 400-digit score overflows a float, a deeply nested answer exhausts the recursion limit: both
    are answers to ask again (and then give up on), never an error that ends the caller's run."""
    from argus_dagster.method.judge import parse_judgment

    server.queue(Scripted(content='{"score": ' + "9" * 400 + "}"), Scripted(content="[" * 100_000),
                 Scripted(content='{"score": 1e999}'))
    with pytest.raises(ParseError, match="after 3 attempts: score .* is not a finite number"):
        chat_json(client(server.base_url), HELLO, parse_judgment, parse_retries=2)
    server.queue(Scripted(content="[" * 100_000))
    with pytest.raises(ParseError, match="RecursionError"):
        chat_json(client(server.base_url), HELLO, lambda t: json.loads(t), parse_retries=0)


def test_an_answer_that_is_not_utf8_text_is_refused_where_it_arrives_and_asked_again(server):
    """A lone surrogate the body escapes (``"\\ud800"`` in the chat completion) or the answer's own
    JSON escapes: no table or page could hold either, so each is an unusable answer, asked again; an
    escaped pair (an emoji) is text and is used."""
    from argus_dagster.method.judge import parse_judgment

    # In the body: Python's surrogate, which the server's json.dumps writes as "\ud800".
    server.queue(Scripted(content='{"score": 7, "rationale": "half a pair \ud800"}'),
                 Scripted(content='{"score": 6, "rationale": "a pair \ud83d\ude00"}'))
    stats = CallStats()
    reply = client(server.base_url, max_retries=1).chat(HELLO, stats=stats)
    assert reply.attempts == 2 and reply.text == '{"score": 6, "rationale": "a pair \U0001F600"}'
    assert stats.errors == {"not_text": 1}
    server.queue(Scripted(content="x\udcff"))
    with pytest.raises(VlmError, match=r"an answer that is not UTF-8 text \(character 2 is a lone surrogate, U\+DCFF\)"):
        client(server.base_url, max_retries=0).chat(HELLO)
    # In the answer's JSON: the escape as text, which json.loads makes a surrogate of.
    server.queue(Scripted(content='{"score": 7, "rationale": "half a pair \\udbff"}'),
                 Scripted(content='{"score": 6, "rationale": "a pair \\ud83d\\ude00"}'))
    (score, rationale), _ = chat_json(client(server.base_url), HELLO, parse_judgment, parse_retries=1)
    assert (score, rationale) == (6, "a pair \U0001F600")
    server.queue(Scripted(content='{"score": 7, "rationale": "half a pair \\udbff"}'))
    with pytest.raises(ParseError, match=r"field 'rationale': not UTF-8 text \(character 13 is a lone surrogate, U\+DBFF\)"):
        chat_json(client(server.base_url), HELLO, parse_judgment, parse_retries=0)


# -- hostile servers -------------------------------------------------------------------------------

def test_a_server_that_drips_cannot_hold_a_request_past_its_deadline(server):
    """One byte every 0.2 s: every read gets something, so a per-read timeout never fires."""
    server.queue(Scripted(content='{"score": 7, "rationale": "slow"}', drip_s=0.2), Scripted(content="in time"))
    stats = CallStats()
    with pytest.raises(VlmError, match=r"no whole answer within 3s"):
        client(server.base_url, timeout_s=3, max_retries=0).chat(HELLO, stats=stats)
    # The client gave up while the server was still dripping (the whole answer takes 40 s).
    dripped, whole = server.requests[0]["dripped"], server.requests[0]["drip_bytes"]
    assert 0 < dripped < whole and stats.errors == {"timeout": 1}
    # The same client goes on with the next request (its shut connection is not reused).
    c = client(server.base_url, timeout_s=3, max_retries=1)
    server.queue(Scripted(content="late", drip_s=0.2), Scripted(content="in time"))
    assert c.chat(HELLO).text == "in time"


def test_an_answer_longer_than_the_bound_is_cut_and_says_so(server):
    long = '{"score": 7, "rationale": "fine"} ' + "x" * 3_000_000
    server.queue(Scripted(content=long), Scripted(content="short"))
    c = client(server.base_url, max_answer_chars=1000)
    reply = c.chat(HELLO)
    assert len(reply.text) == 1000 and reply.cut == 1000 and reply.text.startswith('{"score": 7')
    assert server.requests[0]["response_bytes"] > 3_000_000  # the server sent it all; the client read a head
    reply = c.chat(HELLO)
    assert reply.text == "short" and reply.cut is None


def test_a_cut_answer_that_does_not_parse_says_it_was_cut(server):
    server.queue(*[Scripted(content='{"score": 7, "rationale": "' + "y" * 5000 + '"}') for _ in range(2)])
    with pytest.raises(ParseError, match="cut at 100 characters"):
        chat_json(client(server.base_url, max_answer_chars=100), HELLO, extract_json, parse_retries=1)


def _at_185(lead: str, secret: str) -> bytes:
    """An error body whose secret starts at character 185, where a cut at 200 before redaction
    would keep its first 15 characters."""
    head = '{"error": "' + lead
    return ('{"error": "' + "." * (185 - len(head)) + lead + secret + '"}').encode()


@pytest.mark.parametrize("echo", [
    _at_185("you sent Authorization: ", "{authorization}"),
    _at_185("key ", "sk-echo-0123456789abcdefXYZ rejected"),
    _at_185('headers {\\"Authorization\\": \\"Basic ', 'dXNlcjpwYXNzd29yZA==\\"}'),
    _at_185("proxy said Bearer ", "abcdEFGH12345678ijkl"),
    _at_185("from https://user:", "hunter2hunter2@proxy.example/v1"),
])
def test_an_error_body_that_echoes_credentials_shows_none_of_them(server, echo):
    key = "sk-echo-0123456789abcdefXYZ"
    server.queue(Scripted(status=401, raw=echo))
    with pytest.raises(VlmError) as err:
        client(server.base_url, api_key=key).chat(HELLO)
    shown = str(err.value)
    assert "HTTP 401" in shown
    for secret in (key[:8], "dXNlcjpw", "abcdEFGH", "hunter2"):
        assert secret not in shown, shown


def test_an_answer_that_echoes_the_key_is_redacted(server):
    key = "sk-echo-0123456789abcdefXYZ"
    server.queue(Scripted(content=f'{{"score": 5, "rationale": "your key is {key}, your header Bearer {key}"}}'))
    reply = client(server.base_url, api_key=key).chat(HELLO)
    assert key[:10] not in reply.text and "***" in reply.text
