"""The content cache, counted at the VLM server: each factor invalidates exactly what depends on it.

The graph runs against the loopback OpenAI-compatible server (the judge, ``vlm_qa`` and the rubric
generator all on it). After a first materialization, each change below is made and the partition
re-materialized; the test counts the requests the server received and the tool steps that ran.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from argus_dagster.assets import CANDIDATE_ASSETS, TASK_ASSETS
from argus_dagster.infra.cache import ContentCache
from argus_dagster.infra.media import write_video
from argus_dagster.method.evidence.executor import run_plan
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.evidence.plan import NormalizedPlan
from argus_dagster.method.evidence.tools.registry import ToolSuite, embedded_suite
from argus_dagster.resources import VlmResource
from tests.servers.openai_server import FakeVlmServer, kind_of
from tests.waiting import wait_until

from .helpers import graph_resources, load, pattern_clip, t2v_bench

pytestmark = pytest.mark.integration
KEY = dg.MultiPartitionKey({"task": "T2V", "model": "m"})
ROOT = Path(__file__).resolve().parents[2]


_clip = pattern_clip


def _bench(root: Path, n_inputs: int = 3) -> tuple[Path, Path]:
    return t2v_bench(root, n_inputs)


class Graph:
    """One bench, one instance, one server; :meth:`run` re-materializes and returns what it cost."""

    def __init__(self, root: Path, srv: FakeVlmServer, instance: dg.DagsterInstance, concurrency: int = 3):
        self.root, self.srv, self.instance = root, srv, instance
        self.bench, self.cands = _bench(root)
        self.concurrency = concurrency
        self.model = "judge-a"

    def resources(self) -> dict:
        vlm = VlmResource(backend="openai", base_urls=self.srv.base_url, model=self.model,
                          concurrency=self.concurrency)
        return graph_resources(self.bench, self.cands, self.root / "home", vlm=vlm,
                               rubric_vlm=VlmResource(backend="openai", base_urls=self.srv.base_url,
                                                      model="rubric-model", concurrency=self.concurrency))

    def run(self, assets=None) -> dict:
        n0 = len(self.srv.requests)
        res = self.resources()
        self.instance.add_dynamic_partitions("candidate_models", ["m"])
        assert dg.materialize(TASK_ASSETS, partition_key="T2V", instance=self.instance, resources=res).success
        out = dg.materialize(CANDIDATE_ASSETS + TASK_ASSETS, selection=CANDIDATE_ASSETS, partition_key=KEY,
                             instance=self.instance, resources=res)
        assert out.success
        meta = {m.asset_key.to_user_string(): m.materialization.metadata for m in out.get_asset_materialization_events()}
        kinds = [kind_of(r["body"]) for r in self.srv.requests[n0:]]
        ev = load("criterion_evidence", res, self.instance, KEY)
        return {"judge": kinds.count("judge"), "qa": kinds.count("qa"), "rubric": kinds.count("rubric"),
                "steps_run": meta["criterion_evidence"]["tool_steps_run"].value,
                "judge_misses": meta["criterion_scores"]["cache_misses"].value, "evidence": ev,
                "scores": load("criterion_scores", res, self.instance, KEY)}


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    with FakeVlmServer(latency_s=0.03) as srv, dg.instance_for_test() as instance:
        g = Graph(tmp_path_factory.mktemp("cache"), srv, instance)
        g.first = g.run()
        yield g


def _qa_steps(ev: pl.DataFrame, input_id: str | None = None) -> int:
    rows = ev if input_id is None else ev.filter(pl.col("input_id") == input_id)
    return int(rows["tools"].list.count_matches("vlm_qa").sum())


def test_first_run_pays_once_for_everything_within_the_bound(graph):
    first = graph.first
    n_crit = first["scores"].height
    assert first["rubric"] == 3 and first["judge"] == n_crit == 15
    assert first["qa"] == _qa_steps(first["evidence"]) > 0
    assert first["steps_run"] == int(first["evidence"]["tools"].list.len().sum())
    # Never past the bound (that the bound is reached is held deterministically in test_vlm_client.py).
    assert graph.srv.max_in_flight <= graph.concurrency


def test_nothing_changed_makes_no_call_and_runs_no_tool(graph):
    again = graph.run()
    assert (again["judge"], again["qa"], again["rubric"], again["steps_run"], again["judge_misses"]) == (0, 0, 0, 0, 0)
    assert again["scores"].sort("input_id", "criterion_id")["score"].to_list() == \
        graph.first["scores"].sort("input_id", "criterion_id")["score"].to_list()
    assert again["scores"]["cache_hit"].all()


def test_a_changed_video_recomputes_that_video_only(graph):
    write_video(graph.cands / "T2V" / "m" / "p1.mp4", _clip(11), 12)
    got = graph.run()
    ev = got["evidence"]
    assert got["rubric"] == 0
    assert got["judge"] == ev.filter(pl.col("input_id") == "p1").height == 5
    assert got["qa"] == _qa_steps(ev, "p1")
    assert got["steps_run"] == int(ev.filter(pl.col("input_id") == "p1")["tools"].list.len().sum())


def _edit_rubric(graph, input_id: str, edit) -> None:
    path = next(p for p in [*graph.bench.rglob(f"{input_id}.json"), *(graph.root / "home").rglob(f"{input_id}.json")])
    rubric = json.loads(path.read_text())
    edit(rubric["criteria"])
    path.write_text(json.dumps(rubric))


def test_a_changed_criterion_recomputes_that_criterion_only(graph):
    def rule(criteria):  # what the judge reads changes; the evidence plan does not
        criteria[0]["scoring_rule"] += " Deduct 2 points for any doubt."

    _edit_rubric(graph, "p0", rule)
    got = graph.run()
    assert (got["judge"], got["qa"], got["steps_run"]) == (1, 0, 0)

    def question(criteria):  # the plan's question changes: that step and that judgment
        step = next(c for c in criteria if c["evidence_plan"]["tool_sequence"][0]["tool"] == "vlm_qa")
        step["evidence_plan"]["tool_sequence"][0]["args"]["question"] = "Is the pattern textured?"

    _edit_rubric(graph, "p2", question)
    got = graph.run()
    assert (got["judge"], got["qa"], got["steps_run"]) == (1, 1, 1)


def test_a_changed_judge_model_or_prompt_recomputes_what_it_answered(graph, monkeypatch):
    ev = graph.first["evidence"]
    graph.model = "judge-b"  # vlm_qa's version names the model: its steps and every judgment
    got = graph.run()
    assert (got["judge"], got["qa"], got["rubric"]) == (15, _qa_steps(ev), 0)
    assert got["steps_run"] == _qa_steps(ev)  # the weight-free tools are not rerun

    import argus_dagster.method.judge as judge_mod

    monkeypatch.setattr(judge_mod, "JUDGE_PROMPT_VERSION", "judge-test")
    got = graph.run()
    assert (got["judge"], got["qa"], got["steps_run"]) == (15, 0, 0)

    import argus_dagster.method.evidence.tools.vlm_qa as qa_mod

    monkeypatch.setattr(qa_mod, "QA_PROMPT_VERSION", "qa-test")
    got = graph.run()
    # New answers are new evidence: their criteria are judged again, the others are not.
    assert got["qa"] == _qa_steps(ev) and got["judge"] == ev.filter(pl.col("tools").list.contains("vlm_qa")).height


class CountingTool:
    """A weight-free probe with a version of its own, counting its runs."""

    name = "flicker_probe"

    def __init__(self, inner, version: str):
        self.inner, self.version, self.runs = inner, version, 0

    def run(self, args, media):
        self.runs += 1
        return self.inner.run(args, media)


def test_a_changed_tool_version_or_sampling_recomputes_that_step(tmp_path, monkeypatch):
    write_video(tmp_path / "v.mp4", _clip(3), 12)
    base = embedded_suite()
    plan = NormalizedPlan(steps=[{"tool": "flicker_probe", "args": {"on": "output_video"}},
                                 {"tool": "motion_probe", "args": {"on": "output_video"}}])
    cache = ContentCache(tmp_path / "cache", "evidence")

    def run(version: str) -> tuple[int, list[bool]]:
        tool = CountingTool(base.get("flicker_probe"), version)
        hits: list[bool] = []
        run_plan(plan, MediaStore({"output_video": str(tmp_path / "v.mp4")}, {"output_video": "sha-v"}),
                 ToolSuite({**base.tools, "flicker_probe": tool}), cache=cache, hits=hits)
        return tool.runs, hits

    assert run("1") == (1, [False, False])
    assert run("1") == (0, [True, True])
    assert run("2") == (1, [False, True])  # only the step whose tool changed
    import argus_dagster.method.evidence.executor as executor

    monkeypatch.setattr(executor, "SAMPLING_ID", "other-policies")
    assert run("2") == (1, [False, False])


def test_concurrent_criteria_asking_the_same_step_compute_it_once(tmp_path):
    """Many rounds, every thread released at once by a barrier: under load, a step still runs once."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    write_video(tmp_path / "v.mp4", _clip(4), 12)
    base = embedded_suite()
    plan = NormalizedPlan(steps=[{"tool": "flicker_probe", "args": {"on": "output_video"}}])
    n_threads = 8
    for round_ in range(25):
        tool = CountingTool(base.get("flicker_probe"), "1")
        suite = ToolSuite({**base.tools, "flicker_probe": tool})
        media = MediaStore({"output_video": str(tmp_path / "v.mp4")}, {"output_video": f"sha-w{round_}"})
        cache = ContentCache(tmp_path / f"cache{round_}", "evidence")
        start = threading.Barrier(n_threads)

        def one(_, start=start, media=media, suite=suite, cache=cache):
            start.wait()
            return run_plan(plan, media.scope(), suite, cache=cache)

        with ThreadPoolExecutor(n_threads) as pool:
            recs = list(pool.map(one, range(n_threads)))
        assert tool.runs == 1, f"round {round_}: the step ran {tool.runs} times"
        assert all(r[0]["ok"] for r in recs) and media.decode_count <= 1


