"""`argus evaluate --protocol both`, `argus best-of-n` and `argus export firm` on the demo bench (offline),
and best-of-N over several samples per input from stored tables."""

import contextlib
import io
import json
import os
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import dagster as dg
import polars as pl
import pytest

from argus_dagster.assets.firm import BEST_OF_N, best_of_n_tables
from argus_dagster.client import cli
from argus_dagster.client.demo import BEST_MODEL
from argus_dagster.client.instance import local_instance
from argus_dagster.client.results import best_of_n_report, stored_partitions
from argus_dagster.infra.settings import evaluation_settings
from tests.skips import module

from .chromium import open_file, unscored_items

pytestmark = pytest.mark.integration
HUMAN_T2V = {"faithful": 5, "blurry": 3, "flicker": 2, "frozen": 1}


@pytest.fixture(scope="module")
def demo(tmp_path_factory, demo_bench_in):
    """The T2V demo, in its own ARGUS_HOME (the module's runs leave the session's home alone)."""
    home = tmp_path_factory.mktemp("firm_home")
    saved = {k: os.environ.get(k) for k in ("ARGUS_HOME", "DAGSTER_HOME")}
    os.environ["ARGUS_HOME"], os.environ["DAGSTER_HOME"] = str(home), str(home / "dagster_home")
    try:
        bench, cands = demo_bench_in(home)
        ids = [json.loads(x)["id"] for x in (bench / "T2V" / "manifest.jsonl").read_text().splitlines()]
        human = evaluation_settings(bench, cands).human_dir  # the bench's ratings
        human.mkdir(parents=True)
        (human / "T2V.csv").write_text(
            "input_id,model,score\n" + "".join(f"{i},{m},{s}\n" for i in ids for m, s in HUMAN_T2V.items()))
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            rc = cli.main(["evaluate", "--bench", str(bench), "--candidates", str(cands), "--task", "T2V",
                           "--protocol", "both"])
        yield {"home": home, "ids": ids, "rc": rc, "out": printed.getvalue()}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_evaluate_both_stores_firm_scores_beside_the_leaderboard(demo, capsys):
    assert demo["rc"] == 0
    scores = stored_partitions("firm_scores", local_instance(), ["T2V"])
    assert len(scores) == len(HUMAN_T2V)
    df = pl.concat(scores.values())
    assert df.height == len(HUMAN_T2V) * len(demo["ids"]) and df["pq_rating"].null_count() == 0
    assert df["if_reason"].str.contains("needs a VLM").all()
    # one command is one pass: FIRM-Video's runs and VideoArgus's carry the same command id
    from argus_dagster.records.history import materializations

    by_asset = {a: {s.command for s in materializations(local_instance(), a)} for a in ("firm_scores", "video_scores")}
    assert len(by_asset["firm_scores"]) == 1 and by_asset["firm_scores"] == by_asset["video_scores"], by_asset
    assert all(len(c) == 12 for c in by_asset["firm_scores"])  # the command's id, not a run's (a UUID)
    # the frozen model's videos are measured frozen offline, the faithful ones are not
    pq = {m: g["pq_rating"].mean() for (m,), g in df.group_by("model")}
    assert pq["frozen"] < pq[BEST_MODEL] and pq["blurry"] < pq[BEST_MODEL] and pq["flicker"] < pq[BEST_MODEL]
    # the demo is 320 px wide: low resolution is the faithful clips' one measured defect
    best = df.filter(pl.col("model") == BEST_MODEL)
    assert best["pq_rating"].to_list() == [4] * len(demo["ids"])
    assert best["pq_rationale"].str.starts_with("Measured defects: low resolution (").all()


