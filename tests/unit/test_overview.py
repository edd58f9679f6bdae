"""The overview page: every task and model, escaped text, links only to pages that exist (encoded as
the server needs them), the heat map from criterion scores, coverage columns when the table has them;
and the loopback server behind `argus open`."""

import re
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import numpy as np
import polars as pl
import pytest

from argus_dagster.infra.environment import reports_base_url
from argus_dagster.infra.files import write_atomic
from argus_dagster.infra.names import file_name
from argus_dagster.infra.settings import report_url
from argus_dagster.infra.storage import LOCAL, Storage
from argus_dagster.outputs.overview import SORT_SCRIPT, render_overview, stored_table, write_overview
from argus_dagster.outputs.serve import make_server, serve_in_thread, url_of

EVIL = '<script>alert(1)</script>'
ODD = "猫 cat/../x"


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs, self.tags, self.imgs = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        a = dict(attrs)
        if tag == "a" and not a.get("href", "#").startswith("#"):
            self.hrefs.append(a["href"])
        if tag == "img":
            self.imgs.append(a["src"])


def _lb(**extra) -> pl.DataFrame:
    rows = [{"task": "T2V", "model": "good", "mean_final": 8.0, "ci_low": 7.0, "ci_high": 9.0, "n_videos": 2, "n_errors": 0},
            {"task": "T2V", "model": EVIL, "mean_final": 2.0, "ci_low": 1.0, "ci_high": 3.0, "n_videos": 1, "n_errors": 1},
            {"task": "TV2V", "model": ODD, "mean_final": None, "ci_low": None, "ci_high": None, "n_videos": 0, "n_errors": 1}]
    return pl.DataFrame([{**r, **{k: v[i] for k, v in extra.items()}} for i, r in enumerate(rows)])


def _site(tmp_path):
    """Pages for some of the videos, as diagnostic_reports writes them."""
    reports = tmp_path / "reports"
    for task, model, iid in (("T2V", "good", "a"), ("T2V", EVIL, ODD), ("TV2V", ODD, ODD)):
        write_atomic(reports / task / file_name(model) / f"{file_name(iid)}.html", "<p>report</p>")
        write_atomic(reports / task / file_name(model) / "index.html", "<p>index</p>")
        write_atomic(reports / task / "compare" / f"{file_name(iid)}.html", "<p>compare</p>")
    videos = pl.DataFrame({"task": ["T2V", "T2V", "T2V", "TV2V"], "model": ["good", EVIL, "good", ODD],
                           "input_id": ["a", ODD, "missing-page", ODD], "final_score": [8.0, 2.0, 7.0, None],
                           "error": [None, None, None, "no video"]})
    criteria = pl.DataFrame({"task": ["T2V"] * 4, "model": ["good", "good", EVIL, EVIL], "input_id": ["a"] * 4,
                             "dimension": [13, 16, 13, 16], "score": [9, 7, 1, None]})
    return reports, videos, criteria


def test_every_task_and_model_escaped_and_linked(tmp_path):
    reports, videos, criteria = _site(tmp_path)
    page = render_overview(reports, _lb(), criterion_scores=criteria, video_scores=videos)
    parsed = _Links()
    parsed.feed(page)
    # the one script is the page's own sorting script: a model named <script> is text
    assert parsed.tags.count("script") == 1 and f"<script>{SORT_SCRIPT}</script>" in page and "&lt;script&gt;" in page
    for task in ("T2V", "TV2V"):
        assert f'data-task="{task}"' in page
    assert page.count('<tr data-model="good">') == 2  # leaderboard and heat map
    assert parsed.imgs == [] and page.count('<svg class="plot"') == 2  # a vector interval plot per task
    # Every link resolves to a file under the reports folder once the server decodes it.
    assert parsed.hrefs
    for h in parsed.hrefs:
        target = (reports / unquote(h)).resolve()
        assert target.is_file() and reports.resolve() in target.parents, h
    assert "T2V/good/a.html" in parsed.hrefs and "missing-page" not in "".join(parsed.hrefs)
    assert f"TV2V/compare/{file_name(ODD).replace('%', '%25')}.html" in parsed.hrefs
    # Heat map: good's d13 mean 9.0, the other model's unscored d16 shows as a dash.
    assert ">9.0</td>" in page and ">1.0</td>" in page


