"""One bad input costs one row: a frozen rubric nested 200,000 levels deep, a prompt of about 1 MB
(under the manifest's line limit) and 2,000 lines of one id sit among good inputs in one `argus
evaluate`; only their rows fail, with the reason, the error rows make no pages, and the error summary
is a few lines per kind."""

import json
import time

import pytest

from argus_dagster.method.bench import MAX_MANIFEST_LINE, MAX_PROMPT
from argus_dagster.method.rubric.schema import MAX_JSON_DEPTH

from .helpers import t2v_bench

pytestmark = pytest.mark.integration

N_DUPLICATES = 2_000
DEEP = 200_000
HUGE_PROMPT = 1_040_000  # characters: under MAX_MANIFEST_LINE, over spaCy's max_length (1,000,000)


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory):
    from argus_dagster.client.cli import main

    root = tmp_path_factory.mktemp("bad_rows")
    bench, cands = t2v_bench(root, n_inputs=4)
    lines = [{"id": "p0", "prompt": "A textured pattern slides to the left, take 0."},
             {"id": "p1", "prompt": "A textured pattern slides to the left, take 1."},
             {"id": "p2", "prompt": "A textured pattern slides to the left. " * (HUGE_PROMPT // 39 + 1)},
             {"id": "p3", "prompt": "A textured pattern slides to the left, take 3."}]
    lines += [{"id": "p3", "prompt": f"A textured pattern slides to the left, copy {k}."} for k in range(N_DUPLICATES)]
    text = "".join(json.dumps(r) + "\n" for r in lines)
    assert max(len(x.encode()) for x in text.splitlines()) < MAX_MANIFEST_LINE
    assert len(lines[2]["prompt"]) > max(MAX_PROMPT, 1_000_000)
    (bench / "T2V" / "manifest.jsonl").write_text(text)
    (bench / "T2V" / "rubrics").mkdir()
    (bench / "T2V" / "rubrics" / "p1.json").write_text('{"criteria": ' + "[" * DEEP + "]" * DEEP + "}")
    mp = pytest.MonkeyPatch()
    mp.setenv("ARGUS_HOME", str(root / "home"))
    for var in ("ARGUS_BENCH", "ARGUS_BENCH_DIR", "ARGUS_PROFILE"):
        mp.delenv(var, raising=False)
    import contextlib
    import io

    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            t0 = time.perf_counter()
            rc = main(["evaluate", "--bench", str(bench), "--candidates", str(cands)])
        print(f"argus evaluate: {time.perf_counter() - t0:.1f} s")
        from argus_dagster.infra.settings import load_settings

        yield {"rc": rc, "out": out.getvalue(), "settings": load_settings(), "bench": bench}
    finally:
        mp.undo()


def _table(asset, settings):
    from argus_dagster.client.results import stored_partitions

    (df,) = stored_partitions(asset, settings=settings).values()  # one task, one model
    return {r["input_id"]: r for r in df.iter_rows(named=True)}


def test_a_deep_rubric_and_a_huge_prompt_fail_their_rows_only(evaluated):
    assert evaluated["rc"] == 0, evaluated["out"][-3000:]
    s = evaluated["settings"]
    rubrics = _table("rubrics", s)
    assert rubrics["p0"]["error"] is None and rubrics["p3"]["error"] is None
    assert rubrics["p1"]["error"] == (f"{evaluated['bench'] / 'T2V' / 'rubrics' / 'p1.json'}: invalid rubric: JSON "
                                      f"nested deeper than {MAX_JSON_DEPTH} levels; a rubric nests a few")
    n = len(json.loads((evaluated["bench"] / "T2V" / "manifest.jsonl").read_text().splitlines()[2])["prompt"])
    assert rubrics["p2"]["error"] == (f"input invalid: input 'p2' field 'prompt': {n:,} characters (at most "
                                      f"{MAX_PROMPT:,}: the rubric generator's parser and the judge read a prompt "
                                      "whole); shorten it")
    scores = _table("video_scores", s)
    assert scores["p0"]["final_score"] is not None and scores["p3"]["final_score"] is not None
    assert scores["p1"]["final_score"] is None and scores["p2"]["final_score"] is None


def test_duplicate_lines_make_no_pages_and_a_short_summary(evaluated):
    s = evaluated["settings"]
    reports = s.reports_dir / "T2V"
    pages = sorted(p.name for p in (reports / "m").glob("*.html"))
    assert pages == ["index.html", "p0.html", "p1.html", "p3.html"]  # p2's input is invalid: no page
    assert sorted(p.name for p in (reports / "compare").glob("*.html")) == ["p0.html", "p1.html", "p3.html"]
    assert sorted(p.name for p in (reports / "_cards").iterdir()) == ["p0", "p1", "p3"]
    # each bad line is one row of the model's index, with its error
    index = (reports / "m" / "index.html").read_text(encoding="utf-8")
    assert index.count("<tr>") == 1 + 4 + N_DUPLICATES
    assert "!line-5" in index and "is listed again (first on line 4)" in index

    out = evaluated["out"]
    summary = out[out.index("with an error (they are not scored; the rest are):") - 10:].splitlines()
    assert len(summary) < 20, "\n".join(summary[:40])
    kinds = [line.strip() for line in summary if line.startswith("  ") and not line.startswith("      ")]
    assert f"{N_DUPLICATES} x input … is listed again (first on line N)" in kinds
    assert any(line.strip().startswith(f"... and {N_DUPLICATES - 3} more") for line in summary), "\n".join(summary)