def test_the_firm_table_in_the_terminal_has_whole_names_fits_120_columns_and_says_why(demo):
    """What `argus evaluate --protocol both` printed for FIRM-Video, read as a person reads it."""
    section = demo["out"].partition("FIRM-Video (mean ratings")[2].partition("\nLeaderboard of")[0]
    lines = section.strip("\n").splitlines()[1:]
    assert lines and max(len(x) for x in lines) <= 120, lines
    assert lines[1].split() == ["task", "model", "videos", "IF", "mean", "WC", "mean", "PQ", "mean",
                                "IF", "unscored", "WC", "unscored", "PQ", "unscored"]
    df = pl.concat(stored_partitions("firm_scores", local_instance(), ["T2V"]).values())
    rows = {x.split()[1]: x.split() for x in lines[3:3 + len(HUMAN_T2V)]}
    for (model,), g in df.group_by("model"):  # each cell as stored: videos, means (- for none), unscored
        mean_pq = f"{g['pq_rating'].mean():.2f}"
        assert rows[model] == ["T2V", model, str(g.height), "-", "-", mean_pq, str(g.height), str(g.height), "0"]
    from argus_dagster.protocols.firm.tables import unscored_reasons
    from tests.unit.test_firm_terminal import terminal_reasons

    expected = [(r["dimension"], r["n_videos"], r["models"], " ".join(r["reason"].split()))
                for r in unscored_reasons(df).iter_rows(named=True)]
    assert terminal_reasons(section) == expected  # every reason, its count and models, as stored
    assert sorted(d for d, *_ in expected) == ["IF", "WC"] and all(n == df.height for _, n, _, _ in expected)


def test_best_of_n_on_the_demo_picks_faithful_and_beats_random(demo, capsys):
    picks, texts = best_of_n_report("final", ["T2V"])
    assert list(picks.columns) == list(BEST_OF_N) and picks.height == len(demo["ids"])
    assert (picks["pick_model"] == BEST_MODEL).sum() >= 2  # most inputs
    assert (picks["n_candidates"] == len(HUMAN_T2V)).all()
    assert cli.main(["best-of-n", "--by", "final", "--task", "t2v"]) == 0
    out = capsys.readouterr().out
    assert "best of N by final" in out and "against people (3 inputs" in out
    assert "pick is a human-best candidate: " in out
    assert cli.main(["best-of-n", "--by", "pq", "--task", "T2V"]) == 0
    assert "best of N by pq" in capsys.readouterr().out
    assert cli.main(["best-of-n", "--by", "if", "--task", "T2V"]) == 0  # offline: nothing to pick, said per input
    assert "no candidate of 4 has a score by if" in capsys.readouterr().out
    assert cli.main(["best-of-n", "--mix", "final=1", "pq=3", "--task", "T2V"]) == 0
    assert "best of N by 1*final+3*pq" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:  # refused where it is parsed: one line on stderr, exit 2
        cli.main(["best-of-n", "--mix", "final", "--task", "T2V"])
    assert refused.value.code == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("argus best-of-n: argument --mix: 'final': give COLUMN=WEIGHT with a positive weight"), line
    assert cli.main(["best-of-n", "--mix", "nope=1", "--task", "T2V"]) == 1
    assert "'nope' is not in the table" in capsys.readouterr().out


def test_best_of_n_asset_and_human_alignment_with_firm_evaluators(demo):
    from argus_dagster.assets import ALL_ASSETS, GRAPH_CHECKS
    from argus_dagster.assets.alignment import human_alignment
    from argus_dagster.assets.firm import best_of_n
    from argus_dagster.resources import resources_for

    res = dg.materialize(ALL_ASSETS + GRAPH_CHECKS, selection=[best_of_n, human_alignment], instance=local_instance(),
                         resources=resources_for(),
                         run_config={"ops": {"best_of_n": {"config": {"weights": {"final": 1.0, "pq": 1.0}}}}})
    assert res.success
    picks = res.output_for_node("best_of_n")
    assert picks.filter(pl.col("task") == "T2V").height == len(demo["ids"])
    assert picks["evaluator"][0] == "1*final+1*pq"
    table = res.output_for_node("human_alignment")
    assert {"argus:final", "firm_pq"} <= set(table["evaluator"])


def test_export_firm_offline_writes_nothing_and_says_why(demo, tmp_path, capsys):
    out = tmp_path / "firm"
    assert cli.main(["export", "firm", "--out", str(out)]) == 1
    text = capsys.readouterr().out
    assert "wrote 0 instances" in text and "not valid on every dimension" in text
    assert (out / "train.jsonl").read_text() == ""
    assert "- Left out: 12 videos: 12 x not valid on every dimension" in (out / "README.md").read_text()