def test_coverage_is_one_cell_and_the_evaluation_is_said_once(tmp_path):
    reports, videos, criteria = _site(tmp_path)
    lb = _lb(n_scored=[10, 3, 0], n_criteria=[12, 12, 9.7], weight_scored=[0.9, 0.29, 0.0],
             judge=["evidence-only"] * 3, bench=["mine"] * 3, profile=["vlm-only"] * 3,
             needs_vlm=[["c1", "c2"], ["c2", "c9"], []], ci_scope=["scored criteria only"] * 3, cost_usd=[1.5, 2.0, 0.0])
    page = render_overview(reports, lb, criterion_scores=criteria, video_scores=videos)
    assert "<th>covers</th>" in page and ">10 of 12 criteria · 90% of the weight</td>" in page
    assert ">0 of 9.7 criteria · 0% of the weight</td>" in page
    for internal in ("n_scored", "weight_scored", "ci_scope", "needs_vlm", "<th>judge</th>", "<th>bench</th>"):
        assert internal not in page, internal
    assert page.count("judged by <b>evidence-only</b>") == 2  # once per task, not per row
    assert page.count("bench <b>mine</b> · profile <b>vlm-only</b> · judge <b>evidence-only</b>") == 1
    assert page.count("c1, c2, c9") == 1 and "2 criteria need a VLM" not in page  # T2V's, once
    assert "<th>cost usd</th>" in page and "<td>1.50</td>" in page  # a column beyond these, readable
    assert "<th>covers</th>" not in render_overview(reports, _lb())


SVG = "{http://www.w3.org/2000/svg}"


def _svgs(page: str, cls: str) -> list[ET.Element]:
    """The page's inline SVGs of class ``cls``, each parsed as a standalone XML document (as a
    browser opening it from a file would)."""
    out = []
    for chunk in page.split(f'<svg class="{cls}"')[1:]:
        out.append(ET.fromstring(f'<svg class="{cls}"' + chunk.split("</svg>")[0] + "</svg>"))
    return out


def test_the_heat_map_and_the_dimension_profiles_are_vector_graphics_of_the_means(tmp_path):
    reports, videos, criteria = _site(tmp_path)
    criteria = pl.concat([criteria, pl.DataFrame({"task": ["T2V"], "model": ["good"], "input_id": ["b"],
                                                  "dimension": [13], "score": [6]})], how="diagonal_relaxed")
    page = render_overview(reports, _lb(), criterion_scores=criteria, video_scores=videos)
    (heat,) = _svgs(page, "heatmap")  # T2V's; TV2V has no criterion scores
    cells = {(c.get("data-model"), c.get("data-dimension")): c.get("data-mean") for c in heat.iter(f"{SVG}g")
             if c.get("class") == "cell"}
    # good: d13 (9 + 6) / 2 = 7.5, d16 7; the other model: d13 1, d16 unscored (its only score is null)
    assert cells == {("good", "13"): "7.5", ("good", "16"): "7.0", (EVIL, "13"): "1.0", (EVIL, "16"): ""}
    texts = [(t.text or "") + "".join(c.tail or "" for c in t) for t in heat.iter(f"{SVG}text")]  # not the tooltips
    assert "7.5" in texts and "–" in texts and "d13" in texts and EVIL in texts  # the name as text, escaped
    rows = [c.get("data-model") for c in heat.iter(f"{SVG}g") if c.get("data-dimension") == "13"]
    assert rows == ["good", EVIL]  # the leaderboard's order, best first
    profiles = _svgs(page, "profile")
    assert [p.get("data-model") for p in profiles] == ["good", EVIL]
    bars = {p.get("data-model"): {b.get("data-dimension"): float(b.get("data-mean")) for b in p.iter(f"{SVG}rect")
                                  if b.get("class") == "bar"} for p in profiles}
    assert bars == {"good": {"13": 7.5, "16": 7.0}, EVIL: {"13": 1.0}}
    widths = {b.get("data-dimension"): float(b.get("width")) for b in profiles[0].iter(f"{SVG}rect")
              if b.get("class") == "bar"}
    assert widths["13"] > widths["16"] > 0 and abs(widths["13"] / widths["16"] - 7.5 / 7.0) < 0.01  # length = score
    for svg in [heat, *profiles]:
        assert "href" not in ET.tostring(svg, encoding="unicode")  # nothing fetched: it works from file://
    assert page.count('<svg class="heatmap"') == 1 and 'class="heat sortable"' in page  # the numbers, as a table too


