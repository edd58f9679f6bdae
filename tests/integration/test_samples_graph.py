"""Several samples per input through the Dagster graph.

Model ``m`` has three samples of each input as ``<id>__<k>.mp4``, model ``n`` two as ``<id>/<k>.mp4``,
model ``s`` one video per input (``<id>.mp4``, among them the input ``q__1``, whose id looks like a
sample). Every sample is its own row from ``candidate_videos`` to ``video_scores``, is judged against
its input's rubric, has its own report, and best-of-N picks among the samples by the stored scores.
A new sample makes the partition stale.
"""

import json
from pathlib import Path

import dagster as dg
import polars as pl
import pytest

from argus_dagster.assets.firm import best_of_n_tables
from argus_dagster.client.runs import execute
from argus_dagster.infra.media import write_video
from argus_dagster.method.candidate_store import LocalCandidateStore, partition_hashes, scan

from .helpers import firm_run, graph_resources, load, materialize_task, pattern_clip

pytestmark = pytest.mark.integration
INPUTS = ("p0", "q__1")
LAYOUT = {"m": [f"{{id}}__{k}.mp4" for k in range(3)], "n": [f"{{id}}/{k}.mp4" for k in range(2)], "s": ["{id}.mp4"]}
SAMPLES = {"m": ["0", "1", "2"], "n": ["0", "1"], "s": [""]}


def _bench(root: Path) -> tuple[Path, Path]:
    bench, cands = root / "bench", root / "cands"
    (bench / "T2V").mkdir(parents=True)
    (bench / "T2V" / "manifest.jsonl").write_text("".join(
        json.dumps({"id": i, "prompt": f"A textured pattern slides to the left, take {n}."}) + "\n"
        for n, i in enumerate(INPUTS)))
    seed = 0
    for model, names in LAYOUT.items():
        for iid in INPUTS:
            for name in names:
                seed += 1  # every video differs, so samples get scores of their own
                write_video(cands / "T2V" / model / name.format(id=iid), pattern_clip(seed, 12), 12)
    return bench, cands


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    root = tmp_path_factory.mktemp("samples")
    bench, cands = _bench(root)
    with dg.instance_for_test() as instance:
        res = graph_resources(bench, cands, root / "home")
        materialize_task("T2V", list(LAYOUT), res, instance)
        yield {"res": res, "instance": instance, "cands": cands, "home": root / "home",
               **{f"{table}/{model}": load(table, res, instance, dg.MultiPartitionKey({"task": "T2V", "model": model}))
                  for table in ("candidate_videos", "criterion_scores", "video_scores", "diagnostic_reports")
                  for model in LAYOUT}}


def _keys(df: pl.DataFrame) -> list[tuple[str, str]]:
    return sorted((r["input_id"], r["sample"]) for r in df.iter_rows(named=True))


def test_one_row_per_sample_from_videos_to_scores(graph):
    for model, samples in SAMPLES.items():
        expected = sorted((i, k) for i in INPUTS for k in samples)
        videos = graph[f"candidate_videos/{model}"]
        assert _keys(videos) == expected, model
        assert videos["error"].null_count() == videos.height
        assert videos["sha256"].n_unique() == videos.height  # each row is its own file
        scores = graph[f"video_scores/{model}"]
        assert _keys(scores) == expected, model
        assert scores["final_score"].null_count() == 0, scores.filter(pl.col("error").is_not_null())["error"].to_list()
        crit = graph[f"criterion_scores/{model}"]
        # every sample of an input is judged on the input's rubric: the same criteria
        per_video = crit.group_by("input_id", "sample").agg(pl.col("criterion_id").sort())
        for iid in INPUTS:
            criteria = per_video.filter(pl.col("input_id") == iid)["criterion_id"].to_list()
            assert len(criteria) == len(samples) and all(c == criteria[0] for c in criteria) and criteria[0]


def test_the_single_video_layout_is_unchanged(graph):
    videos = graph["candidate_videos/s"]
    # q__1.mp4 is the input q__1 (an id of the bench), not sample 1 of q
    assert _keys(videos) == [("p0", ""), ("q__1", "")]
    assert all(Path(u).name == f"{i}.mp4" for i, u in zip(videos["input_id"], videos["uri"]))