def test_best_of_n_over_samples_of_one_model_from_stored_tables(tmp_path):
    """The candidate store holds one video per model and input, so samples come as stored tables whose
    ids carry the flat layout's ``__<k>``; the humans rated the same samples."""
    vs = pl.DataFrame({"task": ["T2V"] * 6, "model": ["gen"] * 6,
                       "input_id": ["p0__0", "p0__1", "p0__2", "p1__0", "p1__1", "p1__2"],
                       "final_score": [3.0, 8.0, 5.0, 6.0, 6.0, 2.0]})
    fs = pl.DataFrame({"task": ["T2V"] * 6, "model": ["gen"] * 6, "input_id": vs["input_id"],
                       "if_rating": [1, 4, 5, 2, 2, 2], "wc_rating": [3] * 6, "pq_rating": [2, 3, 4, 5, 1, 1]})
    human = tmp_path / "T2V.csv"
    human.write_text("input_id,model,score\n" + "".join(
        f"{i},gen,{s}\n" for i, s in zip(vs["input_id"], [1, 5, 3, 2, 4, 1])))
    picks, texts = best_of_n_tables({"a": vs}, {"b": fs}, "final", human={"T2V": human}, n_boot=200)
    p = {r["input_id"]: r for r in picks.iter_rows(named=True)}
    assert (p["p0"]["pick_sample"], p["p0"]["margin"], p["p0"]["n_candidates"]) == ("1", 3.0, 3)
    assert p["p1"]["n_tied"] == 2 and p["p1"]["pick_sample"] in ("0", "1") and p["p1"]["margin"] == 0.0
    assert p["p1"]["drawn_from"] == ["gen#0", "gen#1"]
    # p0: pick human 5 = best (hit); p1: a draw between #0 (human 2) and #1 (human 4, the best): hit 1/2,
    # human score 3 in expectation. Hit rate (1 + 0.5) / 2; picks (5 + 3) / 2; random means 3 and 7/3.
    assert "pick is a human-best candidate:   0.750" in texts["T2V"]
    assert "mean human score: picks   4.000, random   2.667" in texts["T2V"]
    by_if, _ = best_of_n_tables({"a": vs}, {"b": fs}, "if")
    assert by_if.filter(pl.col("input_id") == "p0")["pick_sample"][0] == "2"


def _said(out: str) -> list[str]:
    """What argus evaluate said while it ran (its lines that start with the elapsed time), each less that
    time and its indent; the tables printed after are not among them."""
    return [m.group(1).strip() for line in out.splitlines() if (m := re.match(r"^\[\s*[\d.]+s\](.*)$", line))]


def test_protocol_firm_runs_only_firm_and_exports_from_the_stored_rows(tmp_path, monkeypatch, capsys):
    """`argus evaluate --protocol firm` against the loopback judge: no rubric, evidence or judge call,
    one planner call per input; `argus export firm` then writes one record per video and dimension."""
    from tests.integration.test_firm_graph import MODELS, PROMPTS, _bench
    from tests.servers.openai_server import FakeVlmServer, kind_of

    bench, cands = _bench(tmp_path)
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home" / "dagster_home"))
    with FakeVlmServer() as srv:
        monkeypatch.setenv("ARGUS_VLM_BASE_URL", srv.base_url)
        monkeypatch.setenv("ARGUS_VLM_MODEL", "judge-a")
        assert cli.main(["evaluate", "--bench", str(bench), "--candidates", str(cands), "--protocol", "firm"]) == 0
        kinds = [kind_of(r["body"]) for r in srv.requests]
        out = capsys.readouterr().out
        assert "FIRM-Video (mean ratings" in out and "Leaderboard" not in out
        assert kinds.count("firm_if_plan") == len(PROMPTS)
        assert kinds.count("firm_if_verify") == len(PROMPTS) * len(MODELS)
        assert not {"rubric", "judge", "qa"} & set(kinds)
        # asked again, Dagster finds nothing of FIRM-Video missing or out of date: nothing runs
        where = ["--bench", str(bench), "--candidates", str(cands), "--protocol", "firm"]
        n = len(srv.requests)
        assert cli.main(["evaluate", *where]) == 0
        out = capsys.readouterr().out
        assert len(srv.requests) == n, out
        assert _said(out)[-1] == "FIRM-Video up to date (--force runs it again)", out
        # a prompt edited: the task's checklists and every model's scores are asked for again, and only the
        # edited prompt is planned anew (the others' frozen checklists come from the content cache)
        manifest = bench / "T2V" / "manifest.jsonl"
        manifest.write_text(manifest.read_text().replace("take 0", "take zero"))
        assert cli.main(["evaluate", *where]) == 0
        out = capsys.readouterr().out
        again = [kind_of(r["body"]) for r in srv.requests[n:]]
        assert again.count("firm_if_plan") == 1 and again.count("firm_if_verify") == len(MODELS), again
        said = _said(out)
        reasons = [line for line in said if line.startswith("prompt of ")]
        assert reasons and re.fullmatch(r"prompt of T2V/p0 changed: 1 input, (\d+) videos?(; .*)?", reasons[0]).group(1) \
            == str(len(MODELS)), said  # the edited input, with its videos (one per model)
        # the protocol's loop is done, then the pages follow once (its scores are what they show), with
        # the cost ledger whose FIRM-Video stages moved
        assert len(reasons) == 1 and said[-2] == "FIRM-Video done", said
        assert said[-1].startswith("pages: overview, sample browser, index of evaluations, with the cost ledger ("), said
        n = len(srv.requests)
        path = tmp_path / "firm"
        assert cli.main(["export", "firm", "--out", str(path), "--task", "T2V"]) == 0
        assert len(srv.requests) == n  # the export calls nothing
    lines = [json.loads(x) for x in (path / "train.jsonl").read_text().splitlines()]
    assert len(lines) == len(PROMPTS) * len(MODELS) * 3
    assert len({(r["video_id"], r["dimension"]) for r in lines}) == len(lines)
    assert f"wrote {len(lines)} instances" in capsys.readouterr().out
    # what a trainer does: load the JSON lines with `datasets`, open every image with PIL
    datasets = module("datasets")
    from PIL import Image

    ds = datasets.load_dataset("json", data_files=str(path / "train.jsonl"), cache_dir=str(tmp_path / "hf"))["train"]
    assert ds.num_rows == len(lines) and set(ds.column_names) >= {"images", "image_roles", "instruction", "target"}
    for r in ds:
        assert set(r["target"]) == {"reasoning", "score"} and 1 <= r["target"]["score"] <= 5
        assert "rating" not in r["target"]["reasoning"] and "share met" not in r["target"]["reasoning"]
        for p in r["images"]:
            with Image.open(path / p) as im:
                im.load()
    card = (path / "README.md").read_text()
    assert f"- videos: {len(PROMPTS) * len(MODELS)}; instances: {len(lines)}" in card