def test_tables_sort_by_a_clicked_header(tmp_path):
    reports, videos, criteria = _site(tmp_path)
    page = render_overview(reports, _lb(), criterion_scores=criteria, video_scores=videos)
    assert page.count('<table class="leaderboard sortable"><thead>') == 2 and "<tbody>" in page
    assert 'class="heat sortable"' in page and 'class="inputs sortable"' in page
    assert "<script>" in page and "th.addEventListener('click'" in page  # inline: the page is one file
    assert 'data-sort="8.0">8.00</td>' in page and 'data-sort="">–</td>' in page  # numbers sort as numbers


def test_the_costs_of_each_task_and_model_and_the_evaluations_tokens_per_video_and_share_cached(tmp_path):
    reports, videos, criteria = _site(tmp_path)
    page = render_overview(reports, _lb(), criterion_scores=criteria, video_scores=videos)
    assert "share cached" not in page.split("<nav>")[0]  # tables without the ledger: nothing claimed
    costs = videos.with_columns(vlm_requests=pl.Series([10, 6, 10, 0]), vlm_retries=pl.Series([1, 0, 0, 0]),
                                vlm_parse_retries=pl.Series([0, 2, 0, 0]),
                                prompt_tokens=pl.Series([4000, 3000, 2000, 0]),
                                cached_tokens=pl.Series([3000, 2400, 1500, 0]),
                                completion_tokens=pl.Series([500, 300, 500, 0]), images_sent=pl.Series([80, 48, 80, 0]),
                                image_bytes_sent=pl.Series([4_000_000, 2_400_000, 4_000_000, 0]))
    page = render_overview(reports, _lb(), criterion_scores=criteria, video_scores=costs)
    # 9000 prompt tokens over 4 videos, 6900 of them cached
    assert ("prompt tokens per video 2250, share cached <b data-cost=\"cached_share\">77%</b>"
            in page.split("<nav>")[0])
    t2v = page.split('data-task="T2V"')[1].split("</section>")[0].split('<table class="costs">')[1]
    good = t2v.split('<tr data-stage="videoargus" data-model="good">')[1].split("</tr>")[0]
    # stage, model, videos, requests, request-seconds, prompt tokens, per video, share cached, completion
    # tokens, retries, parse retries, images, image MB
    assert good == ("<td>videoargus</td><td>good</td><td>2</td><td>20</td><td>0.0</td><td>6000</td><td>3000</td>"
                    "<td>75%</td><td>1000</td><td>1</td><td>0</td><td>160</td><td>8.0</td>")
    assert "&lt;script&gt;" in t2v and "<script>" not in t2v  # a model name is text, never markup
    assert page.count("<script>") == 1  # the page's own sorting script only
    assert "no VLM calls recorded" in page.split('data-task="TV2V"')[1]


def test_write_overview_reads_stored_tables(tmp_path):
    reports, videos, criteria = _site(tmp_path)
    storage = tmp_path / "storage"
    (storage / "video_scores" / "good").mkdir(parents=True)
    videos.write_parquet(storage / "video_scores" / "good" / "T2V.parquet")
    (storage / "criterion_scores").mkdir()
    criteria.write_parquet(storage / "criterion_scores" / "x.parquet")
    _lb().write_parquet(storage / "leaderboard.parquet")
    assert stored_table(storage, "leaderboard").height == 3 and stored_table(storage, "human_alignment") is None
    index = write_overview(reports, storage)
    page = index.read_text(encoding="utf-8")
    assert "bench" not in page.split("<nav>")[0]
    assert index == reports / "index.html" and 'href="T2V/good/a.html"' in page and ">9.0</td>" in page
    assert "no human ratings" in page


