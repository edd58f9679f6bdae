"""`argus evaluate` on real video edits (VEFX-Bench samples in ../shared/data): a real editor's
output against the "did nothing" candidate (the source itself)."""

import json
import shutil

import polars as pl
import pytest

from argus_dagster.client.cli import main

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def vefx_layout(real_data, tmp_path_factory):
    src = real_data / "vefx_samples"
    prompts = [p for p in json.loads((src / "prompts.json").read_text()) if (src / p["original"]).exists()]
    assert len(prompts) >= 3
    root = tmp_path_factory.mktemp("vefx")
    bench, cands = root / "bench" / "TV2V", root / "candidates" / "TV2V"
    (bench / "media").mkdir(parents=True)
    rows = []
    for p in prompts:
        iid = p["original"].removesuffix("_original.mp4")
        shutil.copy(src / p["original"], bench / "media" / p["original"])
        rows.append({"id": iid, "prompt": p["instruction"], "source_video": f"media/{p['original']}"})
        for model, name in (("editor", p["edited"]), ("did-nothing", p["original"])):
            (cands / model).mkdir(parents=True, exist_ok=True)
            shutil.copy(src / name, cands / model / f"{iid}.mp4")
    (bench / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root / "bench", root / "candidates", root / "home"


def test_evaluate_ranks_a_real_edit_above_doing_nothing(vefx_layout, monkeypatch, capsys):
    bench, cands, home = vefx_layout
    monkeypatch.setenv("ARGUS_HOME", str(home))
    assert main(["evaluate", "--bench", str(bench), "--candidates", str(cands), "--task", "TV2V"]) == 0
    out = capsys.readouterr().out
    assert "TV2V" in out and "editor" in out and "did-nothing" in out

    import dagster as dg

    from argus_dagster.assets import ALL_ASSETS
    from argus_dagster.client.instance import local_instance
    from argus_dagster.client.results import current_leaderboard
    from argus_dagster.resources import resources_for

    lb = current_leaderboard()
    g = {r["model"]: r for r in lb.filter(pl.col("task") == "TV2V").iter_rows(named=True)}
    assert g["editor"]["n_videos"] == 3 and g["did-nothing"]["n_videos"] == 3
    assert g["editor"]["mean_final"] > g["did-nothing"]["mean_final"]
    defs = dg.Definitions(assets=ALL_ASSETS, resources=resources_for())
    vs = defs.load_asset_value("video_scores", instance=local_instance(),
                               partition_key=dg.MultiPartitionKey({"task": "TV2V", "model": "did-nothing"}))
    assert all("degenerate_edit" in c for c in vs["caps_fired"].to_list())
    # The frozen rubrics were written into the bench folder the user gave.
    assert len(list((bench / "TV2V" / "rubrics").glob("*.json"))) == 3