def test_export_of_real_edits_shows_the_source_frames_and_the_edit_instruction(real_data, tmp_path, monkeypatch, capsys):
    """TV2V on the VEFX-Bench edits in ../shared/data: `argus evaluate --protocol firm`, then `argus export
    firm`; instruction following shows the source video's frames before the edit's, with the edit
    instruction, and every image is a file PIL opens."""
    import shutil

    from PIL import Image

    from tests.servers.openai_server import FakeVlmServer

    datasets = module("datasets")
    src = real_data / "vefx_samples"
    prompts = [p for p in json.loads((src / "prompts.json").read_text()) if (src / p["original"]).exists()]
    bench, cands = tmp_path / "bench" / "TV2V", tmp_path / "cands" / "TV2V" / "editor"
    (bench / "media").mkdir(parents=True)
    cands.mkdir(parents=True)
    edits = {}
    for p in prompts:
        iid = p["original"].removesuffix("_original.mp4")
        shutil.copy(src / p["original"], bench / "media" / p["original"])
        shutil.copy(src / p["edited"], cands / f"{iid}.mp4")
        edits[iid] = p["instruction"]
    (bench / "manifest.jsonl").write_text("".join(
        json.dumps({"id": i, "prompt": t, "source_video": f"media/{i}_original.mp4"}) + "\n" for i, t in edits.items()))
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home" / "dagster_home"))
    with FakeVlmServer() as srv:
        monkeypatch.setenv("ARGUS_VLM_BASE_URL", srv.base_url)
        monkeypatch.setenv("ARGUS_VLM_MODEL", "judge-a")
        assert cli.main(["evaluate", "--bench", str(tmp_path / "bench"), "--candidates", str(tmp_path / "cands"),
                         "--protocol", "firm"]) == 0
    out = tmp_path / "export"
    assert cli.main(["export", "firm", "--out", str(out)]) == 0
    ds = datasets.load_dataset("json", data_files=str(out / "train.jsonl"), cache_dir=str(tmp_path / "hf"))["train"]
    assert ds.num_rows == 3 * len(edits)
    for r in ds:
        assert r["task"] == "TV2V" and r["prompt"] == edits[r["input_id"]]
        assert "Text prompt" not in r["instruction"] and f"{edits[r['input_id']]}" in r["instruction"]
        if r["dimension"] == "instruction_following":
            assert r["image_roles"] == ["source_video"] * 8 + ["output_video"] * 8
            assert f"Edit instruction:\n{edits[r['input_id']]}" in r["instruction"]
        else:
            assert r["image_roles"] == ["output_video"] * 8
        sizes = set()
        for p in r["images"]:
            with Image.open(out / p) as im:
                im.load()
                sizes.add(im.size)
        assert all(max(s) <= 768 for s in sizes)
    card = (out / "README.md").read_text()
    assert f"- tasks: TV2V {len(edits)} videos" in card


