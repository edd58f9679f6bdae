"""A comparison page shows what was asked (prompt, first frame, subject images, source frames) above
what each model made of it."""

import numpy as np

from argus_dagster.outputs.report import FrameRow, jpeg, render_comparison


def _jpeg(seed: int) -> bytes:
    return jpeg(np.random.default_rng(seed).integers(0, 255, (24, 32, 3), dtype=np.uint8))


def test_conditions_above_outputs():
    conditions = [FrameRow("first frame", [_jpeg(0)]), FrameRow("subject images", [_jpeg(1), _jpeg(2)]),
                  FrameRow("source video", [_jpeg(3)], ["0.0s"]), FrameRow("source video", error="x.mp4: <bad>")]
    page = render_comparison(task="TSV2V", input_id="a", prompt="edit <it>", conditions=conditions, models=[
        {"model": "m1", "final_score": 5.0, "scores": {"c": 5}, "frames": [_jpeg(4)], "href": "../m1/a.html"}])
    for label in ("first frame", "subject images", "source video"):
        assert page.index(label) < page.index('class="outputs"') < page.index('href="../m1/a.html"')
    assert page.count("<img") == 5 and "edit &lt;it&gt;" in page and "x.mp4: &lt;bad&gt;" in page


def test_without_conditions_the_prompt_still_leads():
    page = render_comparison(task="T2V", input_id="a", prompt="a cat", models=[])
    assert page.index("a cat") < page.index('class="outputs"') and "<img" not in page
