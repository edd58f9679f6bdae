"""End to end on AIGVE's 10 real CogVideoX clips: the graph scores them on the embedded default (T2V,
prompts from the annotations), then ``human_alignment`` reports its agreement with each of the nine
human-rated aspects. The figures are printed (``pytest -s``) and checked against scipy, not against
expectations of how good they are."""

import os

import dagster as dg
import numpy as np
import polars as pl
import pytest
from scipy import stats

from argus_dagster.assets import ALL_ASSETS, ALL_CHECKS
from argus_dagster.assets.alignment import human_alignment
from argus_dagster.protocols.alignment.metrics import format_alignment
from argus_dagster.protocols.alignment.ratings import AIGVE_ASPECTS, aigve_bench, write_human_csv

from .helpers import graph_resources, load, materialize_task

pytestmark = pytest.mark.integration
N_BOOT = 300


@pytest.fixture(scope="module")
def aigve_run(real_data, tmp_path_factory):
    home = tmp_path_factory.mktemp("aigve_home")
    old_home = os.environ.get("ARGUS_HOME")
    os.environ["ARGUS_HOME"] = str(home)  # human/<TASK>.csv and reports/ resolve under it
    try:
        human = aigve_bench(real_data / "aigve_toy", home / "bench", home / "candidates")
        write_human_csv(human.ratings, home / "human" / "T2V.csv")
        instance = dg.DagsterInstance.ephemeral()
        resources = graph_resources(home / "bench", home / "candidates", home)
        materialize_task("T2V", ["cogvideox"], resources, instance)
        result = dg.materialize(ALL_ASSETS + ALL_CHECKS, selection=dg.AssetSelection.assets(human_alignment),
                                instance=instance, resources=resources,
                                run_config={"ops": {"human_alignment": {"config": {"n_boot": N_BOOT}}}})
        assert result.success
        video_scores = load("video_scores", resources, instance,
                            dg.MultiPartitionKey({"task": "T2V", "model": "cogvideox"}))
        yield home, human, result, video_scores
    finally:
        if old_home is None:
            os.environ.pop("ARGUS_HOME", None)
        else:
            os.environ["ARGUS_HOME"] = old_home


def test_bench_from_the_annotations(aigve_run):
    home, human, _, video_scores = aigve_run
    assert len((home / "bench" / "T2V" / "manifest.jsonl").read_text().splitlines()) == 10
    assert human.ratings.height == 10 * len(AIGVE_ASPECTS) and not human.problems
    assert video_scores.height == 10
    assert video_scores["final_score"].null_count() == 0, video_scores.filter(pl.col("error").is_not_null())


def test_human_alignment_against_every_aspect(aigve_run):
    home, human, result, video_scores = aigve_run
    table = result.output_for_node("human_alignment")
    print("\n" + format_alignment(table.drop("task")))
    final = table.filter(pl.col("evaluator") == "argus:final")
    assert sorted(final["dimension"]) == sorted(AIGVE_ASPECTS)
    assert set(table["task"]) == {"T2V"}
    scores = dict(zip(video_scores["input_id"], video_scores["final_score"]))
    for aspect in AIGVE_ASPECTS:
        h = human.ratings.filter(pl.col("dimension") == aspect)
        p = np.array([scores[i] for i in h["input_id"]])
        row = final.filter(pl.col("dimension") == aspect).row(0, named=True)
        assert row["n_videos"] == 10 and row["n_inputs"] == 10
        expect = stats.spearmanr(p, h["score"].to_numpy()).statistic
        if np.isnan(expect):
            assert np.isnan(row["srcc"])
        else:
            assert row["srcc"] == pytest.approx(expect, abs=1e-10)
            assert row["krcc"] == pytest.approx(stats.kendalltau(p, h["score"].to_numpy()).statistic, abs=1e-10)
        # one clip per prompt: no input has two candidates, so nothing is ranked within an input
        assert row["n_within_inputs"] == 0 and row["n_pairs"] == 0 and np.isnan(row["within_input_srcc"])


def test_scatter_per_evaluator_and_the_range_check(aigve_run):
    home, _, result, _ = aigve_run
    table = result.output_for_node("human_alignment")
    meta = result.asset_materializations_for_node("human_alignment")[0].metadata
    for evaluator in table["evaluator"].unique().to_list():
        png = meta[f"T2V scatter {evaluator}"].value
        assert png.startswith("reports/alignment/T2V/")  # relative to the evaluation's folder
        png = str(home / png)
        with open(png, "rb") as fh:
            assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    assert "argus:final" in meta["T2V alignment"].value
    checks = {c.check_name: c.passed for c in result.get_asset_check_evaluations()}
    assert checks == {"human_alignment_in_range": True}


def test_cli_on_the_stored_scores_matches_the_asset(aigve_run, tmp_path):
    """The same code: `argus align` on the stored video_scores gives the asset's numbers."""
    from argus_dagster.client.cli import main

    home, _, result, _ = aigve_run
    out = tmp_path / "cli.csv"
    assert main(["align", "--human", str(home / "human" / "T2V.csv"),
                 "--scores", str(home / "storage" / "video_scores"), "--n-boot", str(N_BOOT),
                 "--out", str(out)]) == 0
    cli = pl.read_csv(out).sort("evaluator", "dimension")
    asset = (result.output_for_node("human_alignment").filter(pl.col("evaluator").is_in(["argus:final", "argus:base"]))
             .drop("task").sort("evaluator", "dimension"))
    for col in ("n_videos", "srcc", "krcc", "plcc", "rmse", "mae", "accuracy", "relaxed_accuracy", "srcc_lo"):
        np.testing.assert_allclose(cli[col].cast(pl.Float64).to_numpy(), asset[col].cast(pl.Float64).to_numpy(),
                                   equal_nan=True)