def test_the_overview_shows_firm_video_cell_by_cell_in_a_browser(demo, browser, tmp_path):
    """The overview's FIRM-Video section, read in headless Chromium: a row per task and model whose cells
    are the stored firm_scores' summary, and each reason a video is unscored with its count."""
    from argus_dagster.infra.settings import load_settings
    from argus_dagster.protocols.firm.tables import firm_summary_table, unscored_reasons

    page, errors = open_file(browser, load_settings().reports_dir / "index.html")
    section = page.locator("section#firm")
    assert section.count() == 1 and page.locator('nav a[href="#firm"]').count() == 1
    shown = section.locator("table.firm tbody tr").evaluate_all(
        "rs => rs.map(r => [r.dataset.task, r.dataset.model, ...Array.from(r.querySelectorAll('td[data-key]'))"
        ".map(c => [c.dataset.key, c.textContent])])")
    df = pl.concat(stored_partitions("firm_scores", local_instance(), ["T2V"]).values())
    expected = firm_summary_table(df)
    assert len(shown) == expected.height == len(HUMAN_T2V)
    for row, r in zip(shown, expected.iter_rows(named=True)):
        assert row[:2] == [r["task"], r["model"]]
        for key, text in row[2:]:
            value = r[key]
            assert text == ("–" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)), key
    reasons = unscored_reasons(df)
    assert unscored_items(section) == [(r["dimension"], r["n_videos"], r["models"], r["reason"])
                                       for r in reasons.iter_rows(named=True)] and reasons.height
    # each model's name opens its FIRM-Video pages, and each video's VideoArgus report links its page
    reports = load_settings().reports_dir
    links = section.locator("table.firm a.firm-index").evaluate_all("as => as.map(a => [a.textContent, a.href])")
    assert [m for m, _ in links] == expected["model"].to_list()
    for model, url in links:
        index, errs = open_file(browser, Path(unquote(urlsplit(url).path)))
        pages = index.locator("table.firm-index a").evaluate_all("as => as.map(a => a.href)")
        first = index.locator("table.firm-index tbody tr").first.get_attribute("data-input")
        assert len(pages) == len(demo["ids"]) and errs == [], (model, errs)
        index.close()
        video, errs = open_file(browser, Path(unquote(urlsplit(pages[0]).path)))
        assert errs == [], errs
        # the video's VideoArgus report links its FIRM-Video page (--protocol both ran FIRM-Video first)
        report = reports / "T2V" / model / Path(unquote(urlsplit(pages[0]).path)).name
        back, _ = open_file(browser, report)  # (its video's browser copy is made by `argus open`, not from disk)
        assert back.locator("a.firm").evaluate("a => a.href") == pages[0]
        back.close()
        stored = df.filter((pl.col("model") == model) & (pl.col("input_id") == first)).row(0, named=True)
        assert video.locator(".ratings div[data-dimension=if] .why").inner_text() == stored["if_reason"]
        video.close()
    assert errors == [], errors
    page.screenshot(path=str(tmp_path / "overview_firm.png"), full_page=True)
    page.close()
    # the sample browser carries each video's FIRM-Video ratings as stored, its IF cell opening the video's page
    samples, errors = open_file(browser, reports / "samples.html")
    rows = samples.locator("table.samples tbody tr").evaluate_all(
        "rs => rs.map(r => [r.querySelector('td.model').textContent, r.querySelector('td.input_id').textContent,"
        " ['firm_if', 'firm_wc', 'firm_pq'].map(k => r.querySelector('td.' + k).textContent),"
        " (r.querySelector('td.firm_if a') || {}).href || null])")
    stored = {(r["model"], r["input_id"]): r for r in df.iter_rows(named=True)}
    assert len(rows) == len(stored) and errors == [], errors
    for model, video, ratings, link in rows:
        r = stored[(model, video)]
        assert ratings == [("–" if r[f"{d}_rating"] is None else str(r[f"{d}_rating"])) for d in ("if", "wc", "pq")]
        assert Path(unquote(urlsplit(link).path)) == reports / "T2V" / model / "firm" / f"{video}.html"
    samples.close()
