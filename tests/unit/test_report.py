"""Diagnostic report rendering: text is escaped, frames are embedded, pages stand alone."""

import base64
import json
import re
from html.parser import HTMLParser

import cv2
import numpy as np
import polars as pl

from argus_dagster.outputs.deltas import criterion_deltas, delta_summary, video_deltas
from argus_dagster.outputs.report import (
    COMPARE_SCRIPT,
    FrameRow,
    jpeg,
    json_script,
    leaderboard_png,
    render_comparison,
    render_index,
    render_video_report,
    script_json,
)

EVIL = '<script>alert("x")</script><b onmouseover="steal()">bold</b> & "quotes"'


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.text, self.imgs, self.handlers = [], [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.handlers += [k for k, _ in attrs if k.startswith("on")]
        if tag == "img":
            self.imgs.append(dict(attrs)["src"])

    def handle_data(self, data):
        self.text.append(data)


def _parse(page: str) -> _Collect:
    p = _Collect()
    p.feed(page)
    return p


def _frames(n: int = 3) -> list[bytes]:
    rng = np.random.default_rng(0)
    return [jpeg(rng.integers(0, 255, (90, 160, 3), dtype=np.uint8)) for _ in range(n)]


def _page() -> str:
    criteria = [{
        "criterion_id": "motion", "dimension": 9, "type": "hard", "importance": "high", "hard_cap": 4,
        "fail_threshold": 5.0, "requirement": f"The subject moves. {EVIL}", "scoring_rule": "0: still; 10: fluent",
        "plan": json.dumps([{"tool": "motion_probe", "args": {"on": "output_video"}}, {"tool": "vlm_qa", "args": {}}]),
        "repairs": json.dumps([f"dropped step: {EVIL}"]), "plan_status": "repaired",
        "evidence": json.dumps([{"tool": "motion_probe", "ok": True, "mean_flow": 0.01},
                                {"tool": "vlm_qa", "ok": False, "unavailable": True, "reason": EVIL}]),
        "score": 2, "rationale": f"2/10: barely moves {EVIL}", "judge": "evidence-only/1", "error": None,
    }]
    video = {"final_score": 3.0, "base_score": 2.0, "cap_alpha": 0.5, "caps_fired": ["motion"], "n_scored": 1,
             "n_criteria": 1, "error": None}
    return render_video_report(task="T2V", model="m<1>", input_id="in<put>", prompt=f"A cat {EVIL}",
                               conditions=[FrameRow("first frame", _frames(1))],
                               output=FrameRow("output frames", _frames(3), ["0.0s", "1.0s", "2.0s"]),
                               video=video, criteria=criteria, compare_href="../compare/x.html")


def test_prompt_rationale_and_rubric_text_are_shown_as_text():
    page = _page()
    parsed = _parse(page)
    assert "script" not in parsed.tags and not parsed.handlers
    text = "".join(parsed.text)
    assert text.count('<script>alert("x")</script>') >= 4  # prompt, requirement, repair, rationale, evidence
    assert "A cat <script>" in text and "barely moves <script>" in text and "dropped step: <script>" in text
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "m<1>" in text and "in<put>" in text


def test_report_is_self_contained_with_frames_and_scores():
    page = _page()
    parsed = _parse(page)
    assert len(parsed.imgs) == 4 and all(s.startswith("data:image/jpeg;base64,") for s in parsed.imgs)
    raw = base64.b64decode(parsed.imgs[1].split(",", 1)[1])
    assert cv2.imdecode(np.frombuffer(raw, np.uint8), cv2.IMREAD_COLOR).shape == (90, 160, 3)
    assert not re.search(r'(src|href)="(https?:)?//', page)  # nothing fetched from elsewhere
    text = "".join(parsed.text)
    assert "final 3.00" in re.sub(r"\s+", " ", text) and "caps fired: motion" in text
    assert "motion_probe" in text and "unavailable" in text and "repaired" in text and "2/10" in text


def test_index_and_comparison_pages():
    idx = render_index(task="T2V", model="m", rows=[
        {"input_id": "a<b>", "prompt": EVIL, "final_score": 7.25, "base_score": 8.0, "caps_fired": [], "href": "a.html"},
        {"input_id": "c", "prompt": "p", "final_score": None, "base_score": None, "caps_fired": [], "error": "missing"}])
    parsed = _parse(idx)
    assert "script" not in parsed.tags and "7.25" in "".join(parsed.text) and 'href="a.html"' in idx
    cmp_page = render_comparison(task="T2V", input_id="a", prompt=EVIL, models=[
        {"model": "weak", "final_score": 2.0, "scores": {"motion": 1}, "frames": _frames(1)},
        {"model": "strong", "final_score": 8.0, "scores": {"motion": 9, "style": None}, "frames": _frames(2)}])
    parsed = _parse(cmp_page)
    # the one script is the page's own (the videos played together); the prompt's is text
    assert parsed.tags.count("script") == 1 and f"<script>{COMPARE_SCRIPT}</script>" in cmp_page
    assert 'alert("x")' not in cmp_page.replace(COMPARE_SCRIPT, "") and "&lt;script&gt;" in cmp_page
    assert parsed.handlers == [] and len(parsed.imgs) == 3
    assert cmp_page.index("strong") < cmp_page.index("weak")  # best first


def test_leaderboard_png_decodes():
    png = leaderboard_png("T2V", [{"model": "a", "mean_final": 7.5, "ci_low": 6.0, "ci_high": 8.5},
                                  {"model": "b", "mean_final": None, "ci_low": None, "ci_high": None}])
    img = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR)
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and img.shape[1] == 640 and img.shape[0] > 80


