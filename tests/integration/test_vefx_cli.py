"""`argus evaluate --protocol vefx` on the real VEFX-Bench edits in ../shared/data, against the loopback
judge: IF, RQ and EE on 1-4 for every edit with the overall their mean, a leaderboard per dimension,
an input without its media an error on its row while the rest proceed; then `argus align` of those
scores with ratings on VEFX's 1-4 scale."""

import json
import shutil
from pathlib import Path

import dagster as dg
import numpy as np
import polars as pl
import pytest

from argus_dagster.client import cli
from argus_dagster.protocols import vefx

from .chromium import open_file, unscored_items

pytestmark = pytest.mark.integration
MODELS = ("editor", "did-nothing")


@pytest.fixture(scope="module")
def vefx_run(real_data, tmp_path_factory):
    from tests.servers.openai_server import FakeVlmServer, kind_of

    src = real_data / "vefx_samples"
    prompts = json.loads((src / "prompts.json").read_text())
    present = [p for p in prompts if (src / p["original"]).exists()]
    assert len(present) >= 3
    root = tmp_path_factory.mktemp("vefx_protocol")
    bench, cands = root / "bench" / "TV2V", root / "candidates" / "TV2V"
    (bench / "media").mkdir(parents=True)
    rows = []
    for p in prompts:  # the entry whose files are not there is an input with a missing source video
        iid = p["original"].removesuffix("_original.mp4")
        if (src / p["original"]).exists():
            shutil.copy(src / p["original"], bench / "media" / p["original"])
            for model, name in zip(MODELS, (p["edited"], p["original"])):
                (cands / model).mkdir(parents=True, exist_ok=True)
                shutil.copy(src / name, cands / model / f"{iid}.mp4")
        rows.append({"id": iid, "prompt": p["instruction"], "source_video": f"media/{p['original']}"})
    (bench / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    # TSV2V: one edit with a subject image (a still scikit-image ships) beside the source video
    import skimage

    tsv = root / "bench" / "TSV2V"
    (tsv / "media").mkdir(parents=True)
    shutil.copy(src / present[0]["original"], tsv / "media" / "source.mp4")
    shutil.copy(Path(skimage.__file__).parent / "data" / "chelsea.png", tsv / "media" / "cat.png")
    (tsv / "manifest.jsonl").write_text(json.dumps({
        "id": "subject_swap", "prompt": "Replace the main subject with the cat of the subject image",
        "source_video": "media/source.mp4", "subject_images": ["media/cat.png"]}) + "\n")
    for model, name in zip(MODELS, (present[0]["edited"], present[0]["original"])):
        (root / "candidates" / "TSV2V" / model).mkdir(parents=True)
        shutil.copy(src / name, root / "candidates" / "TSV2V" / model / "subject_swap.mp4")
    mp = pytest.MonkeyPatch()
    mp.setenv("ARGUS_HOME", str(root / "home"))
    mp.setenv("DAGSTER_HOME", str(root / "home" / "dagster_home"))
    try:
        with FakeVlmServer() as srv:
            mp.setenv("ARGUS_VLM_BASE_URL", srv.base_url)
            mp.setenv("ARGUS_VLM_MODEL", "judge-a")
            rc = cli.main(["evaluate", "--bench", str(root / "bench"), "--candidates", str(root / "candidates"),
                           "--protocol", "vefx"])
            kinds = [kind_of(r["body"]) for r in srv.requests]
            bodies = srv.bodies("vefx")
            n = len(srv.requests)
            rc_again = cli.main(["evaluate", "--bench", str(root / "bench"), "--candidates", str(root / "candidates"),
                                 "--protocol", "vefx"])
            again = len(srv.requests) - n
        yield {"root": root, "rc": rc, "kinds": kinds, "bodies": bodies, "rc_again": rc_again, "again": again,
               "present": [p["original"].removesuffix("_original.mp4") for p in present],
               "missing": [p["original"].removesuffix("_original.mp4") for p in prompts if p not in present]}
    finally:
        mp.undo()


def _scores():
    from argus_dagster.client.instance import local_instance
    from argus_dagster.client.results import stored_partitions

    return pl.concat(stored_partitions("vefx_scores", local_instance(), ["TV2V"]).values())


def test_every_edit_gets_if_rq_ee_on_1_4_and_the_overall_is_their_mean(vefx_run, monkeypatch):
    monkeypatch.setenv("ARGUS_HOME", str(vefx_run["root"] / "home"))
    assert vefx_run["rc"] == 0
    # one request per edit and dimension, nothing of the other protocols
    assert set(vefx_run["kinds"]) == {"vefx"}
    assert len(vefx_run["bodies"]) == (len(vefx_run["present"]) + 1) * len(MODELS) * 3  # TV2V, and TSV2V's one
    df = _scores()
    scored = df.filter(pl.col("input_id").is_in(vefx_run["present"]))
    assert scored.height == len(vefx_run["present"]) * len(MODELS)
    for s in ("if", "rq", "ee"):
        assert scored[f"{s}_score"].null_count() == 0 and scored[f"{s}_score"].is_between(1, 4).all()
        assert scored[f"{s}_evidence"].str.contains("source and edited frames").all()
    for r in scored.iter_rows(named=True):
        assert r["overall"] == pytest.approx((r["if_score"] + r["rq_score"] + r["ee_score"]) / 3, abs=1e-4)
    from argus_dagster.assets.vefx import vefx_scores_valid

    assert vefx_scores_valid(df).passed  # the stored rows pass the asset's check
    assert not vefx_scores_valid(df.with_columns(pl.col("overall") + 0.5)).passed
    # the input without its files: its row says why, and the others were scored all the same
    for iid in vefx_run["missing"]:
        bad = df.filter(pl.col("input_id") == iid)
        assert bad.height == len(MODELS) and bad["overall"].null_count() == len(MODELS)
        assert bad["if_reason"].str.starts_with("input invalid:").all()


def test_tsv2v_edits_are_judged_with_their_subject_image(vefx_run, monkeypatch):
    from argus_dagster.client.instance import local_instance
    from argus_dagster.client.results import stored_partitions
    from tests.servers.openai_server import n_images, request_text

    monkeypatch.setenv("ARGUS_HOME", str(vefx_run["root"] / "home"))
    df = pl.concat(stored_partitions("vefx_scores", local_instance(), ["TSV2V"]).values())
    assert df.height == len(MODELS) and df["overall"].null_count() == 0
    assert all(df[f"{s}_score"].is_between(1, 4).all() for s in ("if", "rq", "ee"))
    bodies = [b for b in vefx_run["bodies"] if "Replace the main subject with the cat" in request_text(b)]
    assert len(bodies) == len(MODELS) * 3
    assert all("[subject_image] 1 frame(s)" in request_text(b) and n_images(b) == 17 for b in bodies)


def test_the_judge_sees_the_instruction_the_source_and_the_edit(vefx_run):
    from tests.servers.openai_server import n_images, request_text

    body = next(b for b in vefx_run["bodies"] if "[subject_image]" not in request_text(b))  # a TV2V edit
    text = request_text(body)
    assert "You evaluate an instruction-guided video edit as VEFX-Bench defines it" in text
    assert "Edit Exclusivity (EE): whether the edit stays exclusive" in text
    assert "[source_video] 8 frame(s)" in text and "[edited_video] 8 frame(s)" in text
    assert n_images(body) == 16
    instructions = {json.loads(x)["prompt"] for x in
                    (vefx_run["root"] / "bench" / "TV2V" / "manifest.jsonl").read_text().splitlines()}
    assert any(f"Editing instruction: {i}" in text for i in instructions)


def test_a_second_run_is_answered_from_the_cache_and_the_leaderboard_is_per_dimension(vefx_run, monkeypatch, capsys):
    monkeypatch.setenv("ARGUS_HOME", str(vefx_run["root"] / "home"))
    assert vefx_run["rc_again"] == 0 and vefx_run["again"] == 0
    from argus_dagster.client.results import vefx_board

    lb = vefx_board()
    assert set(lb["task"]) == {"TV2V", "TSV2V"}
    lb = lb.filter(pl.col("task") == "TV2V")
    assert set(lb["dimension"]) == {vefx.IF, vefx.RQ, vefx.EE, vefx.OVERALL}
    assert set(lb["model"]) == set(MODELS) and (lb["n_videos"] == len(vefx_run["present"]) + len(vefx_run["missing"])).all()
    df = _scores()
    for r in lb.iter_rows(named=True):
        col = vefx.COLUMNS[r["dimension"]]
        vals = df.filter(pl.col("model") == r["model"])[col].drop_nulls()
        assert r["n_scored"] == len(vefx_run["present"]) and r["mean"] == pytest.approx(float(vals.mean()))
        assert r["ci_low"] <= r["mean"] <= r["ci_high"] and 1 <= r["mean"] <= 4


def test_align_reports_vefx_metrics_against_ratings_on_1_4(vefx_run, tmp_path, capsys):
    """People's ratings on 1-4 spanning 2-4 only: the MAE and accuracies are read on 1-4 (the dimension's
    scale), checked here against a computation straight from the two tables."""
    df = _scores().filter(pl.col("overall").is_not_null())
    rng = np.random.default_rng(3)
    rows = []
    for r in df.iter_rows(named=True):
        for d, s in ((vefx.IF, "if"), (vefx.RQ, "rq"), (vefx.EE, "ee")):
            rows.append({"input_id": r["input_id"], "model": r["model"], "dimension": d,
                         "score": int(np.clip(r[f"{s}_score"] + rng.integers(-1, 2), 2, 4))})
    human = tmp_path / "vefx_ratings.csv"
    pl.DataFrame(rows).write_csv(human)
    scores_dir = next(p for p in (vefx_run["root"] / "home").rglob("vefx_scores") if p.is_dir())
    out = tmp_path / "align.csv"
    assert cli.main(["align", "--human", str(human), "--scores", str(scores_dir), "--n-boot", "50"]) == 2
    assert "holds tasks ['TSV2V', 'TV2V']; choose one (--task)" in capsys.readouterr().out
    assert cli.main(["align", "--human", str(human), "--scores", str(scores_dir), "--task", "TV2V", "--n-boot", "50",
                     "--out", str(out)]) == 0
    table = pl.read_csv(out)
    got = {(r["evaluator"], r["dimension"]) for r in table.iter_rows(named=True)}
    assert got == {("vefx_if", vefx.IF), ("vefx_rq", vefx.RQ), ("vefx_ee", vefx.EE), ("vefx_overall", vefx.OVERALL)}
    h = pl.DataFrame(rows)
    for r in table.iter_rows(named=True):
        col = vefx.COLUMNS[r["dimension"]]
        if r["dimension"] == vefx.OVERALL:  # the card: the human overall is the mean of IF, RQ and EE
            hum = h.group_by("input_id", "model").agg(pl.col("score").mean().alias("human"))
        else:
            hum = h.filter(pl.col("dimension") == r["dimension"]).select("input_id", "model", pl.col("score").alias("human"))
        j = df.select("input_id", "model", col).join(hum, on=["input_id", "model"])
        pred, gold = j[col].to_numpy().astype(float), j["human"].to_numpy()
        rating = np.floor(pred + 0.5)  # the evaluator is on 1-4 like the people: its rating is itself, rounded
        assert r["n_videos"] == j.height
        assert r["mae"] == pytest.approx(float(np.mean(np.abs(rating - gold))))
        assert r["accuracy"] == pytest.approx(float(np.mean(np.abs(rating - gold) < 0.5)))
        from scipy import stats

        if len(set(pred)) > 1 and len(set(gold)) > 1:
            assert r["srcc"] == pytest.approx(stats.spearmanr(pred, gold).statistic)
    text = capsys.readouterr().out
    assert "vefx_rq" in text and "no rating scale declared" not in text


def test_the_human_alignment_asset_compares_vefx_scores_with_the_benchs_ratings(vefx_run, monkeypatch):
    """Ratings in the bench's human/TV2V.csv on VEFX's dimensions, with VEFX's own scores: the asset's
    rows are the evaluators vefx_* against them, the human overall the mean of the three."""
    from argus_dagster.assets import ALL_ASSETS, GRAPH_CHECKS
    from argus_dagster.assets.alignment import human_alignment
    from argus_dagster.client.instance import local_instance
    from argus_dagster.infra.settings import load_settings
    from argus_dagster.resources import resources_for

    monkeypatch.setenv("ARGUS_HOME", str(vefx_run["root"] / "home"))
    settings = load_settings()
    df = _scores().filter(pl.col("overall").is_not_null())
    settings.human_dir.mkdir(parents=True, exist_ok=True)
    rows = [{"input_id": r["input_id"], "model": r["model"], "dimension": d, "score": 5 - r[f"{s}_score"]}
            for r in df.iter_rows(named=True) for d, s in ((vefx.IF, "if"), (vefx.RQ, "rq"), (vefx.EE, "ee"))]
    pl.DataFrame(rows).write_csv(settings.human_dir / "TV2V.csv")
    res = dg.materialize(ALL_ASSETS + GRAPH_CHECKS, selection=[human_alignment], instance=local_instance(settings),
                         resources=resources_for(settings=settings), raise_on_error=False)
    assert res.success
    table = res.output_for_node("human_alignment")
    got = {r["evaluator"]: r for r in table.iter_rows(named=True) if r["evaluator"].startswith("vefx_")}
    assert set(got) == {"vefx_if", "vefx_rq", "vefx_ee", "vefx_overall"}
    for name in ("vefx_if", "vefx_rq", "vefx_ee"):  # people rated every edit the reverse of the judge
        assert got[name]["n_videos"] == df.height and got[name]["dimension"] == vefx.EVALUATORS[name]
        assert got[name]["srcc"] == pytest.approx(-1.0)
    assert got["vefx_overall"]["dimension"] == vefx.OVERALL and got["vefx_overall"]["srcc"] == pytest.approx(-1.0)


def test_the_overview_shows_vefx_bench_cell_by_cell_in_a_browser(vefx_run, browser, monkeypatch, tmp_path):
    """The overview's VEFX-Bench section, read in headless Chromium: per edit task, each model's cell per
    dimension is the stored vefx_leaderboard's mean, interval and coverage; the input without its
    files is a reason under it."""
    from argus_dagster.client.results import vefx_board
    from argus_dagster.infra.settings import load_settings

    monkeypatch.setenv("ARGUS_HOME", str(vefx_run["root"] / "home"))
    board = vefx_board()
    page, errors = open_file(browser, load_settings().reports_dir / "index.html")
    section = page.locator("section#vefx")
    assert section.count() == 1 and page.locator('nav a[href="#vefx"]').count() == 1
    cells = section.locator("table.vefx tbody td[data-dimension]").evaluate_all(
        "cs => cs.map(c => [c.closest('tr').dataset.task, c.closest('tr').dataset.model, c.dataset.dimension,"
        " c.innerText.replace(/\\s+/g, ' ').trim()])")
    names = {vefx.IF: "IF", vefx.RQ: "RQ", vefx.EE: "EE", vefx.OVERALL: "overall"}
    expected = {(r["task"], r["model"], names[r["dimension"]]):
                (f"{r['mean']:.2f} [{r['ci_low']:.2f}, {r['ci_high']:.2f}] {r['n_scored']}/{r['n_videos']} scored"
                 if r["mean"] is not None else f"– 0/{r['n_videos']} scored") for r in board.iter_rows(named=True)}
    assert {(t, m, d): text for t, m, d, text in cells} == expected
    assert {t for t, *_ in cells} == {"TV2V", "TSV2V"}
    from argus_dagster.client.instance import local_instance
    from argus_dagster.client.results import stored_partitions
    from argus_dagster.outputs.protocol_sections import vefx_unscored

    scores = pl.concat(stored_partitions("vefx_scores", local_instance()).values(), how="diagonal_relaxed")
    items = unscored_items(section)
    assert items == [(r["dimension"], r["n_videos"], r["models"], r["reason"])
                     for r in vefx_unscored(scores).iter_rows(named=True)]
    n_missing = len(vefx_run["missing"]) * len(MODELS)
    missing_if = [i for i in items if i[0] == "IF"]  # the input without its files: its reason, both models
    assert n_missing and missing_if[0][1:3] == (n_missing, sorted(MODELS)) and missing_if[0][3].startswith("input invalid:")
    assert errors == [], errors
    page.screenshot(path=str(tmp_path / "overview_vefx.png"), full_page=True)
    page.close()
