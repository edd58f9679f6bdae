"""The pages are an asset: ``site`` reads its declared inputs and writes the overview, the sample browser
and the home's index; a page that cannot be written is said in its table and metadata without failing
it; and no other asset writes a page (each run of a real ``argus evaluate`` is watched for the pages it
touched)."""

import json
import re

import dagster as dg
import polars as pl

from argus_dagster.assets.overview import SITE_INPUTS, site
from argus_dagster.client.evaluate import run_all
from argus_dagster.definitions import ROLES, build_definitions
from argus_dagster.infra.settings import evaluation_settings, record_evaluation
from argus_dagster.resources.bench import BenchResource
from argus_dagster.resources.storage import StorageResource
from tests.integration.helpers import t2v_bench


def _bench(tmp_path) -> BenchResource:
    return BenchResource(bench="b", profile="default", reports_dir=str(tmp_path / "reports"),
                         storage_dir=str(tmp_path / "storage"), bench_dir=str(tmp_path / "bench"))


LB = pl.DataFrame({"task": ["T2V"], "model": ["m"], "mean_final": [7.0], "ci_low": [6.0], "ci_high": [8.0],
                   "n_videos": [3], "n_errors": [0]})


def _site(tmp_path, storage: StorageResource) -> dg.Output:
    return site(dg.build_asset_context(), leaderboard=LB, video_scores={}, criterion_scores={}, human_alignment=None,
                firm_scores={}, vefx_leaderboard=None, vefx_scores={}, costs=None, controls=None, bench=_bench(tmp_path),
                storage=storage)


def test_written_and_linked_over_http(tmp_path, monkeypatch):
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path))
    out = _site(tmp_path, StorageResource(reports_url="http://127.0.0.1:9/"))
    assert out.metadata["overview_url"].value == "http://127.0.0.1:9/index.html"
    page = (tmp_path / "reports" / "index.html").read_text(encoding="utf-8")
    assert re.findall(r'<section id="[^"]*" data-task="([^"]+)"', page) == ["T2V"]  # the leaderboard it was given
    pages = {r["page"]: r for r in out.value.iter_rows(named=True)}
    assert pages["overview"]["path"] == "reports/index.html" and pages["samples"]["path"] == "reports/samples.html"
    assert pages["overview"]["bytes"] == (tmp_path / "reports" / "index.html").stat().st_size


def test_a_page_that_cannot_be_written_is_said(tmp_path, monkeypatch):
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path))
    (tmp_path / "reports" / "index.html").mkdir(parents=True)  # in the way of the page
    out = _site(tmp_path, StorageResource())
    assert "overview_url" not in out.metadata and "index.html" in out.metadata["overview_error"].value
    pages = {r["page"]: r for r in out.value.iter_rows(named=True)}
    assert pages["overview"]["error"] and pages["samples"]["error"] is None  # the sample browser stands


def test_each_pair_of_the_win_matrix_has_its_page_and_one_that_fails_is_said(tmp_path, monkeypatch):
    """Three models that share inputs: a page per pair, each a row of the site's table, linked from both
    cells of the overview's win matrix; a pair whose page cannot be written is a row with its error, its
    cells link nothing, and the other pages stand."""
    from html.parser import HTMLParser
    from urllib.parse import unquote

    from argus_dagster.infra.names import file_name

    monkeypatch.setenv("ARGUS_HOME", str(tmp_path))
    models = ["m", "n 猫", "o"]
    videos = pl.DataFrame({"task": "T2V", "model": [m for m in models for _ in range(2)], "input_id": ["p0", "p1"] * 3,
                           "sample": "", "final_score": [7.0, 6.0, 5.0, 4.0, 3.0, 8.0], "judge": "evidence-only"})
    board = pl.DataFrame({"task": ["T2V"] * 3, "model": models, "mean_final": [6.5, 4.5, 5.5], "ci_low": [0.0] * 3,
                          "ci_high": [10.0] * 3, "n_videos": [2] * 3, "n_errors": [0] * 3})
    blocked = tmp_path / "reports" / "pairs" / "m" / "o.html"
    blocked.mkdir(parents=True)  # in the way of the page of m and o
    out = site(dg.build_asset_context(), leaderboard=board, video_scores={"T2V|x": videos}, criterion_scores={},
               human_alignment=None, firm_scores={}, vefx_leaderboard=None, vefx_scores={}, costs=None, controls=None,
               bench=_bench(tmp_path), storage=StorageResource())
    rows = {r["page"]: r for r in out.value.iter_rows(named=True) if r["page"].startswith("pair:")}
    assert set(rows) == {"pair:m vs n 猫", "pair:m vs o", "pair:n 猫 vs o"}
    assert rows["pair:m vs o"]["error"] and rows["pair:m vs o"]["path"] is None
    for page, first, second in (("pair:m vs n 猫", "m", "n 猫"), ("pair:n 猫 vs o", "n 猫", "o")):
        path = f"reports/pairs/{file_name(first)}/{file_name(second)}.html"
        assert rows[page]["error"] is None and rows[page]["path"] == path and (tmp_path / path).is_file()

    class Cells(HTMLParser):
        def __init__(self):
            super().__init__()
            self.row, self.column, self.links = None, None, {}

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "tr":
                self.row = a.get("data-model")
            elif tag == "td":
                self.column = a.get("data-model")
            elif tag == "a" and a.get("class") == "compare-pair":
                self.links[(self.row, self.column)] = unquote(a["href"])

    cells = Cells()
    cells.feed((tmp_path / "reports" / "index.html").read_text(encoding="utf-8"))
    written = {(first, second): f"pairs/{file_name(first)}/{file_name(second)}.html"
               for first, second in (("m", "n 猫"), ("n 猫", "o"))}
    assert cells.links == {**written, **{(b, a): page for (a, b), page in written.items()}}

    # o leaves the evaluation: its pair's page goes with it, the page of m and n stays (the blocked
    # path of m and o is a folder, not a page: left alone)
    blocked.rmdir()
    kept = ["m", "n 猫"]
    again = site(dg.build_asset_context(), leaderboard=board.filter(pl.col("model").is_in(kept)),
                 video_scores={"T2V|x": videos.filter(pl.col("model").is_in(kept))}, criterion_scores={},
                 human_alignment=None, firm_scores={}, vefx_leaderboard=None, vefx_scores={}, costs=None,
                 controls=None, bench=_bench(tmp_path), storage=StorageResource())
    pages = sorted(p.relative_to(tmp_path / "reports").as_posix() for p in (tmp_path / "reports" / "pairs").rglob("*.html"))
    assert pages == [f"pairs/{file_name('m')}/{file_name('n 猫')}.html"]
    assert again.metadata["pair_pages_removed"].value == 1