def test_a_miss_read_just_before_another_thread_publishes_is_not_computed_again(tmp_path):
    """The interleaving behind a step once computed twice: thread B reads the key (a miss), thread A
    computes, publishes and leaves the in-flight table, then B goes on. B must use A's value."""
    import threading

    from argus_dagster.infra.cache import LocalStore

    b_missed, a_done = threading.Event(), threading.Event()

    class SlowForB(LocalStore):
        """A store whose first read by thread B answers late (a slow object store)."""

        def read(self, name):
            data = super().read(name)
            if threading.current_thread().name == "B" and not b_missed.is_set():
                b_missed.set()
                a_done.wait(10)
            return data

    cache = ContentCache(SlowForB(tmp_path / "cache"), "evidence")
    runs = []

    def compute(who):
        runs.append(who)
        return {"value": 1}

    got = {}
    b = threading.Thread(target=lambda: got.setdefault("B", cache.get_or_compute("k", lambda: compute("B"))),
                         name="B")
    b.start()
    assert b_missed.wait(10)
    got["A"] = cache.get_or_compute("k", lambda: compute("A"))
    a_done.set()
    b.join(10)
    assert runs == ["A"] and got["A"] == ({"value": 1}, False) and got["B"] == ({"value": 1}, True)


def test_s3_cache_is_the_same_code(tmp_path, s3_endpoint):
    from argus_dagster.resources.storage import StorageResource

    storage = StorageResource(endpoint_url=s3_endpoint).storage()  # as a run's storage resource makes it
    storage.client.create_bucket(Bucket="argus-cache")
    write_video(tmp_path / "v.mp4", _clip(5), 12)
    plan = NormalizedPlan(steps=[{"tool": "flicker_probe", "args": {"on": "output_video"}}])
    media = MediaStore({"output_video": str(tmp_path / "v.mp4")}, {"output_video": "sha-s3"})
    first = ContentCache("s3://argus-cache/runs", "evidence", storage=storage)
    a = run_plan(plan, media, embedded_suite(), cache=first)
    second, hits = ContentCache("s3://argus-cache/runs", "evidence", storage=storage), []
    b = run_plan(plan, media, embedded_suite(), cache=second, hits=hits)
    assert hits == [True] and a == b and second.stats() == {"hits": 1, "misses": 0, "writes": 0}
    keys = [o["Key"] for o in storage.client.list_objects_v2(Bucket="argus-cache")["Contents"]]
    assert len(keys) == 1 and keys[0].startswith("runs/evidence/")