def test_server_serves_the_folder_on_loopback_only(tmp_path, monkeypatch):
    reports, videos, criteria = _site(tmp_path)
    write_overview(reports, tmp_path / "storage", leaderboard=_lb())
    (tmp_path / "secret.txt").write_text("outside")
    server = serve_in_thread(reports)
    try:
        assert server.server_address[0] == "127.0.0.1"
        with urllib.request.urlopen(url_of(server, "index.html"), timeout=10) as resp:
            assert "T2V" in resp.read().decode()
        # A page named from an odd id, by the URL settings.report_url gives it.
        monkeypatch.setenv("ARGUS_REPORTS_URL", url_of(server))
        page = reports / "TV2V" / "compare" / f"{file_name(ODD)}.html"
        with urllib.request.urlopen(report_url(page, reports, reports_base_url()), timeout=10) as resp:
            assert resp.read() == b"<p>compare</p>"
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(url_of(server, "../secret.txt"), timeout=10)
        with pytest.raises(OSError, match="is taken"):
            make_server(reports, server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()


def test_report_url_setting(tmp_path, monkeypatch):
    monkeypatch.delenv("ARGUS_REPORTS_URL", raising=False)
    monkeypatch.setenv("ARGUS_REPORTS_PORT", "4040")
    reports = tmp_path / "reports"
    assert report_url(reports / "T2V" / "a b.html", reports, reports_base_url()) == "http://127.0.0.1:4040/T2V/a%20b.html"
    monkeypatch.setenv("ARGUS_REPORTS_URL", "https://reports.example/argus")
    assert report_url(reports / "index.html", reports, reports_base_url()) == "https://reports.example/argus/index.html"
    assert report_url(tmp_path / "elsewhere.png", reports, reports_base_url()).startswith("file://")
    monkeypatch.delenv("ARGUS_REPORTS_URL")
    monkeypatch.setenv("ARGUS_REPORTS_PORT", "http")
    with pytest.raises(ValueError, match="ARGUS_REPORTS_PORT"):
        reports_base_url()
    # a storage links through the reports server it was made with, and nothing from the environment
    assert Storage(reports_url="http://127.0.0.1:9/").link(reports / "x y.html", reports) == "http://127.0.0.1:9/x%20y.html"
    assert LOCAL.link(reports / "x.html", reports) == (reports / "x.html").resolve().as_uri()
    assert Storage(reports_url="http://127.0.0.1:9/").link(reports / "x.html") == (reports / "x.html").resolve().as_uri()


def test_human_alignment_table_and_scatter_plots(tmp_path):
    import cv2
    import numpy as np

    from argus_dagster.protocols.alignment.metrics import ALIGNMENT_SCHEMA

    reports, videos, criteria = _site(tmp_path)
    row = {c: None for c in ALIGNMENT_SCHEMA}
    row.update(evaluator="argus:final", dimension="overall", n_videos=12, srcc=0.81, krcc=0.66, mae=0.9,
               srcc_lo=0.62, srcc_hi=0.93, krcc_lo=float("nan"), krcc_hi=float("nan"))
    alignment = pl.DataFrame([{"task": "T2V", **row}], schema={"task": pl.String, **ALIGNMENT_SCHEMA})
    ok, png = cv2.imencode(".png", np.full((20, 30, 3), 200, np.uint8))
    write_atomic(reports / "alignment" / "T2V" / "argus-final.png", png.tobytes())
    page = render_overview(reports, _lb(), video_scores=videos, alignment=alignment)
    parsed = _Links()
    parsed.feed(page)
    tr = re.search(r'<tr data-task="T2V" data-evaluator="argus:final" data-dimension="overall">(.*?)</tr>', page).group(1)
    cells = dict(re.findall(r'<td data-key="(\w+)">(.*?)</td>', tr))
    assert cells["evaluator"] == "argus:final" and cells["n_videos"] == "12" and cells["krcc"] == "0.66"
    assert cells["srcc"] == '0.81<br><span class="muted interval">[0.62, 0.93]</span>'  # its interval beneath
    assert cells["plcc"] == "–"
    assert len(parsed.imgs) == 1  # the scatter plot (the leaderboard plots are inline SVG)
    assert "no human ratings" not in page


def test_the_bench_is_named(tmp_path):
    page = write_overview(tmp_path / "reports", tmp_path / "storage", leaderboard=_lb(),
                          bench="/data/<my> bench").read_text(encoding="utf-8")
    assert "bench <b>/data/&lt;my&gt; bench</b>" in page and page.count("/data/&lt;my&gt; bench") == 1


def test_one_server_for_every_evaluation_of_a_home_and_their_index(tmp_path, monkeypatch):
    """`argus open` serves ``$ARGUS_HOME/benches``: the index of evaluations and each one's reports,
    by the URLs report_url gives, and never an evaluation's instance, tables or cache."""
    import json
    import time

    from argus_dagster.outputs.overview import write_evaluations_index
    from argus_dagster.outputs.serve import REPORTS_ONLY

    root = tmp_path / "home" / "benches"
    evil = "<img src=x onerror=alert(1)>"  # a bench's recorded name is shown escaped
    for bench, profile, lb in (("alpha", "default", _lb()), ("alpha", "judge=big,vlm-only", _lb().head(1)),
                               ("evil", "default", None)):
        folder = root / bench / profile
        (folder / "storage").mkdir(parents=True)
        name = evil if bench == "evil" else bench
        (folder / "evaluation.json").write_text(json.dumps({"bench": name, "profile": profile, "bench_dir": "/b",
                                                            "candidates_dir": "/c", "last_evaluated": time.time()}))
        (folder / "dagster_home").mkdir()
        (folder / "dagster_home" / "runs.db").write_text("private")
        if lb is not None:
            lb.write_parquet(folder / "storage" / "leaderboard.parquet")
            write_overview(folder / "reports", folder / "storage")
    index = write_evaluations_index(root)
    page = index.read_text()
    assert EVIL not in page and evil not in page and page.count("<tr data-bench") == 3 and "no leaderboard yet" in page
    assert "T2V: good 8.00" in page  # each task's leading model
    links = _Links()
    links.feed(page)
    assert links.hrefs == ["alpha/default/reports/index.html", "alpha/judge%3Dbig%2Cvlm-only/reports/index.html"]
    server = serve_in_thread(root, 0, REPORTS_ONLY)
    monkeypatch.setenv("ARGUS_REPORTS_URL", url_of(server))
    try:
        for href in links.hrefs:
            with urllib.request.urlopen(url_of(server, href), timeout=10) as resp:
                assert "all evaluations" in resp.read().decode()  # and the overview links back
        reports = root / "alpha" / "judge=big,vlm-only" / "reports"
        with urllib.request.urlopen(report_url(reports / "index.html", reports, url_of(server)), timeout=10) as resp:
            assert resp.status == 200
        with urllib.request.urlopen(url_of(server), timeout=10) as resp:
            assert "alpha / judge=big,vlm-only" in resp.read().decode()
        for private in ("alpha/default/dagster_home/runs.db", "alpha/default/evaluation.json",
                        "alpha/default/reports/../dagster_home/runs.db", "alpha/default/storage/leaderboard.parquet"):
            with pytest.raises(urllib.error.HTTPError, match="404"):
                urllib.request.urlopen(url_of(server, private), timeout=10)
    finally:
        server.shutdown()
        server.server_close()


def test_pairwise_win_rates_over_shared_inputs(tmp_path):
    from argus_dagster.method.leaderboard import pairwise_win_rates

    # A above B on i1, i2, i3; a tie on i4; below on i5; i6 only A has (not shared); a B sample pair on i2
    rows = [("A", "i1", 9.0), ("A", "i2", 8.0), ("A", "i3", 7.0), ("A", "i4", 5.0), ("A", "i5", 2.0), ("A", "i6", 9.0),
            ("B", "i1", 1.0), ("B", "i2", 9.0), ("B", "i2", 5.0), ("B", "i3", 6.0), ("B", "i4", 5.0), ("B", "i5", 3.0)]
    videos = pl.DataFrame({"task": ["T2V"] * len(rows), "model": [r[0] for r in rows],
                           "input_id": [r[1] for r in rows], "final_score": [r[2] for r in rows]})
    rates = pairwise_win_rates(videos, "T2V", ["A", "B"])
    # hand count: i1 win, i2 8 vs mean(9, 5)=7 win, i3 win, i4 tie (0.5), i5 loss: 3.5 of 5
    assert rates[("A", "B")]["rate"] == pytest.approx(0.7) and rates[("A", "B")]["n"] == 5
    assert rates[("B", "A")]["rate"] == pytest.approx(0.3)
    assert 0.0 <= rates[("A", "B")]["low"] < 0.7 < rates[("A", "B")]["high"] <= 1.0
    # the other side of the same draws: B's interval is A's mirrored
    assert (rates[("B", "A")]["low"], rates[("B", "A")]["high"]) == pytest.approx(
        (1 - rates[("A", "B")]["high"], 1 - rates[("A", "B")]["low"]))
    lb = pl.DataFrame({"task": ["T2V", "T2V"], "model": ["A", "B"], "mean_final": [6.0, 4.8], "ci_low": [4.0, 3.0],
                       "ci_high": [8.0, 6.0], "n_videos": [6, 6], "n_errors": [0, 0]})
    page = render_overview(tmp_path / "reports", lb, video_scores=videos)
    assert 'class="winrate"' in page and ">70%<br>" in page and ">30%<br>" in page and "n=5" in page
    assert "A scores above B on 70% of 5 shared inputs" in page


def test_the_win_matrix_holds_the_best_ranked_models_only(tmp_path):
    """With more models than WIN_MATRIX_MODELS the matrix is of the best ranked, in the leaderboard's order,
    and says so above it: the page grows with the models, not with their square."""
    from argus_dagster.outputs.overview import WIN_MATRIX_MODELS

    n = WIN_MATRIX_MODELS + 5
    models = [f"m{i:02d}" for i in range(n)]
    videos = pl.DataFrame({"task": "T2V", "model": [m for m in models for _ in range(3)],
                           "input_id": [f"i{j}" for _ in models for j in range(3)],
                           "final_score": [10.0 - i * 0.3 + j * 0.01 for i in range(n) for j in range(3)]})
    lb = pl.DataFrame({"task": ["T2V"] * n, "model": models, "mean_final": [10.0 - i * 0.3 for i in range(n)],
                       "ci_low": [0.0] * n, "ci_high": [10.0] * n, "n_videos": [3] * n, "n_errors": [0] * n})
    page = render_overview(tmp_path / "reports", lb, video_scores=videos)
    matrix = re.search(r'<table class="winrate">(.*?)</table>', page, re.S).group(1)
    rows = re.findall(r'<tr data-model="([^"]+)">', matrix)
    heads = re.findall(r"<th>([^<]+)</th>", matrix.split("</tr>", 1)[0])[1:]
    assert rows == heads == models[:WIN_MATRIX_MODELS]
    note = re.search(r'<p class="muted win-note">([^<]+)</p>', page).group(1)
    assert note.startswith(f"the {WIN_MATRIX_MODELS} best-ranked models of {n};"), note


def test_the_win_rate_interval_is_the_bootstrap_over_inputs():
    """The interval drawn as counts of wins, ties and losses is the one drawn by resampling the shared
    inputs themselves (here 40 of them: 22 wins, 6 ties, 12 losses), within the bootstrap's own noise."""
    from argus_dagster.method.leaderboard import pairwise_win_rates

    outcomes = [9.0] * 22 + [5.0] * 6 + [1.0] * 12  # A's score; B scores 5 on every input
    videos = pl.DataFrame({"task": "T2V", "model": ["A"] * 40 + ["B"] * 40, "input_id": [f"i{k}" for k in range(40)] * 2,
                           "final_score": outcomes + [5.0] * 40})
    rate = pairwise_win_rates(videos, "T2V", ["A", "B"], n_resamples=20_000)[("A", "B")]
    per_input = np.array([1.0] * 22 + [0.5] * 6 + [0.0] * 12)
    means = np.random.default_rng(7).choice(per_input, size=(20_000, 40)).mean(axis=1)
    assert rate["rate"] == pytest.approx(25 / 40) and rate["n"] == 40
    assert (rate["low"], rate["high"]) == pytest.approx((np.percentile(means, 2.5), np.percentile(means, 97.5)), abs=0.015)


def test_heat_map_and_profile_labels_are_whole():
    """Every dimension's name and every model's name is drawn whole (wrapped, never cut with an ellipsis)."""
    import re

    from argus_dagster.method.rubric.taxonomy import DIMENSIONS
    from argus_dagster.outputs.overview import heat_svg, label_lines, profile_svg

    model = "a-model-with-a-rather-long-name-from-a-sweep-of-checkpoints-0001"
    dims = sorted(DIMENSIONS)[:6]
    means = pl.DataFrame({"model": [model] * len(dims), "dimension": dims, "mean": [5.0] * len(dims),
                          "n": [3] * len(dims)})
    svg = heat_svg("T2V", [model], means)
    assert "…" not in svg
    drawn = re.findall(r'<text class="dimension-name"[^>]*><title>[^<]*</title>(.*?)</text>', svg)
    lines = [re.findall(r">([^<]*)</tspan>", t) for t in drawn]
    assert [" ".join(x).replace("/ ", "/") for x in lines] == [DIMENSIONS[d] for d in dims]  # whole, in order
    assert all(len(line) <= 11 for x in lines for line in x) and lines == [label_lines(DIMENSIONS[d]) for d in dims]
    assert re.search(rf'class="model-name"[^>]*><title>{model}</title>{model}</text>', svg)
    width = float(re.search(r'width="(\d+)"', svg).group(1))
    assert width > 7 * len(model)  # the model column is as wide as its name
    prof = profile_svg(model, means)
    drawn = re.findall(r"<text[^>]*>(?:<title>[^<]*</title>)?([^<]+)</text>", prof)
    assert "…" not in prof and drawn[0] == model  # the title, whole
    labels = [t for t in drawn if t.startswith("d") and " " in t]
    assert labels == [f"d{d} {DIMENSIONS[d]}" for d in dims]


def test_coverage_is_whole_criteria_per_task(tmp_path):
    from argus_dagster.outputs.overview import task_coverage

    videos = pl.DataFrame({"task": ["T2V"] * 4 + ["TV2V"] * 3, "final_score": [5.0, 6.0, 7.0, None, 4.0, 5.0, 6.0],
                           "n_scored": [3, 3, 4, 0, 6, 5, 4], "n_criteria": [8, 8, 9, 8, 7, 7, 7],
                           "weight_scored": [0.4, 0.38, 0.39, 0.0, 0.82, 0.7, 0.6]})
    # T2V: 2 of its 3 scored videos have 3 of 8 (the unscored one is not counted); weight: their mean
    assert task_coverage(videos, "T2V") == "3 of 8 criteria on most videos, 39% of the weight"
    assert task_coverage(videos, "TV2V") == "6 of 7 criteria on 1 of 3 videos, 71% of the weight"
    assert task_coverage(videos, "TI2V") == "" and task_coverage(None, "T2V") == ""
    page = render_overview(tmp_path, pl.DataFrame({
        "task": ["T2V"], "model": ["m"], "mean_final": [6.0], "ci_low": [5.0], "ci_high": [7.0], "n_videos": [3],
        "n_errors": [1]}), video_scores=videos.with_columns(pl.lit("m").alias("model"), pl.lit("p").alias("input_id")))
    import re

    section = re.search(r'<section id="T2V" data-task="T2V">(.*?)</section>', page, re.S).group(1)
    assert re.findall(r'<p class="coverage">(.*?)</p>', section) == [
        "Its scores cover 3 of 8 criteria on most videos, 39% of the weight."]


def test_a_models_coverage_is_whole_criteria_in_its_row_and_in_the_terminal():
    """The leaderboard keeps what a model's score covers in whole criteria (the commonest count of its
    scored videos), which the overview's row and the terminal's table show instead of a mean."""
    from argus_dagster.infra.tables import VIDEO_SCORES, frame
    from argus_dagster.method.leaderboard import build_leaderboard, format_leaderboard, usual_coverage

    rows = [{"task": "T2V", "model": m, "input_id": f"p{i}", "sample": "", "final_score": 5.0 + i, "n_scored": s,
             "n_criteria": c, "weight_scored": 0.4, "judge": "evidence-only"}
            for m, counts in (("a", [(3, 8), (3, 8), (4, 9)]), ("b", [(5, 7), (5, 7), (5, 7)]))
            for i, (s, c) in enumerate(counts)]
    lb = build_leaderboard(frame(rows, VIDEO_SCORES))
    covers = dict(zip(lb["model"], lb["covers"]))
    assert covers == {"a": "3 of 8 criteria on most videos", "b": "5 of 7 criteria on all 3 videos"}
    assert usual_coverage([2], [6]) == "2 of 6 criteria on every video" and usual_coverage([], []) == ""
    table = format_leaderboard(lb).splitlines()
    at = next(i for i, line in enumerate(table) if line.strip().startswith("rank"))  # below the per-dimension lead
    head = re.split(r"\s{2,}", table[at].strip())
    col = head.index("covers")
    shown = {line.split()[2]: re.split(r"\s{2,}", line.strip())[col] for line in table[at + 1:at + 3]}
    assert shown == {m: f"{covers[m]} · evidence-only" for m in "ab"}, table
    page = render_overview(Path("/nowhere"), lb)
    cells = dict(re.findall(r'<tr data-model="(\w)">.*?<td data-sort="[^"]*">([^<]*)</td>', page))
    assert cells == {m: f"{covers[m]} · 40% of the weight" for m in "ab"}, cells


def test_a_video_whose_evaluation_failed_is_not_covered():
    """A video with an error and no final score (its candidate failed, or no criterion could be scored)
    is counted in errors, not in what the model's scores cover."""
    from argus_dagster.infra.tables import VIDEO_SCORES, frame
    from argus_dagster.method.leaderboard import build_leaderboard, format_leaderboard

    scored = [{"task": "T2V", "model": "a", "input_id": f"p{i}", "sample": "", "final_score": 5.0 + i, "n_scored": 7,
               "n_criteria": 9, "weight_scored": 0.9, "judge": "evidence-only"} for i in range(3)]
    failed = [{"task": "T2V", "model": "a", "input_id": "p3", "sample": "", "n_scored": 0, "n_criteria": 9,
               "weight_scored": 0.0, "error": "no criterion could be scored"},
              {"task": "T2V", "model": "a", "input_id": "p4", "sample": "", "n_scored": 0, "n_criteria": 0,
               "error": "decode failed"}]
    lb = build_leaderboard(frame(scored + failed, VIDEO_SCORES))
    table = format_leaderboard(lb).splitlines()
    at = next(k for k, line in enumerate(table) if line.split()[:1] == ["rank"])
    row = dict(zip(re.split(r"\s{2,}", table[at].strip()), re.split(r"\s{2,}", table[at + 1].strip())))
    assert (row["covers"], row["n"], row["errors"]) == ("7 of 9 criteria on all 3 videos · evidence-only", "3", "2"), table
    page = render_overview(Path("/nowhere"), lb)
    cells = re.findall(r'<tr data-model="(\w)">.*?<td data-sort="[^"]*">([^<]*)</td>', page)
    assert cells == [("a", "7 of 9 criteria on all 3 videos · 90% of the weight")], cells
