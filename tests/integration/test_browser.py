"""The pages a person looks at, in a real browser: headless Chromium (Debian's ``chromium`` package,
driven by Playwright's Python package, which downloads no browser of its own) opens the overview,
a comparison page and a video's report as `argus open` serves them, and the Dagster UI's asset page
for ``leaderboard`` from a real ``dagster-webserver`` on loopback. Each test checks what a person
would: every task and model there, images loaded, no console errors, links that resolve; and saves a
screenshot under its temporary folder.

Chromium is installed by ``make test`` where missing (``apt-get install -y chromium``); without it
these tests skip with that advice, and fail under ``CI=true`` (tests/integration/chromium.py).
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import polars as pl
import pytest
from scipy.stats import rankdata

from argus_dagster.client.demo import BEST_MODEL, KNOWN_BAD
from argus_dagster.method.inputs import ALL_TASKS

from .helpers import DEMO_HUMAN_T2V
from .helpers import DEMO_ODD_MODEL as ODD_MODEL

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def site(tmp_path_factory, browser, evaluated_demo):
    """The demo as `argus demo` evaluates it, with an extra T2V model with an odd name and people's
    ratings of T2V (``evaluated_demo``, the one evaluation the test run shares), copied here (the
    server writes the pages' WebM beside them), with `argus open` serving its reports on the loopback
    port the evaluation's links name."""
    root = tmp_path_factory.mktemp("browser")
    home = root / "argus"
    shutil.copytree(evaluated_demo["home"], home, symlinks=True)
    port = evaluated_demo["port"]
    served = evaluated_demo["served"]  # the server's root: every evaluation of the home
    base = served + "demo/default/reports/"  # this evaluation's reports
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root), "ARGUS_HOME": str(home),
           "ARGUS_REPORTS_URL": served, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen([sys.executable, "-m", "argus_dagster.client.cli", "open", "--port", str(port)], cwd=root,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        line = server.stdout.readline()
        assert f"at {base}index.html" in line, line + (server.stdout.read() if server.poll() is not None else "")
        # The rest of its output (a line per WebM it encodes, a traceback per request a page dropped) goes
        # to a file: a pipe nobody reads would fill and stop the server mid-write.
        threading.Thread(target=_drain, args=(server.stdout, root / "argus_open.log"), daemon=True).start()
        evaluation = home / "benches" / "demo" / "default"
        lb = pl.read_parquet(evaluation / "storage" / "leaderboard.parquet")
        yield {"home": home, "evaluation": evaluation, "base": base, "served": served, "env": env, "leaderboard": lb,
               "root": root}
    finally:
        _stop(server)


def _drain(stream, path: Path) -> None:
    with open(path, "w") as out:
        for line in stream:
            out.write(line)
            out.flush()


def _open(browser, url: str, shots: Path, name: str):
    """A new page at ``url``; returns it and the console errors and page errors seen while it loads."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    # A video's preload that the browser drops when the page navigates on (net::ERR_ABORTED) is no
    # broken link; every other failed request is (the comparison pages' videos are played to the end
    # of their metadata by their own test).
    page.on("requestfailed", lambda r: None if r.resource_type == "media" and "ERR_ABORTED" in str(r.failure)
            else errors.append(f"request failed: {r.url} {r.failure}"))
    response = page.goto(url, wait_until="load")
    assert response is not None and response.status == 200, (url, response and response.status)
    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
    return page, errors


def _images_loaded(page) -> int:
    """How many images the page has, after asserting every one decoded (naturalWidth > 0)."""
    broken = page.evaluate("Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0))"
                           ".map(i => i.alt || i.src.slice(0, 60))")
    assert broken == [], broken
    return page.evaluate("document.images.length")


def _links_resolve(page, base: str) -> list[str]:
    """Every link on the page that stays on the reports server answers 200; returns them."""
    hrefs = page.evaluate("Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
    local = sorted({h.split("#")[0] for h in hrefs if h.startswith(base)})
    assert not [h for h in hrefs if not h.startswith(base)], hrefs  # nothing off the server, no file:// links
    for url in local:
        with urllib.request.urlopen(url, timeout=30) as resp:
            assert resp.status == 200, url
    return local


def test_overview_every_task_and_model(site, browser, tmp_path):
    page, errors = _open(browser, site["base"] + "index.html", tmp_path, "overview")
    lb = site["leaderboard"]
    assert sorted(lb["task"].unique().to_list()) == sorted(ALL_TASKS)
    for task in ALL_TASKS:
        section = page.locator(f'section[data-task="{task}"]')
        assert section.count() == 1, task
        assert section.locator("h2").inner_text() == task
        shown = section.locator("table.leaderboard tr[data-model]").evaluate_all("rs => rs.map(r => r.dataset.model)")
        expected = lb.filter(pl.col("task") == task).sort("mean_final", descending=True)["model"].to_list()
        assert shown == expected, (task, shown)  # every model, best first
        heat = section.locator("table.heat tr[data-model]").evaluate_all("rs => rs.map(r => r.dataset.model)")
        assert sorted(heat) == sorted(expected)
        assert section.locator("a.compare").count() == 3 and section.locator("a.report").count() == 3 * len(expected)
    alignment = page.locator("section#alignment")
    assert alignment.locator("table.alignment tr").count() >= 2  # a header and at least argus:final
    assert "argus:final" in alignment.inner_text()
    n_scatter = alignment.locator("img").count()
    assert n_scatter >= 1
    assert _images_loaded(page) == n_scatter  # the scatter plots; the leaderboard plots are vector graphics
    assert page.locator("section[data-task] svg.plot").count() == len(ALL_TASKS)
    # clicking a header re-orders the rows: by model name, then by score (ascending, then back to best first)
    table = page.locator('section[data-task="T2V"] table.leaderboard')
    order = lambda: table.locator("tbody tr").evaluate_all("rs => rs.map(r => r.dataset.model)")  # noqa: E731
    scores = lambda: [float(x) for x in table.locator("tbody td.score").evaluate_all(  # noqa: E731
        "cs => cs.map(c => c.dataset.sort)")]
    best_first = order()
    assert len(best_first) == 2 + len(KNOWN_BAD["T2V"]) and scores() == sorted(scores(), reverse=True)
    table.locator("th", has_text="model").click()
    assert order() == sorted(best_first, key=str.lower)
    table.locator("th", has_text="model").click()
    assert order() == sorted(best_first, key=str.lower, reverse=True)
    table.locator("th", has_text="score").click()
    assert scores() == sorted(scores()) and scores()[0] < scores()[-1] and sorted(order()) == sorted(best_first)
    table.locator("th", has_text="score").click()
    assert scores() == sorted(scores(), reverse=True)
    links = _links_resolve(page, site["served"])
    assert len(links) >= len(ALL_TASKS) * (2 + 3 + 6)
    assert site["served"] + "index.html" in links  # up to every evaluation of the home
    assert errors == [], errors
    page.close()


def test_overview_heat_maps_and_dimension_profiles(site, browser, tmp_path):
    """Per task a vector heat map of models x dimensions whose cells are the table's numbers, in the
    leaderboard's order, and a dimension profile per model whose bars are as long as its means; in
    print the graphics stay and the duplicate table goes."""
    page, errors = _open(browser, site["base"] + "index.html", tmp_path, "overview_heat_maps")
    lb = site["leaderboard"]
    for task in ALL_TASKS:
        section = page.locator(f'section[data-task="{task}"]')
        models = lb.filter(pl.col("task") == task).sort("mean_final", descending=True)["model"].to_list()
        heat = section.locator("svg.heatmap")
        assert heat.count() == 1, task
        cells = heat.locator("g.cell").evaluate_all(
            "gs => gs.map(g => { const b = g.getBBox(); return [g.dataset.model, g.dataset.dimension, g.dataset.mean,"
            " b.width, b.height]; })")
        dims = list(dict.fromkeys(c[1] for c in cells))
        assert dims and len(cells) == len(models) * len(dims), (task, len(cells))
        assert [c[0] for c in cells[:: len(dims)]] == models  # rows best first, as the leaderboard
        assert all(w > 20 and h > 10 for *_, w, h in cells)  # drawn, at a readable size
        mean = {(m, d): v for m, d, v, _, _ in cells}
        scored = [float(v) for v in mean.values() if v]
        assert scored and all(0 <= v <= 10 for v in scored), task
        table = section.locator("table.heat tbody tr").evaluate_all(
            "rs => rs.map(r => [r.dataset.model, Array.from(r.cells).slice(1).map(c => c.textContent.trim())])")
        assert [m for m, _ in table] == models
        for model, shown in table:  # the table below says what the cells say
            assert shown == ["–" if not mean[(model, d)] else f"{float(mean[(model, d)]):.1f}" for d in dims], model
        profiles = section.locator("svg.profile")
        assert profiles.evaluate_all("ss => ss.map(s => s.dataset.model)") == models
        for model, bars in zip(models, profiles.evaluate_all(
                "ss => ss.map(s => Array.from(s.querySelectorAll('rect.bar')).map(r => "
                "[r.dataset.dimension, parseFloat(r.dataset.mean), r.getBBox().width]))")):
            assert {d for d, _, _ in bars} == {d for d in dims if mean[(model, d)]}, model
            per_point = {round(w / m, 3) for _, m, w in bars if m > 0.5}  # a bar's length is its mean
            assert len(per_point) <= 1 or max(per_point) - min(per_point) < 0.05 * max(per_point), (model, bars)
    faithful = [float(v) for (m, _), v in mean.items() if m == BEST_MODEL and v]
    bad = [float(v) for (m, _), v in mean.items() if m == KNOWN_BAD[ALL_TASKS[-1]][0] and v]
    assert sum(faithful) / len(faithful) > sum(bad) / len(bad)  # the faithful model's profile is the higher
    page.emulate_media(media="print")
    assert page.locator("svg.heatmap").first.is_visible() and page.locator("svg.profile").first.is_visible()
    assert not page.locator("details.numbers").first.is_visible()
    assert errors == [], errors
    page.close()


def test_overview_is_self_contained_from_a_file(site, browser, tmp_path):
    """Opened as a file (saved, mailed, put on a share), the overview draws its graphics and fetches nothing."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    fetched: list[str] = []
    page.on("request", lambda r: fetched.append(r.url))
    index = site["evaluation"] / "reports" / "index.html"
    page.goto(index.as_uri(), wait_until="load")
    assert fetched == [index.as_uri()], fetched
    sizes = page.locator("svg.plot, svg.heatmap, svg.profile").evaluate_all(
        "ss => ss.map(s => { const b = s.getBoundingClientRect(); return [b.width, b.height]; })")
    n_models = site["leaderboard"].height
    assert len(sizes) == 2 * len(ALL_TASKS) + n_models and all(w > 100 and h > 40 for w, h in sizes), sizes
    page.screenshot(path=str(tmp_path / "overview_from_file.png"), full_page=True)
    page.close()


def test_the_index_of_evaluations_links_each_overview(site, browser, tmp_path):
    page, errors = _open(browser, site["served"], tmp_path, "evaluations")
    rows = page.locator("tr[data-bench]")
    assert rows.count() == 1 and rows.first.get_attribute("data-bench") == "demo"
    assert rows.first.get_attribute("data-profile") == "default"
    text = rows.first.inner_text()
    assert "5 tasks" in text and "evidence-only" in text and "T2V: " in text
    links = _links_resolve(page, site["served"])
    assert links == [site["base"] + "index.html"]
    rows.first.locator("a").click()
    page.wait_for_load_state("load")
    assert page.url == site["base"] + "index.html" and page.locator("section[data-task]").count() == len(ALL_TASKS)
    assert errors == [], errors
    page.close()


def test_comparison_page_shows_conditions_then_every_model(site, browser, tmp_path):
    overview, _ = _open(browser, site["base"] + "index.html", tmp_path, "overview")
    first = overview.locator('section[data-task="TSV2V"] a.compare').first
    input_id = first.inner_text()
    first.click()
    overview.wait_for_load_state("load")
    page, errors = _open(browser, overview.url, tmp_path, "comparison")
    overview.close()
    assert page.locator("h1").inner_text().startswith(f"TSV2V · {input_id}")
    text = page.locator("body").inner_text()
    outputs_at = text.index("Outputs")
    for label in ("subject images", "source video"):  # TSV2V's conditions, above the outputs
        assert -1 < text.find(label) < outputs_at, label
    models = site["leaderboard"].filter(pl.col("task") == "TSV2V")["model"].to_list()
    headings = page.locator("h2 a").all_inner_texts()
    assert sorted(headings) == sorted(models), headings
    assert _images_loaded(page) >= 1 + 1 + 2 * len(models)  # subject, source frames, outputs
    # every model's video and the source video play through argus open (the server makes their WebM)
    assert page.locator("video").count() == 1 + len(models)
    page.wait_for_function("Array.from(document.querySelectorAll('video')).every(v => v.readyState >= 2)",
                           timeout=90_000)
    assert page.evaluate("Array.from(document.querySelectorAll('video')).every(v => v.videoWidth > 0 && !v.error)")
    assert _links_resolve(page, site["base"]) == sorted({site["base"] + "index.html", *(
        urljoin(page.url, h) for h in page.locator("h2 a").evaluate_all("as => as.map(a => a.getAttribute('href'))"))})
    assert errors == [], errors
    page.close()


def test_a_comparison_grid_plays_its_models_side_by_side_and_together(site, browser, tmp_path):
    """At 1400 px the models' videos sit in one row; play all, a seek and pause all reach every one;
    below them the criteria, in their words, by models, each score coloured, its reason a click away."""
    overview, _ = _open(browser, site["base"] + "index.html", tmp_path, "overview-grid")
    url = urljoin(overview.url, overview.locator('section[data-task="T2V"] a.compare').first.get_attribute("href"))
    overview.close()
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    assert page.goto(url, wait_until="load").status == 200
    page.wait_for_function("Array.from(document.querySelectorAll('.grid video')).every(v => v.readyState >= 2)",
                           timeout=90_000)
    assert page.locator(".media-notice").is_hidden()  # said while the copies were made, gone once they play
    boxes = page.locator(".grid video").evaluate_all(
        "vs => vs.map(v => { const b = v.getBoundingClientRect(); return [b.x, b.y, b.width]; })")
    models = site["leaderboard"].filter(pl.col("task") == "T2V")["model"].to_list()
    assert len(boxes) == len(models) >= 3
    assert len({round(y) for _, y, _ in boxes}) == 1  # one row
    assert [x for x, _, _ in boxes] == sorted(x for x, _, _ in boxes) and all(w > 150 for *_, w in boxes)
    assert boxes[-1][0] + boxes[-1][2] <= 1400
    page.locator("#play-all").click()
    page.wait_for_function("Array.from(document.querySelectorAll('.grid video')).every(v => v.currentTime > 0.3)",
                           timeout=30_000)
    page.locator("#pause-all").click()
    page.wait_for_function("Array.from(document.querySelectorAll('.grid video')).every(v => v.paused)")
    page.evaluate("document.querySelector('.grid video').currentTime = 0.5")  # one seek: every video follows
    page.wait_for_function("Array.from(document.querySelectorAll('.grid video')).every("
                           "v => Math.abs(v.currentTime - 0.5) < 0.1)", timeout=30_000)
    page.locator(".grid video").nth(1).evaluate("v => v.play()")  # one played: all play
    page.wait_for_function("Array.from(document.querySelectorAll('.grid video')).every(v => !v.paused)",
                           timeout=30_000)
    page.locator("#pause-all").click()
    rows = page.locator("table.criteria tr[data-criterion]")
    assert rows.count() >= 3
    first = rows.first
    words = first.locator("td").first.inner_text()
    assert first.get_attribute("data-criterion") in words and len(words) > len(first.get_attribute("data-criterion")) + 5
    scored = page.locator("table.criteria td.score[style] details").first
    assert scored.locator("summary").is_visible()
    scored.locator("summary").click()
    assert len(scored.inner_text()) > len(scored.locator("summary").inner_text())  # the reason, once clicked
    page.screenshot(path=str(tmp_path / "comparison_grid.png"), full_page=True)
    assert errors == [], errors
    page.close()


def test_a_video_on_a_comparison_page_can_be_sought(site, browser, tmp_path):
    """Chromium seeks a video only where the server answers its ``Range`` request (206): a video sent
    whole (200) is not seekable, and a seek to its middle lands back at 0."""
    overview, _ = _open(browser, site["base"] + "index.html", tmp_path, "overview-seek")
    url = urljoin(overview.url, overview.locator('section[data-task="T2V"] a.compare').first.get_attribute("href"))
    overview.close()
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    answered: list[int] = []
    page.on("response", lambda r: answered.append(r.status) if r.request.resource_type == "media" else None)
    assert page.goto(url, wait_until="load").status == 200
    page.wait_for_function("Array.from(document.querySelectorAll('video')).every(v => v.readyState >= 1)",
                           timeout=90_000)
    sought = page.evaluate("""async () => {
        const v = document.querySelector('video');
        const target = Math.round(v.duration * 50) / 100;
        const seeked = new Promise(r => v.addEventListener('seeked', () => r(true), {once: true}));
        v.currentTime = target;
        const done = await Promise.race([seeked, new Promise(r => setTimeout(() => r(false), 20000))]);
        return {seekable: v.seekable.length ? v.seekable.end(0) : 0, duration: v.duration, target: target,
                at: v.currentTime, done: done};
    }""")
    assert sought["done"] and sought["target"] > 0, sought
    assert sought["seekable"] == sought["duration"] and abs(sought["at"] - sought["target"]) < 0.05, sought
    assert answered and set(answered) == {206}, answered  # every video request answered with its range
    page.close()


def _people_rows(page) -> list[tuple]:
    """The sample browser's evaluator-against-people table: (model, video, final score, its place, people's
    mean, their place, difference), each read from its own cell."""
    keys = ["final_score", "evaluator_place", "people", "people_place", "difference"]
    return [(r[0], r[1], *map(float, r[2:])) for r in page.locator("table.people tbody tr").evaluate_all(
        "(rs, keys) => rs.map(r => [r.dataset.model, r.children[2].textContent].concat("
        "keys.map(k => r.querySelector('td[data-key=' + k + ']').textContent)))", keys)]


def test_the_sample_browser_filters_and_sorts_as_a_polars_query_does(site, browser, tmp_path):
    """reports/samples.html: every stored video one row; a column's filter and a header's click give the
    rows a polars query gives; the pairs of models that disagree most first; links that resolve."""
    from argus_dagster.infra.tables import stored_table

    overview, _ = _open(browser, site["base"] + "index.html", tmp_path, "overview-samples")
    overview.locator("nav a.samples").click()
    overview.wait_for_load_state("load")
    assert overview.url == site["base"] + "samples.html"
    overview.close()
    page, errors = _open(browser, site["base"] + "samples.html", tmp_path, "samples")
    stored = stored_table(site["evaluation"] / "storage", "video_scores").with_columns(pl.col("sample").fill_null(""))

    def shown() -> list[tuple]:
        return [tuple(r) for r in page.locator("table.samples tbody tr").evaluate_all(
            "rs => rs.map(r => ['task', 'model', 'input_id', 'sample', 'final_score'].map("
            "k => r.querySelector('td.' + k).textContent))")]

    def keys(df: pl.DataFrame) -> set[tuple]:
        return {(r["task"], r["model"], r["input_id"], r["sample"]) for r in df.iter_rows(named=True)}

    every = shown()
    assert len(every) == stored.height and {r[:4] for r in every} == keys(stored)
    assert page.locator("#count").inner_text() == f"{stored.height} of {stored.height} videos shown"
    page.locator('input[data-key="model"]').fill(BEST_MODEL.upper())  # any case
    page.locator('input[data-key="final_score"]').fill(">=5")
    query = stored.filter(pl.col("model").str.to_lowercase().str.contains(BEST_MODEL.lower(), literal=True)
                          & (pl.col("final_score") >= 5))
    assert query.height and {r[:4] for r in shown()} == keys(query)
    page.locator('input[data-key="final_score"]').fill("2..6")
    query = stored.filter(pl.col("model").str.to_lowercase().str.contains(BEST_MODEL.lower(), literal=True)
                          & pl.col("final_score").is_between(2, 6))
    assert {r[:4] for r in shown()} == keys(query)
    page.locator('input[data-key="final_score"]').fill("five")  # no filter: said on the box, all rows kept
    assert page.locator('input[data-key="final_score"].invalid').count() == 1
    page.locator('input[data-key="model"]').fill("")
    page.locator('input[data-key="final_score"]').fill("")
    header = page.locator('table.samples th[data-key="final_score"]')
    header.click()
    ascending = sorted(stored["final_score"].drop_nulls().to_list())
    assert [r[4] for r in shown()] == [f"{x:.2f}" for x in ascending] + ["–"] * stored["final_score"].null_count()
    header.click()  # again: the other way, a missing score still last
    assert [r[4] for r in shown()][:len(ascending)] == [f"{x:.2f}" for x in reversed(ascending)]
    per = stored.filter(pl.col("final_score").is_not_null()).group_by("task", "input_id", "model").agg(
        pl.col("final_score").mean())
    pairs = per.join(per, on=["task", "input_id"], suffix="_b").filter(pl.col("model") < pl.col("model_b"))
    largest = (pairs["final_score"] - pairs["final_score_b"]).abs().max()
    first = page.locator("table.disagreements tbody tr").first.locator("td.difference").inner_text()
    assert first == f"{largest:.2f}"
    # the evaluator against people (the bench's T2V ratings): each rated video's place among the task's
    # rated videos on both sides, as scipy ranks them, the largest difference of places first
    people = _people_rows(page)
    rated = (stored.filter((pl.col("task") == "T2V") & pl.col("model").is_in(list(DEMO_HUMAN_T2V))
                           & pl.col("final_score").is_not_null())
             .with_columns(pl.col("model").replace_strict(DEMO_HUMAN_T2V, return_dtype=pl.Float64).alias("people")))
    n = rated.height
    ours = dict(zip(zip(rated["model"], rated["input_id"]),
                    zip(rated["final_score"], (rankdata(rated["final_score"]) - 1) / (n - 1) * 100,
                        rated["people"], (rankdata(rated["people"]) - 1) / (n - 1) * 100)))
    assert people and len(people) == min(n, 50)
    for model, video, score, place, rating, their_place, difference in people:
        want = ours[(model, video)]
        assert (score, place, rating, their_place) == pytest.approx((round(want[0], 2), round(want[1]), want[2],
                                                                     round(want[3])), abs=0.51), (model, video)
        assert difference == pytest.approx(abs(want[1] - want[3]), abs=0.51)
    assert people[0][6] == pytest.approx(max(abs(w[1] - w[3]) for w in ours.values()), abs=0.51)
    links = _links_resolve(page, site["base"])
    assert len([u for u in links if "/compare/" in u]) >= 1 and len(links) > len(ALL_TASKS)
    assert errors == [], errors
    page.close()
    local = browser.new_page()  # opened as a file, it draws its rows and fetches nothing
    fetched: list[str] = []
    local.on("request", lambda r: fetched.append(r.url))
    path = site["evaluation"] / "reports" / "samples.html"
    local.goto(path.as_uri(), wait_until="load")
    assert fetched == [path.as_uri()] and local.locator("table.samples tbody tr").count() == stored.height
    local.close()


def test_report_page_from_the_overview(site, browser, tmp_path):
    overview, _ = _open(browser, site["base"] + "index.html", tmp_path, "overview")
    cell = overview.locator('section[data-task="TI2V"] a.report').first
    cell.click()
    overview.wait_for_load_state("load")
    page, errors = _open(browser, overview.url, tmp_path, "report")
    overview.close()
    assert page.locator("h1").inner_text().startswith("TI2V · ")
    body = page.locator("body").inner_text()
    assert "first frame" in body and "final" in body and page.locator("table tr").count() > 1
    assert _images_loaded(page) >= 2  # the first frame and the output frames
    links = _links_resolve(page, site["base"])
    assert any("/compare/" in u for u in links) and site["base"] + "index.html" in links  # back to the overview
    assert any(u.endswith("/index.html") and u != site["base"] + "index.html" for u in links)  # the model's index
    assert errors == [], errors
    page.close()


def test_pages_of_a_model_with_an_odd_name_link_back(site, browser, tmp_path):
    overview, _ = _open(browser, site["base"] + "index.html", tmp_path, "overview")
    link = overview.locator('section[data-task="T2V"] table.leaderboard a', has_text=ODD_MODEL)
    assert link.count() == 1
    index_url = urljoin(overview.url, link.get_attribute("href"))
    overview.close()
    index, errors = _open(browser, index_url, tmp_path, "odd_model_index")
    assert ODD_MODEL in index.locator("h1").inner_text()
    reports = [u for u in _links_resolve(index, site["base"]) if u != site["base"] + "index.html"]
    assert len(reports) == 3
    index.close()
    page, more = _open(browser, reports[0], tmp_path, "odd_model_report")
    links = _links_resolve(page, site["base"])
    assert urlsplit(index_url).path in {urlsplit(u).path for u in links} and any("/compare/" in u for u in links)
    compare = next(u for u in links if "/compare/" in u)
    page.goto(compare, wait_until="load")
    assert ODD_MODEL in page.locator("h2 a").all_inner_texts()
    assert len(_links_resolve(page, site["base"])) >= 2
    assert errors == [] and more == [], errors + more
    page.close()


def test_a_win_matrix_cell_opens_the_pairs_comparison(site, browser, tmp_path):
    """T2V's win matrix: the cell of the odd-named model's row and flicker's column, and the cell the
    other way round, link to one page; followed, it shows flicker against the odd-named model (B - A, the
    names in sorted order), and its overall row's n and B - A on each task are compare()'s on the stored
    tables; every link on it (both models' reports, the overview) answers."""
    from argus_dagster.infra.tables import stored_table
    from argus_dagster.method.compare import OVERALL, compare

    other = "flicker"
    a, b = sorted([ODD_MODEL, other])
    overview, _ = _open(browser, site["base"] + "index.html", tmp_path, "overview-pairs")
    matrix = overview.locator('section[data-task="T2V"] table.winrate')
    cell = lambda row, column: matrix.locator(  # noqa: E731
        f'tr[data-model="{row}"] td[data-model="{column}"] a.compare-pair')
    assert cell(ODD_MODEL, other).count() == cell(other, ODD_MODEL).count() == 1
    there = cell(other, ODD_MODEL).evaluate("a => a.href")
    cell(ODD_MODEL, other).click()
    overview.wait_for_load_state("load")
    assert overview.url == there
    url = overview.url
    overview.close()
    page, errors = _open(browser, url, tmp_path, "pair")
    assert page.locator("h1").inner_text() == f"{b} against {a}"
    storage = site["evaluation"] / "storage"
    videos, criteria = stored_table(storage, "video_scores"), stored_table(storage, "criterion_scores")
    side = lambda t, m: t.filter(pl.col("model") == m)  # noqa: E731
    c = compare(side(videos, a), side(videos, b), side(criteria, a), side(criteria, b), a=a, b=b)
    overall = c.rows.filter(pl.col("dimension") == OVERALL)
    assert overall["task"].to_list() == ["T2V"]  # the odd-named model is a T2V model only
    shown = {t: (n, diff) for t, n, diff in page.locator(f'tr[data-dimension="{OVERALL}"]').evaluate_all(
        "rs => rs.map(r => [r.dataset.task, r.querySelector('td.n').textContent,"
        " r.querySelector('td.diff').textContent])")}
    assert shown == {r["task"]: (str(r["n_inputs"]), f"{r['diff']:+.2f}") for r in overall.iter_rows(named=True)}
    t2v = overall.filter(pl.col("task") == "T2V").row(0, named=True)
    assert t2v["n_inputs"] == 3 and t2v["diff"] < 0  # flicker scores below the faithful videos on every input
    links = _links_resolve(page, site["base"])
    assert site["base"] + "index.html" in links and any("/T2V/" in u for u in links)
    assert errors == [], errors
    page.close()


@pytest.fixture(scope="module")
def dagster_ui(site):
    """The real dagster-webserver on the evaluated instance."""
    port = _free_port()
    log = open(site["root"] / "webserver.log", "w")
    dagster_home = site["evaluation"] / "dagster_home"  # as `make ui` pins it (argus evaluations --env)
    assert (dagster_home / "dagster.yaml").exists()
    env = {**site["env"], "DAGSTER_HOME": str(dagster_home)}
    proc = subprocess.Popen([str(Path(sys.executable).parent / "dagster-webserver"), "-w", "workspace.yaml",
                             "-h", "127.0.0.1", "-p", str(port)], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.time() + 120
        while True:
            try:
                with urllib.request.urlopen(url + "server_info", timeout=5):
                    break
            except (OSError, urllib.error.URLError):
                pass
            if proc.poll() is not None or time.time() > deadline:
                raise AssertionError(f"webserver did not come up: {(site['root'] / 'webserver.log').read_text()[-3000:]}")
            time.sleep(0.5)
        yield url
    finally:
        _stop(proc)
        log.close()


def test_dagster_ui_leaderboard_asset_links_to_the_reports_over_http(site, browser, dagster_ui, tmp_path):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("console", lambda m: errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.goto(dagster_ui + "assets/leaderboard", wait_until="load")
    # The latest materialization's metadata, once the app has queried it: the plots on the leaderboard's,
    # the overview on the site's (the asset that writes it).
    page.get_by_text("plot_T2V_url").first.wait_for(timeout=90_000)
    skip = page.get_by_role("button", name="Skip").first  # the UI's first-visit dialog: a person skips it
    try:
        skip.wait_for(state="visible", timeout=20_000)
        skip.click()
        skip.wait_for(state="hidden", timeout=10_000)
    except PlaywrightTimeout:  # not shown in this Dagster release or setting
        pass
    for task in ALL_TASKS:
        assert page.get_by_text(f"plot_{task}_url").count() >= 1, task
    hrefs = page.evaluate("Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
    assert not [h for h in hrefs if h.startswith("file:")], hrefs
    page.goto(dagster_ui + "assets/site", wait_until="load")
    link = page.locator(f'a[href="{site["base"]}index.html"]').first
    link.wait_for(timeout=90_000)
    assert page.get_by_text("overview_url").count() >= 1
    hrefs = page.evaluate("Array.from(document.querySelectorAll('a[href]')).map(a => a.href)")
    assert not [h for h in hrefs if h.startswith("file:")], hrefs
    link.scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "dagster_leaderboard.png"), full_page=False)
    assert errors == [], errors
    # The link opens the overview in the browser, from the UI's origin.
    response = page.goto(link.get_attribute("href"), wait_until="load")
    assert response.status == 200 and page.locator("section[data-task]").count() == len(ALL_TASKS)
    page.close()


def test_cli_leaderboard_is_quiet(site):
    """`argus leaderboard` prints the tables and nothing of Dagster's DEBUG logging."""
    out = subprocess.run([sys.executable, "-m", "argus_dagster.client.cli", "leaderboard"], cwd=site["root"],
                         env=site["env"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "DEBUG" not in out.stdout + out.stderr, out.stdout + out.stderr
    assert all(f"{task}\n" in out.stdout for task in ALL_TASKS)


def test_report_links_in_metadata_are_http_and_resolve(site, dagster_ui):
    """Every URL in the reports', leaderboard's, alignment's and site's latest metadata points at the reports server and answers."""
    query = ("query($k: AssetKeyInput!) { assetOrError(assetKey: $k) { ... on Asset { "
             "assetMaterializations(limit: 50) { partition metadataEntries { label "
             "... on UrlMetadataEntry { url } ... on MarkdownMetadataEntry { mdStr } } } } } }")
    urls = []
    for asset in ("diagnostic_reports", "leaderboard", "human_alignment", "site"):
        req = urllib.request.Request(dagster_ui + "graphql", headers={"Content-Type": "application/json"},
                                     data=json.dumps({"query": query, "variables": {"k": {"path": [asset]}}}).encode())
        with urllib.request.urlopen(req, timeout=60) as resp:
            body = json.loads(resp.read())
        mats = body["data"]["assetOrError"]["assetMaterializations"]
        assert mats, asset
        for mat in mats:
            for entry in mat["metadataEntries"]:
                if entry.get("url"):
                    urls.append(entry["url"])
                for part in (entry.get("mdStr") or "").split("](")[1:]:  # Markdown links to pages
                    if part.startswith("http"):
                        urls.append(part.split(")")[0])
    assert any(u.endswith("/index.html") for u in urls) and len(urls) > 10
    assert site["served"] + "index.html" in urls  # the index of every evaluation of the home
    for url in sorted(set(urls)):
        assert url.startswith(site["base"]) or url == site["served"] + "index.html", url
        with urllib.request.urlopen(url, timeout=30) as resp:
            assert resp.status == 200, url


def test_overview_alignment_and_best_of_n_read_cell_by_cell(site, browser, tmp_path):
    """The human-alignment table shows each stored figure with its bootstrap interval; best of N on T2V
    (the people's ratings are one per model: DEMO_HUMAN_T2V) equals the pick made by hand from the
    stored final scores among the rated models: how often it is the people's best, and their mean."""
    from argus_dagster.infra.tables import stored_table

    page, errors = _open(browser, site["base"] + "index.html", tmp_path, "overview-alignment")
    stored = stored_table(site["evaluation"] / "storage", "human_alignment")
    rows = page.locator("section#alignment table.alignment tr[data-evaluator]").evaluate_all(
        "rs => rs.map(r => [r.dataset.task, r.dataset.evaluator, r.dataset.dimension, Object.fromEntries("
        "Array.from(r.querySelectorAll('td[data-key]')).map(c => [c.dataset.key, c.textContent]))])")
    assert len(rows) == stored.height
    by = {(r["task"], r["evaluator"], r["dimension"]): r for r in stored.iter_rows(named=True)}
    intervals = 0
    for task, evaluator, dimension, cells in rows:
        want = by[(task, evaluator, dimension)]
        for key in ("srcc", "krcc", "plcc", "rmse", "pairwise_acc"):
            value, lo, hi = want[key], want[f"{key}_lo"], want[f"{key}_hi"]
            if value is None or value != value:
                assert cells[key] == "–", (key, cells)
            elif lo == lo and hi == hi:
                assert cells[key] == f"{value:.2f}[{lo:.2f}, {hi:.2f}]", (key, cells)
                intervals += 1
            else:
                assert cells[key] == f"{value:.2f}", (key, cells)
    assert intervals >= 4  # argus:final on T2V has an interval on every figure
    # best of N on T2V, by hand: among the models people rated, the one with the highest final score
    videos = stored_table(site["evaluation"] / "storage", "video_scores")
    rated = videos.filter((pl.col("task") == "T2V") & pl.col("model").is_in(list(DEMO_HUMAN_T2V))
                          & pl.col("final_score").is_not_null())
    hits, picked = [], []
    for _, g in rated.group_by("input_id"):
        top = g.sort("final_score", descending=True)
        assert top["final_score"][0] > top["final_score"][1]  # no tie to draw
        picked.append(DEMO_HUMAN_T2V[top["model"][0]])
        hits.append(picked[-1] == max(DEMO_HUMAN_T2V[m] for m in g["model"]))
    row = page.locator('section#best-of-n tr[data-task="T2V"]')
    cell = lambda key: row.locator(f'td[data-key="{key}"]').evaluate("c => c.firstChild.textContent")  # noqa: E731
    assert int(cell("n_rated")) == len(hits)
    assert float(cell("hit_rate")) == pytest.approx(sum(hits) / len(hits), abs=0.006)
    assert float(cell("random_hit_rate")) == pytest.approx(0.25, abs=0.006)  # one best model of four
    assert float(cell("mean_human_pick")) == pytest.approx(sum(picked) / len(picked), abs=0.006)
    assert float(cell("mean_human_random")) == pytest.approx(sum(DEMO_HUMAN_T2V.values()) / 4, abs=0.006)
    every = videos.filter(pl.col("task") == "T2V").group_by("input_id").agg(pl.col("final_score").is_not_null().sum())
    assert int(cell("n_inputs")) == every.filter(pl.col("final_score") >= 2).height
    assert errors == [], errors
    page.close()