def test_the_site_reads_what_it_shows_as_declared_inputs():
    graph = build_definitions().resolve_asset_graph()
    parents = {k.to_user_string() for k in graph.get(dg.AssetKey("site")).parent_keys}
    assert parents == set(SITE_INPUTS) == {"leaderboard", "video_scores", "criterion_scores", "human_alignment",
                                           "firm_scores", "vefx_leaderboard", "vefx_scores", "costs", "controls"}
    assert "site" in ROLES.automated and graph.get(dg.AssetKey("site")).automation_condition is not None
    # the leaderboard declares the criterion scores and the judge's repeats it reads
    assert {k.to_user_string() for k in graph.get(dg.AssetKey("leaderboard")).parent_keys} == {
        "video_scores", "criterion_scores", "judge_noise"}
    # the cost ledger is an asset over the stage tables it sums, each a declared input
    assert {k.to_user_string() for k in graph.get(dg.AssetKey("costs")).parent_keys} == {
        "rubrics", "video_scores", "firm_checklists", "firm_scores", "vefx_scores"}
    assert "costs" in ROLES.automated


def test_only_the_site_writes_a_page(tmp_path, monkeypatch):
    """A real ``argus evaluate`` (with people's ratings, so human alignment runs too): after each of its
    runs, the pages are looked at; only the run that materializes ``site`` changed them, once, and what
    they show equals the stored leaderboard."""
    home = tmp_path / "home"
    monkeypatch.setenv("ARGUS_HOME", str(home))
    bench, cands = t2v_bench(tmp_path / "b1", n_inputs=2)
    settings = evaluation_settings(bench, cands)
    record_evaluation(settings)
    settings.human_dir.mkdir(parents=True)
    (settings.human_dir / "T2V.csv").write_text("input_id,model,score\np0,m,4\np1,m,2\n")
    reports = settings.reports_dir
    pages = [reports / "index.html", reports / "samples.html", home / "benches" / "index.html",
             settings.evaluation_dir / "home_row.json"]
    seen = []

    def look(line: str) -> None:
        state = tuple(p.stat().st_mtime_ns if p.exists() else None for p in pages)
        if not seen or state != seen[-1][1]:
            seen.append((line.strip(), state))

    board = run_all(progress=look, settings=settings)
    changed = [line for line, state in seen[1:]]
    assert len(changed) == 1 and changed[0].split("] ", 1)[-1].startswith("pages:"), seen
    assert all(p.exists() for p in pages)
    row = json.loads(pages[3].read_text())
    assert row["facts"].startswith(f"1 tasks, 1 models, {int(board['n_videos'].sum())} videos scored"), row


def test_the_sites_version_moves_with_the_pages_written_not_with_their_bytes(tmp_path, monkeypatch):
    """Two writes of the same pages (each names the time it was written: other bytes) keep one version;
    a page that could not be written (its error) gives another."""
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path))
    first, again = _site(tmp_path, StorageResource()), _site(tmp_path, StorageResource())
    assert first.data_version == again.data_version
    (tmp_path / "reports" / "index.html").unlink()
    (tmp_path / "reports" / "index.html").mkdir()  # in the way of the overview
    failed = _site(tmp_path, StorageResource())
    assert failed.data_version != first.data_version
