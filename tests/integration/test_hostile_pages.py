"""Values that could change how a page parses, in every field, read back in headless Chromium.

The sample browser carries its rows as JSON inside a ``<script>`` element: a value holding ``<!--`` and
then ``<script`` (in one field, or the two halves in two) once made that element swallow the page's own
script, and the table stayed empty. Each page opened from disk here (as a person opens it) must draw
every row with its exact text, count them right, and log no error. The overview embeds no data, but
its inline script and tables meet the same names.
"""

from pathlib import Path
from urllib.parse import unquote, urlsplit

import polars as pl
import pytest

from argus_dagster.infra.names import file_name, sample_file_name
from argus_dagster.infra.tables import VIDEO_SCORES, frame
from argus_dagster.method.leaderboard import build_leaderboard
from argus_dagster.outputs.overview import render_overview
from argus_dagster.outputs.samples import render_samples

from .chromium import launched, open_file

pytestmark = pytest.mark.integration

HOSTILE = ("a<!--<script>", "</script><script>", "]]>", "two\u2028lines\u2029here", "&amp;",
           "\"double\" and 'single'", "<!--", "<script")
TEXT_KEYS = ("task", "model", "input_id", "sample", "judge", "error")


def _judge(value: str) -> str:
    return f"vlm/openai/{value}/judge-4"  # a person reads it as ``openai:<value>`` (evaluator_label)


def _hostile_videos() -> pl.DataFrame:
    """Per hostile value: a scored video of one input by a model of that name (scores 0, 1, 2, ...),
    and an unscored one with the value in every text field; and the two halves of ``<!--<script>`` in
    two fields of one row."""
    rows = [{"task": "T2V", "model": h, "input_id": HOSTILE[0], "sample": "", "final_score": float(i),
             "base_score": float(i), "judge": _judge(h)} for i, h in enumerate(HOSTILE)]
    rows += [{"task": h, "model": h, "input_id": h, "sample": h, "judge": _judge(h), "error": h} for h in HOSTILE]
    rows.append({"task": "T2V", "model": "plain", "input_id": "<!--", "sample": "", "final_score": 9.5,
                 "judge": _judge("<script"), "error": "<script"})
    return frame(rows, VIDEO_SCORES)


def _expected_cells(videos: pl.DataFrame) -> list[tuple[str, ...]]:
    """Each row's text cells as a person reads them: the value itself, the judge as ``openai:<value>``."""
    cells = []
    for r in videos.iter_rows(named=True):
        judge = "openai:" + r["judge"].removeprefix("vlm/openai/").removesuffix("/judge-4")
        cells.append((r["task"], r["model"], r["input_id"], r["sample"], judge, r["error"] or ""))
    return sorted(cells)


@pytest.fixture(scope="module")
def browser():
    with launched() as b:
        yield b


def test_the_sample_browser_shows_every_hostile_row_as_written(browser, tmp_path):
    videos = _hostile_videos()
    reports = tmp_path / "reports"
    linked = reports / "T2V" / file_name(HOSTILE[1]) / (sample_file_name(HOSTILE[0]) + ".html")
    linked.parent.mkdir(parents=True)
    linked.write_text("<p>report</p>")  # one row links its report, through the same script
    path = reports / "samples.html"
    path.write_text(render_samples(reports, videos, None, bench="hostile"))
    page, errors = open_file(browser, path)
    shown = page.locator("table.samples tbody tr").evaluate_all(
        "(rs, keys) => rs.map(r => keys.map(k => r.querySelector('td.' + k).textContent))", list(TEXT_KEYS))
    assert sorted(tuple(r) for r in shown) == _expected_cells(videos)
    assert page.locator("#count").inner_text() == f"{videos.height} of {videos.height} videos shown"
    link = page.locator("table.samples a.report")
    assert link.count() == 1 and link.inner_text() == HOSTILE[0]
    link.click()
    page.wait_for_load_state("load")
    assert Path(unquote(urlsplit(page.url).path)) == linked and page.inner_text("p") == "report"
    assert errors == [], errors
    page.close()
    # The models of input a<!--<script> scored 0, 1, ... 7 by their order in HOSTILE: the pair that
    # disagrees most is the first and the last, named in their names' order, 7 apart.
    page, errors = open_file(browser, path)
    first = page.locator("table.disagreements tbody tr").first.locator("td").all_inner_texts()
    low, high = sorted((HOSTILE[0], HOSTILE[-1]))
    want = [("T2V", HOSTILE[0], low, "0.00" if low == HOSTILE[0] else "7.00", high,
             "7.00" if high == HOSTILE[-1] else "0.00", "7.00")]
    assert [tuple(first)] == want
    assert errors == [], errors


def test_the_overview_names_every_hostile_model_as_written(browser, tmp_path):
    videos = _hostile_videos()
    reports = tmp_path / "reports"
    reports.mkdir()
    path = reports / "index.html"
    path.write_text(render_overview(reports, build_leaderboard(videos), video_scores=videos))
    page, errors = open_file(browser, path)
    names = page.locator('section[data-task="T2V"] table.leaderboard tbody tr td:nth-child(3)').all_text_contents()
    assert sorted(names) == sorted([*HOSTILE, "plain"])
    page.locator('section[data-task="T2V"] table.leaderboard th').nth(2).click()  # its script sorts by model
    names = page.locator('section[data-task="T2V"] table.leaderboard tbody tr td:nth-child(3)').all_text_contents()
    assert names == sorted([*HOSTILE, "plain"], key=str.lower)
    assert errors == [], errors