def test_deltas_name_what_moved():
    before = pl.DataFrame({"input_id": ["a", "a", "b", "b"], "criterion_id": ["m", "f", "m", "old"],
                           "score": [7, 5, 3, None]})
    after = pl.DataFrame({"input_id": ["a", "a", "b", "b"], "criterion_id": ["m", "f", "m", "new"],
                          "score": [4, 5, None, 6]})
    d = criterion_deltas(before, after)
    rows = {(r["input_id"], r["criterion_id"]): r for r in d.iter_rows(named=True)}
    assert set(rows) == {("a", "m"), ("b", "m"), ("b", "old"), ("b", "new")}
    assert rows[("a", "m")]["delta"] == -3 and rows[("b", "m")]["change"] == "now unscored"
    assert rows[("b", "old")]["change"] == "removed" and rows[("b", "new")]["change"] == "added"
    assert "`a`: m 7 → 4 (-3)" in delta_summary(d)
    assert criterion_deltas(after, after).height == 0 and criterion_deltas(None, after).height == 0
    vb = pl.DataFrame({"input_id": ["a", "b"], "final_score": [7.0, 5.0], "caps_fired": [[], []]})
    va = pl.DataFrame({"input_id": ["a", "b"], "final_score": [7.0, 3.5], "caps_fired": [[], ["motion"]]})
    vd = video_deltas(vb, va)
    assert vd["input_id"].to_list() == ["b"] and vd["delta"][0] == -1.5 and vd["caps_after"][0] == "motion"


def test_repairs_read_as_sentences_and_unscored_criteria_come_last():
    from argus_dagster.outputs.report import repair_sentence

    assert repair_sentence({"rule": "tool_unavailable", "detail": "dropped step 1: depth is not available in this "
                            "environment"}) == ("A tool this environment cannot run was left out: dropped step 1: "
                                                "depth is not available in this environment.")
    assert repair_sentence({"rule": "new_rule", "detail": "x"}) == "New rule: x."
    scored = {"criterion_id": "motion", "dimension": 9, "type": "soft", "importance": "high", "score": 7,
              "rationale": "moves", "repairs": json.dumps([{"rule": "fallback", "detail": "added vlm_qa"}])}
    unscored = {"criterion_id": "style", "dimension": 3, "type": "soft", "importance": "low", "score": None,
                "rationale": "needs a VLM judge"}
    page = render_video_report(task="T2V", model="m", input_id="a", prompt="a cat", conditions=[],
                               output=FrameRow("output", _frames(1), ["0.0s"]),
                               video={"final_score": 7.0, "caps_fired": []}, criteria=[unscored, scored],
                               video_src="../_media/x.webm")
    assert "{&#x27;rule&#x27;" not in page and "Fallback to the VLM: added vlm_qa." in page
    assert (page.index('class="summary"') < page.index("<code>motion</code>") < page.index("<video")
            < page.index("a cat") < page.index("Not scored (1 of 2)") < page.index("<code>style</code>"))
    assert 'src="../_media/x.webm"' in page
    assert re.findall(r'<a class="firm" href="([^"]*)"', page) == []  # FIRM-Video has not run
    with_firm = render_video_report(task="T2V", model="m", input_id="a", prompt="a cat", conditions=[],
                                    output=FrameRow("output", _frames(1), ["0.0s"]), video={"final_score": 7.0},
                                    criteria=[scored], firm_href="firm/a%20b.html")
    assert re.findall(r'<a class="firm" href="([^"]*)">([^<]*)</a>', with_firm) == [
        ("firm/a%20b.html", "its FIRM-Video checklist")]


