"""Backbone robustness between two profiles of one bench (default and vlm-only) on the loopback judge:
both evaluations stored apart, the same frozen rubrics, and `backbone_robustness` / `argus robustness`
comparing them."""

import dagster as dg
import pytest

from argus_dagster.client.evaluate import run_all
from argus_dagster.client.instance import local_instance
from argus_dagster.infra.media import write_video
from argus_dagster.infra.settings import evaluation_settings, record_evaluation
from tests.servers.openai_server import FakeVlmServer, kind_of

from .helpers import pattern_clip, t2v_bench

pytestmark = pytest.mark.integration


def test_default_and_vlm_only_profiles_compared(tmp_path, monkeypatch, capsys):
    from argus_dagster.assets.robustness import backbone_robustness
    from argus_dagster.client.cli import main
    from argus_dagster.resources import resources_for

    bench, cands = t2v_bench(tmp_path, n_inputs=3)
    for i in range(3):
        write_video(cands / "T2V" / "n" / f"p{i}.mp4", pattern_clip(20 + i)[:, :, ::-1], 12)
    with FakeVlmServer() as srv:
        for k, v in {"ARGUS_HOME": str(tmp_path / "home"), "ARGUS_VLM_BASE_URL": srv.base_url,
                     "ARGUS_VLM_MODEL": "judge"}.items():
            monkeypatch.setenv(k, v)
        for k in ("ARGUS_RUBRIC_BASE_URL", "ARGUS_BENCH_DIR", "ARGUS_CANDIDATES_DIR"):
            monkeypatch.delenv(k, raising=False)
        evaluations = {}
        for profile in ("default", "vlm-only"):
            settings = evaluation_settings(bench, cands, profile=profile)
            record_evaluation(settings)
            board = run_all(progress=lambda m: None, settings=settings)
            assert set(board["profile"]) == {profile} and board["n_videos"].sum() == 6
            evaluations[profile] = settings
        kinds = [kind_of(r["body"]) for r in srv.requests]
    # One rubric generator, one set of frozen rubrics: the vlm-only run asked for none.
    assert kinds.count("rubric") == 3

    assert main(["robustness", "--bench", "bench"]) == 0
    out = capsys.readouterr().out
    assert "T2V: default vs vlm-only (2 models, 6 videos scored by both)" in out and "kendall tau" in out

    settings = evaluations["vlm-only"]
    resources = resources_for(settings=settings)
    res = dg.materialize([backbone_robustness], instance=local_instance(settings),
                         resources={"bench": resources["bench"], "storage": resources["storage"]})
    ranks = res.output_for_node("backbone_robustness")
    assert ranks.height == 1 and ranks["n_videos"][0] == 6
    row = ranks.row(0, named=True)
    assert {row["profile_a"], row["profile_b"]} == {"default", "vlm-only"}
    meta = res.get_asset_materialization_events()[0].materialization.metadata
    assert "criterion scores: mean |diff|" in meta["robustness"].value

    # With one profile only, it says what to run.
    alone = evaluation_settings(bench, cands, profile="judge=other", home=tmp_path / "home2")
    assert main(["robustness", "--bench", "bench"]) == 0  # still the two above
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home2"))
    record_evaluation(alone)
    assert main(["robustness"]) == 1
    assert "needs two profiles with stored scores" in capsys.readouterr().out
