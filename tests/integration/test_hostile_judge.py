"""A hostile judge on loopback, met the way a run meets it: numbers no score can be, answers that drip,
answers of megabytes, error bodies that echo the key. Each run finishes and each row says why."""

import json
import re
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from argus_dagster.infra.media import write_video
from argus_dagster.resources import VlmResource
from tests.servers.openai_server import FakeVlmServer, default_answer, kind_of, request_text

from .helpers import graph_resources, load, materialize_task, pattern_clip

pytestmark = pytest.mark.integration

# The score each criterion of the short clip gets (the long clip's are ordinary); written raw, since
# JSON's own encoder cannot write most of them.
HOSTILE_SCORES = {
    "subject_present": "Infinity",
    "action": "1e999",
    "temporal_quality": "9" * 400,
    "frame_quality": '"1e309"',
    "alignment": "-3",
}
REASONS = {
    "subject_present": "not a finite number",
    "action": "not a finite number",
    "temporal_quality": "not a finite number",
    "frame_quality": "not a finite number",
}
CLAMPED = {"alignment": (0, "the judge answered -3, outside 0-10: clamped to 0")}


def _hostile_answer(body: dict) -> str:
    text = request_text(body)
    if kind_of(body) != "judge" or "[output_video]" not in text:
        return default_answer(body)
    last_t = float(re.search(r"frames \(t = .*?([\d.]+)s\):", text).group(1))
    cid = re.search(r'"id": "([^"]+)"', text).group(1)
    if last_t < 2.5 and cid in HOSTILE_SCORES:  # the short clip
        return '{"score": %s, "rationale": "a score no scale has"}' % HOSTILE_SCORES[cid]
    return default_answer(body)