def test_a_condition_image_is_decoded_once_for_every_page_that_shows_it(tmp_path):
    """Pages of several inputs (or models, or samples) showing the same still take it from the frame
    pool by content: one decode, the same JPEG on each page; an unreadable one is its row's error."""
    from argus_dagster.assets.reports import condition_rows
    from argus_dagster.infra.frame_pool import FRAME_POOL

    still = np.random.default_rng(7).integers(0, 255, (48, 64, 3), dtype=np.uint8)  # a content no other test has
    a, b = tmp_path / "a.png", tmp_path / "b.png"
    cv2.imwrite(str(a), still)
    b.write_bytes(a.read_bytes())
    before = FRAME_POOL.decodes
    rows = [condition_rows({"first_frame": str(a)}), condition_rows({"subject_images": [str(b)]}),
            condition_rows({"first_frame": str(a)})]
    assert FRAME_POOL.decodes - before == 1
    assert [r[0].label for r in rows] == ["first frame", "subject images", "first frame"]
    assert rows[0][0].frames == rows[1][0].frames == rows[2][0].frames and rows[0][0].frames[0][:2] == b"\xff\xd8"
    bad = tmp_path / "bad.png"
    bad.write_text("not an image")
    (row,) = condition_rows({"first_frame": str(bad)})
    assert not row.frames and "not a readable image" in row.error


def test_a_missing_vlm_is_said_once_per_page_not_on_every_row():
    from argus_dagster.method.evidence.tools.vlm_qa import NO_VLM
    from argus_dagster.outputs.report import NO_VLM_SHORT

    said = f"vlm_qa: {NO_VLM}"
    criteria = [{"criterion_id": f"c{i}", "dimension": 9, "type": "soft", "importance": "high", "requirement": f"r{i}",
                 "scoring_rule": "", "plan": "[]", "repairs": "[]", "evidence": "[]", "judge": "evidence-only/5",
                 "score": 6.0 if i else None,
                 "rationale": (f"6.0/10 (measure): motion -> 6.0. Not used: {said}" if i
                               else f"unscored: no measurable evidence ({said})")} for i in range(3)]
    video = {"final_score": 6.0, "base_score": 6.0, "caps_fired": [], "n_scored": 2, "n_criteria": 3}
    page = render_video_report(task="T2V", model="m", input_id="a", prompt="a cat", conditions=[],
                               output=FrameRow("output frames", []), video=video, criteria=criteria)
    text = "".join(_parse(page).text)
    notices = re.findall(r'<p class="no-vlm muted">(.*?)</p>', page)
    assert len(notices) == 1 and notices[0].startswith("No VLM is configured") and NO_VLM not in text
    # each criterion's rationale cell (the last of its row) keeps its own measure, the VLM named in brief
    rationales = [re.sub(r"<div.*", "", cell) for cell in re.findall(r"<td>([^<]*<div class=\"muted\">[^<]*</div>)</td></tr>", page)]
    assert sorted(rationales) == sorted([f"6.0/10 (measure): motion -&gt; 6.0. Not used: {NO_VLM_SHORT}"] * 2
                                        + [f"unscored: no measurable evidence ({NO_VLM_SHORT})"])
    grid = render_comparison(task="T2V", input_id="a", prompt="a cat", models=[
        {"model": m, "final_score": 6.0, "scores": {"c1": 6.0}, "rationales": {"c1": criteria[1]["rationale"]}}
        for m in ("x", "y")])
    assert len(re.findall(r'<p class="no-vlm muted">', grid)) == 1 and NO_VLM not in grid
    reasons = re.findall(r'<td class="score" data-model="(\w)"[^>]*><details><summary>6</summary>([^<]*)</details>', grid)
    assert reasons == [(m, f"6.0/10 (measure): motion -&gt; 6.0. Not used: {NO_VLM_SHORT}") for m in ("x", "y")]
    plain = render_video_report(task="T2V", model="m", input_id="a", prompt="a cat", conditions=[],
                                output=FrameRow("output frames", []), video=video,
                                criteria=[{**c, "rationale": "measured"} for c in criteria])
    assert "No VLM is configured" not in plain  # said only where a rationale says it


# Values that could change how a page parses the JSON it embeds: a comment and a script opened inside
# it (in one value or in two), its end tag, CDATA's end, the two JavaScript line terminators, an
# entity, quotes, a backslash and a lone escape.
EMBEDDED_HOSTILE = ["a<!--<script>", "<!--", "<script", "</script><script>", "</SCRIPT >", "]]>", "--!>",
                    "two\u2028lines\u2029here", "&amp;", "&lt;", "\"double\" and 'single'", "back\\slash", "\\u003c",
                    "é ✓ 🙂", "\x00nul"]


def test_embedded_json_reads_back_whole_and_holds_no_markup_character():
    """Every hostile value, alone, as a key and nested, comes back from ``json.loads`` as it went in, and
    the text a page embeds has no ``<``, ``>``, ``&``, U+2028 or U+2029 of its own."""
    for value in [*EMBEDDED_HOSTILE, EMBEDDED_HOSTILE, {h: [h, {"nested": h}] for h in EMBEDDED_HOSTILE}]:
        text = script_json(value)
        assert json.loads(text) == value
        assert not set(text) & {"<", ">", "&", "\u2028", "\u2029"}, text
    element = json_script("rows", EMBEDDED_HOSTILE)
    inner = element.removeprefix('<script type="application/json" id="rows">').removesuffix("</script>")
    assert json.loads(inner) == EMBEDDED_HOSTILE and "<" not in inner