# ------------------------------------------------------------------------------ interrupted run

_RUN = """
import sys
from argus_dagster.client.evaluate import run_all
run_all(progress=lambda m: print(m, flush=True))
"""


def stored_answers(bench: Path, home: Path) -> dict[str, int]:
    """What a run has stored of the VLM's answers, by request kind: frozen rubrics (in the bench or the
    home), ``vlm_qa`` evidence records and judgments in the content cache (whole entries only: a
    write in progress has a hidden temporary name)."""
    def entries(folder: Path) -> list[Path]:
        return [p for p in folder.rglob("*.json") if not p.name.startswith(".")] if folder.is_dir() else []

    rubrics = {p.stem for p in entries(bench / "T2V" / "rubrics")}
    rubrics |= {p.stem for p in entries(home) if "rubrics" in p.parts}
    qa = 0
    for p in entries(home / "cache" / "evidence"):
        try:
            qa += json.loads(p.read_text()).get("tool") == "vlm_qa"
        except (OSError, ValueError):  # replaced while read: counted on the next look
            pass
    return {"rubric": len(rubrics), "qa": qa, "judge": len(entries(home / "cache" / "judgments"))}


def test_a_killed_run_resumes_without_asking_again_for_finished_work(tmp_path, monkeypatch):
    """The first run is killed (SIGKILL) while the server holds every request after the 20th; the
    rerun (`argus evaluate`'s run_all again, in this process: what the killed one left is on disk)
    asks nothing that the first run had been answered."""
    from argus_dagster.client.evaluate import run_all

    bench, cands = _bench(tmp_path, n_inputs=4)
    env = {**os.environ, "ARGUS_HOME": str(tmp_path / "home"), "DAGSTER_HOME": str(tmp_path / "home" / "dh"),
           "ARGUS_BENCH_DIR": str(bench), "ARGUS_CANDIDATES_DIR": str(cands), "ARGUS_VLM_MODEL": "judge",
           "ARGUS_VLM_CONCURRENCY": "4", "PYTHONPATH": str(ROOT)}
    env.pop("ARGUS_RUBRIC_BASE_URL", None)
    with FakeVlmServer(latency_s=0.02) as srv:
        env["ARGUS_VLM_BASE_URL"] = srv.base_url
        srv.hold_after(20)
        proc = subprocess.Popen([sys.executable, "-c", _RUN], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_until(lambda: srv.answered >= 20 or proc.poll() is not None, 240, "20 answers")
            assert srv.answered == 20, proc.stdout.read().decode()[-3000:] if proc.poll() is not None else srv.answered
            kinds = [kind_of(r["body"]) for r in srv.requests[:20]]
            answered_kinds = {k: kinds.count(k) for k in ("rubric", "qa", "judge")}
            assert sum(answered_kinds.values()) == 20, kinds
            # Killed once every answer it was given is stored (everything else waits at the server).
            wait_until(lambda: all(n >= answered_kinds[k] for k, n in stored_answers(bench, tmp_path / "home").items())
                       or proc.poll() is not None, 120, f"the answers stored: {answered_kinds}")
            assert proc.poll() is None, proc.stdout.read().decode()[-3000:]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            srv.release()
        answered = {json.dumps(r["body"], sort_keys=True) for r in srv.requests[:20]}
        n_first = len(srv.requests)
        for k in ("ARGUS_HOME", "DAGSTER_HOME", "ARGUS_BENCH_DIR", "ARGUS_CANDIDATES_DIR", "ARGUS_VLM_MODEL",
                  "ARGUS_VLM_CONCURRENCY", "ARGUS_VLM_BASE_URL"):
            monkeypatch.setenv(k, env[k])
        monkeypatch.delenv("ARGUS_RUBRIC_BASE_URL", raising=False)
        lines: list[str] = []
        board = run_all(progress=lines.append)
        # The rerun's requests: a request the killed process was still sending when it died reaches the
        # server cut short, with no body, whenever the server gets to reading it; it is no request of the rerun.
        again = [json.dumps(r["body"], sort_keys=True) for r in srv.requests[n_first:] if r["body"]]
    assert len(answered) == 20 and again and not answered & set(again)
    assert len(again) == 36 - 20  # a cold run of this bench asks 36 (4 rubrics, 12 vlm_qa, 20 judgments)
    # And the rerun finished the job: every candidate scored.
    assert any("leaderboard" in x for x in lines) and board.height == 1 and board["n_videos"][0] == 4


# ------------------------------------------------------------------------------ the CLI's reruns


def test_the_cli_skips_up_to_date_partitions_and_adding_a_model_runs_only_its_own(tmp_path, monkeypatch):
    from argus_dagster.client.evaluate import run_all
    from argus_dagster.client.instance import local_instance

    bench, cands = _bench(tmp_path, n_inputs=2)
    for i in range(2):
        write_video(cands / "T2V" / "n" / f"p{i}.mp4", _clip(20 + i), 12)
    with FakeVlmServer() as srv:
        for k, v in {"ARGUS_HOME": str(tmp_path / "home"), "DAGSTER_HOME": str(tmp_path / "home" / "dh"),
                     "ARGUS_BENCH_DIR": str(bench), "ARGUS_CANDIDATES_DIR": str(cands),
                     "ARGUS_VLM_BASE_URL": srv.base_url, "ARGUS_VLM_MODEL": "judge"}.items():
            monkeypatch.setenv(k, v)
        monkeypatch.delenv("ARGUS_RUBRIC_BASE_URL", raising=False)

        def run(**kw) -> tuple[list[str], int, int]:
            lines, n0 = [], len(srv.requests)
            n_runs = len(local_instance().get_runs())
            board = run_all(progress=lines.append, **kw)
            assert set(board["model"]) >= {"m", "n"}
            return lines, len(srv.requests) - n0, len(local_instance().get_runs()) - n_runs

        lines, calls, runs = run()
        # rubrics, then per video 5 judgments + 3 vlm_qa; runs: the task's, both models' range, the leaderboard
        # with the pages
        assert calls == 2 + 2 * (5 + 3) * 2 and runs == 3
        lines, calls, runs = run()
        assert (calls, runs) == (0, 0), lines
        assert sum("up to date" in x for x in lines) == 4, lines
        write_video(cands / "T2V" / "o" / "p0.mp4", _clip(30), 12)  # a new model
        lines, calls, runs = run()
        assert calls == 5 + 3 and runs == 2  # its partition and the leaderboard with the pages
        assert any("T2V x o: scored" in x for x in lines) and any("T2V x m: up to date" in x for x in lines)
        lines, calls, runs = run(force=True)
        assert calls == 0 and runs == 3  # every partition again (the task, a range of the models, the
        # leaderboard), every answer from the cache


def test_a_partition_with_unanswered_work_is_not_up_to_date(tmp_path, monkeypatch):
    """The VLM is down while a model is added: its partition records the failures and is run again
    by the next `argus evaluate`, which asks only for what failed."""
    from argus_dagster.client.evaluate import plan_now, run_all

    bench, cands = _bench(tmp_path, n_inputs=2)
    with FakeVlmServer() as srv:
        for k, v in {"ARGUS_HOME": str(tmp_path / "home"), "DAGSTER_HOME": str(tmp_path / "home" / "dh"),
                     "ARGUS_BENCH_DIR": str(bench), "ARGUS_CANDIDATES_DIR": str(cands),
                     "ARGUS_VLM_BASE_URL": srv.base_url, "ARGUS_VLM_MODEL": "judge",
                     "ARGUS_VLM_MAX_RETRIES": "0", "ARGUS_RETRY_BACKOFF_S": "60"}.items():
            monkeypatch.setenv(k, v)
        monkeypatch.delenv("ARGUS_RUBRIC_BASE_URL", raising=False)
        run_all(progress=lambda m: None)
        for i in range(2):
            write_video(cands / "T2V" / "o" / f"p{i}.mp4", _clip(40 + i), 12)
        srv.error_rate = 1.0  # every request answers 500
        lines = []
        run_all(progress=lines.append)
        assert any("T2V x o: scored" in x and "retried on the next run" in x for x in lines), lines
        said = []  # argus evaluate --plan: the sensor would wait; argus evaluate would run it now
        would = plan_now(progress=said.append)
        assert [k for k in would.get("criterion_scores", []) if k.startswith("o|")] == ["o|T2V"], would
        assert any(x.startswith("1 partition waits to retry (failed tool steps, unanswered judgments), next at ")
                   for x in said), said
        srv.error_rate = 0.0
        n0, lines = len(srv.requests), []
        run_all(progress=lines.append)
        # Run again because of what failed, at once (the automation sensor would wait out its back-off),
        # and nothing left to retry this time.
        assert any("1 partition waits to retry (failed tool steps, unanswered judgments), next at " in x
                   and x.endswith("; argus evaluate retries them now") for x in lines), lines
        assert any("T2V x o: scored" in x and "failed tool steps retried" in x and "unanswered judgments retried" in x
                   and "retried on the next run" not in x for x in lines), lines
        assert any("T2V x m: up to date" in x for x in lines)
        assert len(srv.requests) - n0 == 2 * (5 + 3)  # the failed vlm_qa steps and judgments of model o
        lines = []
        run_all(progress=lines.append)
        assert sum("up to date" in x for x in lines) == 4  # the task, both partitions, the whole run


def test_a_frame_is_decoded_and_encoded_once_for_every_criterion_of_its_video(tmp_path, monkeypatch):
    """Five criteria judged on one video: one decode, eight JPEG encodings (one per frame), and every
    request carries the same eight images."""
    import argus_dagster.infra.media as media_mod
    from argus_dagster.method.judge import VlmJudge
    from argus_dagster.method.rubric.schema import parse_rubric
    from argus_dagster.method.stages import judge_criteria, output_frames
    from argus_dagster.vlm.openai_compatible import OpenAICompatibleClient

    encoded = []
    real = media_mod.encode_jpeg
    monkeypatch.setattr(media_mod, "encode_jpeg", lambda f, *a, **k: encoded.append(1) or real(f, *a, **k))
    write_video(tmp_path / "v.mp4", _clip(6, n=36), 12)
    rubric = parse_rubric({"criteria": [
        {"id": f"c{i}", "dimension": 12, "criterion": f"check {i}", "type": "soft", "importance": "low",
         "scoring_rule": "0-10", "evidence_plan": {"tool_sequence": [{"tool": "flicker_probe", "args": {}}]}}
        for i in range(5)]})
    rows = [{"criterion_id": f"c{i}", "evidence": "[]", "error": None} for i in range(5)]
    store = MediaStore({"output_video": str(tmp_path / "v.mp4")}, {"output_video": "sha-enc"})
    with FakeVlmServer() as srv:
        judge = VlmJudge(OpenAICompatibleClient(srv.base_url, "judge", concurrency=4))
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(4) as pool:
            got = judge_criteria(rubric, rows, judge, frames=output_frames(store), pool=pool)
        images = [[p["image_url"]["url"] for m in r["body"]["messages"] if isinstance(m["content"], list)
                   for p in m["content"] if p.get("type") == "image_url"] for r in srv.requests]
    assert all(r["score"] is not None for r in got) and len(images) == 5
    assert len(images[0]) == 8 and all(im == images[0] for im in images)
    assert store.decode_count == 1 and len(encoded) == 8


def test_partition_runs_share_one_client_and_its_bound(tmp_path, monkeypatch):
    """The runs of an evaluation (three tasks, two models), and the many criteria each run judges at
    once, build one VLM client between them: the server never sees more requests in flight than the
    configured concurrency, and sees that many."""
    from argus_dagster.client.evaluate import run_all
    from argus_dagster.resources.vlm import _client

    bench, cands = tmp_path / "bench", tmp_path / "cands"
    for t, task in enumerate(("T2V", "TI2V", "TS2V")):
        (bench / task).mkdir(parents=True)
        rows = []
        for i in range(2):
            row = {"id": f"{task.lower()}{i}", "prompt": f"A textured pattern slides to the left, take {i}."}
            if task == "TI2V":
                row["first_frame"] = f"ff{i}.png"
                cv2_frame = _clip(40 + i)[0]
                import cv2

                cv2.imwrite(str(bench / task / f"ff{i}.png"), cv2_frame)
            if task == "TS2V":
                row["subject_images"] = [f"s{i}.png"]
                import cv2

                cv2.imwrite(str(bench / task / f"s{i}.png"), _clip(50 + i)[0][:48, :48])
            rows.append(row)
        (bench / task / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        for model in ("m", "n"):
            for i in range(2):
                write_video(cands / task / model / f"{task.lower()}{i}.mp4", _clip(10 * t + i + (model == "n")), 12)
    _client.cache_clear()  # a client built by another test would hide the first-build race
    from argus_dagster.vlm.openai_compatible import OpenAICompatibleClient

    real_init = OpenAICompatibleClient.__init__

    def slow_init(self, *args, **kwargs):  # widens the window in which concurrent runs ask for it
        time.sleep(0.5)
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(OpenAICompatibleClient, "__init__", slow_init)
    with FakeVlmServer(latency_s=0.05) as srv:
        for k, v in {"ARGUS_HOME": str(tmp_path / "home"), "DAGSTER_HOME": str(tmp_path / "home" / "dh"),
                     "ARGUS_BENCH_DIR": str(bench), "ARGUS_CANDIDATES_DIR": str(cands),
                     "ARGUS_VLM_BASE_URL": srv.base_url, "ARGUS_VLM_MODEL": "judge-bound",
                     "ARGUS_VLM_CONCURRENCY": "2"}.items():
            monkeypatch.setenv(k, v)
        monkeypatch.delenv("ARGUS_RUBRIC_BASE_URL", raising=False)
        board = run_all(progress=lambda _msg: None)
    assert board.height == 6
    assert srv.max_in_flight <= 2, srv.max_in_flight  # one client's bound, never passed by the runs together