def test_each_sample_has_its_own_report(graph):
    paths = []
    for model, samples in SAMPLES.items():
        reports = graph[f"diagnostic_reports/{model}"]
        assert _keys(reports) == sorted((i, k) for i in INPUTS for k in samples)
        assert reports["error"].null_count() == reports.height
        paths += reports["path"].to_list()
        for r in reports.filter(pl.col("sample") != "").iter_rows(named=True):
            assert f"{r['input_id']}#{r['sample']}" in Path(r["path"]).read_text()
    assert len(set(paths)) == len(paths) and all(Path(p).is_file() for p in paths)
    cards = sorted(p.name for p in (graph["home"] / "reports" / "T2V" / "_cards" / "p0").iterdir())
    assert cards == ["m!0.json", "m!1.json", "m!2.json", "n!0.json", "n!1.json", "s.json"]


def test_best_of_n_picks_among_samples(graph):
    parts = {model: graph[f"video_scores/{model}"] for model in LAYOUT}
    picks, texts = best_of_n_tables(parts, None, "final", tasks=["T2V"])
    for iid in INPUTS:
        row = picks.filter(pl.col("input_id") == iid).row(0, named=True)
        everything = pl.concat(parts.values()).filter(pl.col("input_id") == iid)
        assert row["n_candidates"] == sum(len(s) for s in SAMPLES.values()) == everything.height
        best = everything["final_score"].max()
        tied = everything.filter(pl.col("final_score") >= best - 1e-9)  # a tie is drawn, never by name
        assert (row["pick_model"], row["pick_sample"]) in set(zip(tied["model"], tied["sample"]))
        assert row["pick_score"] == best
    # among one model's samples only: the pick is one of its samples, never an id split by hand
    only_m = best_of_n_tables({"m": parts["m"]}, None, "final", tasks=["T2V"])[0]
    assert set(only_m["pick_sample"]) <= {"0", "1", "2"} and set(only_m["pick_model"]) == {"m"}
    assert sorted(only_m["input_id"]) == sorted(INPUTS)
    assert "T2V" in texts


def test_firm_rates_every_sample_and_best_of_n_picks_by_it(graph):
    res, instance = graph["res"], graph["instance"]
    assert execute(instance, res, firm_run("T2V")).success
    out = execute(instance, res, firm_run("T2V", "n"))
    assert out.success and all(e.passed for e in out.get_asset_check_evaluations())
    scores = load("firm_scores", res, instance, dg.MultiPartitionKey({"task": "T2V", "model": "n"}))
    assert _keys(scores) == sorted((i, k) for i in INPUTS for k in SAMPLES["n"])
    assert scores["pq_rating"].is_between(1, 5).all()  # offline: PQ from the CPU tools, per sample
    picks, _ = best_of_n_tables({"n": graph["video_scores/n"]}, {"n": scores}, "pq", tasks=["T2V"])
    for r in picks.iter_rows(named=True):
        mine = scores.filter(pl.col("input_id") == r["input_id"])
        assert r["n_candidates"] == 2 and r["pick_score"] == mine["pq_rating"].max()
        assert r["pick_sample"] in {"0", "1"} and r["pick_sample"] in mine.filter(
            pl.col("pq_rating") == mine["pq_rating"].max())["sample"].to_list()


def test_a_new_sample_makes_the_partition_stale(graph):
    """A new sample file changes its partition's ``candidate_files`` data version, and only its partition's."""
    from argus_dagster.assets.sources import source_versions

    res, cands = graph["res"], graph["cands"]
    store = LocalCandidateStore(cands)
    known = scan(store, None).known
    assert partition_hashes(known, "T2V", "n")["p0/1"]

    def versions(known):
        return {o.partition: o.version for o in source_versions(res, [], [("T2V", m) for m in LAYOUT], known)
                if o.asset == "candidate_files"}

    before = versions(known)
    write_video(cands / "T2V" / "n" / "p0" / "2.mp4", pattern_clip(99, 12), 12)
    write_video(cands / "T2V" / "m" / "q__1__3.mp4", pattern_clip(98, 12), 12)
    after = scan(store, known)
    assert after.changed == {("T2V", "n"), ("T2V", "m")}
    now = versions(after.known)
    assert {k for k in now if now[k] != before[k]} == {"n|T2V", "m|T2V"}