def _bench(root: Path) -> tuple[Path, Path, Path]:
    bench, cands, home = root / "bench", root / "cands", root / "home"
    (bench / "T2V").mkdir(parents=True)
    rows = [{"id": "short", "prompt": "A pattern slides left."}, {"id": "long", "prompt": "A pattern slides left, longer."}]
    (bench / "T2V" / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    write_video(cands / "T2V" / "m" / "short.mp4", pattern_clip(1, 24), 12)
    write_video(cands / "T2V" / "m" / "long.mp4", pattern_clip(2, 48), 12)
    return bench, cands, home


def _vlm(url: str, **kw) -> VlmResource:
    return VlmResource(backend="openai", base_urls=url, model="judge", concurrency=4, max_retries=1, **kw)


def test_scores_that_are_not_numbers_on_the_scale_leave_their_criteria_unscored_with_the_reason(tmp_path, monkeypatch):
    bench, cands, home = _bench(tmp_path)
    monkeypatch.setenv("ARGUS_HOME", str(home))
    with FakeVlmServer(answer=_hostile_answer) as srv, dg.instance_for_test() as instance:
        resources = graph_resources(bench, cands, home, vlm=_vlm(srv.base_url))
        materialize_task("T2V", ["m"], resources, instance)  # asserts every run succeeded
        key = dg.MultiPartitionKey({"task": "T2V", "model": "m"})
        scores = load("criterion_scores", resources, instance, key)
        videos = load("video_scores", resources, instance, key)
    short = {r["criterion_id"]: r for r in scores.filter(pl.col("input_id") == "short").iter_rows(named=True)}
    assert set(HOSTILE_SCORES) <= set(short)
    for cid, (score, note) in CLAMPED.items():
        assert short[cid]["score"] == score and note in short[cid]["rationale"]
    for cid, reason in REASONS.items():
        row = short[cid]
        assert row["score"] is None, (cid, row)
        assert reason in row["rationale"] and len(row["rationale"]) < 600, (cid, row["rationale"])
    long = scores.filter(pl.col("input_id") == "long")
    assert long["score"].null_count() == 0
    assert videos.filter(pl.col("input_id") == "long")["final_score"][0] is not None


KEY = "sk-hostile-0123456789abcdef"


def _faults(body: dict):
    """For every video: one criterion's answer drips, one's is megabytes long, one's request is refused
    with an error body that echoes the request's Authorization header and a Basic one, two hold a lone
    surrogate (escaped by the body, escaped in the answer's JSON); every vlm_qa answer is megabytes long."""
    from tests.servers.openai_server import Scripted

    if kind_of(body) == "qa":
        return Scripted(content="Yes. " + "q" * 3_000_000)
    if kind_of(body) != "judge":
        return None
    cid = re.search(r'"id": "([^"]+)"', request_text(body)).group(1)
    if cid == "action":
        return Scripted(content='{"score": 6, "rationale": "slowly"}', drip_s=0.2)
    if cid == "frame_quality":
        return Scripted(content='{"score": 8, "rationale": "sharp"} ' + "z" * 3_000_000)
    if cid == "alignment":
        return Scripted(status=401, raw=('{"error": "' + "." * 174 + 'you sent Authorization: {authorization} '
                                         'and Authorization: Basic dXNlcjpwYXNzd29yZA=="}').encode())
    if cid == "subject_present":  # Python's surrogate: the server's json.dumps escapes it in the body
        return Scripted(content='{"score": 7, "rationale": "half a pair \ud800"}')
    if cid == "temporal_quality":  # the escape as the answer's text: its JSON holds the surrogate
        return Scripted(content='{"score": 7, "rationale": "half a pair \\udfff"}')
    return None


def test_a_judge_that_drips_floods_and_echoes_the_key_leaves_bounded_redacted_rows(tmp_path, monkeypatch):
    bench, cands, home = _bench(tmp_path)
    monkeypatch.setenv("ARGUS_HOME", str(home))
    with FakeVlmServer(fault=_faults) as srv, dg.instance_for_test() as instance:
        vlm = _vlm(srv.base_url, api_key=KEY, timeout_s=2.0, max_answer_chars=4000)
        # The rubric generator keeps the default bound: a rubric is longer than 4,000 characters.
        resources = graph_resources(bench, cands, home, vlm=vlm, rubric_vlm=_vlm(srv.base_url))
        materialize_task("T2V", ["m"], resources, instance)
        key = dg.MultiPartitionKey({"task": "T2V", "model": "m"})
        scores = load("criterion_scores", resources, instance, key)
        evidence = load("criterion_evidence", resources, instance, key)
        assert scores.height >= 10 and {"subject_present", "temporal_quality"} <= set(scores["criterion_id"])
        assert any(r["headers"].get("Authorization") == f"Bearer {KEY}" for r in srv.requests)
    for row in scores.iter_rows(named=True):
        cid, rationale = row["criterion_id"], row["rationale"]
        assert len(rationale) < 2500, (cid, len(rationale))
        if cid == "action":
            assert row["score"] is None and "no whole answer within 2s" in rationale
        elif cid == "frame_quality":
            assert row["score"] == 8 and "cut at 4000 characters" in rationale
        elif cid == "alignment":
            assert row["score"] is None and "HTTP 401" in rationale
        elif cid == "subject_present":
            assert row["score"] is None and "an answer that is not UTF-8 text" in rationale, rationale
        elif cid == "temporal_quality":
            assert row["score"] is None and "field 'rationale': not UTF-8 text" in rationale, rationale
    qa = [json.loads(e) for e in evidence["evidence"].to_list() if "vlm_qa" in e]
    answers = [r["answer"] for records in qa for r in records if r.get("tool") == "vlm_qa" and r.get("ok")]
    assert answers and all(len(a) < 2100 and a.endswith("(answer cut at 2000 characters)") for a in answers)
    # The table, the report pages and the judgment cache (parquet is compressed: read as a table).
    stored = repr(scores.to_dicts()).encode() + b"".join(
        p.read_bytes() for p in home.rglob("*") if p.is_file() and p.suffix != ".parquet")
    assert b"HTTP 401" in stored
    for secret in (KEY[:8].encode(), b"dXNlcjpw"):
        assert secret not in stored
    assert sum(p.stat().st_size for p in home.rglob("*") if p.is_file()) < 20_000_000
