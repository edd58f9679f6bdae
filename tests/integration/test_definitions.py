"""The code location loads, and its asset graph is what the design says (a snapshot of lineage)."""

import subprocess
import sys
from pathlib import Path

import dagster as dg

ROOT = Path(__file__).resolve().parents[2]


def test_asset_graph_snapshot():
    from argus_dagster.location import defs as lazy

    defs = lazy()  # what Dagster builds when it loads the code location
    graph = defs.resolve_asset_graph()
    keys = sorted(k.to_user_string() for k in graph.get_all_asset_keys())
    assert keys == ["aggregation_config", "backbone_robustness", "bench_files", "best_of_n", "candidate_files",
                    "candidate_videos", "control_scores", "controls", "costs", "criterion_evidence", "criterion_scores", "diagnostic_reports",
                    "firm_checklists", "firm_scores", "firm_verdicts", "human_alignment", "input_instances",
                    "judge_config", "judge_noise", "leaderboard", "rubric_files", "rubric_generator_config", "rubrics", "site",
                    "tool_suite_config", "vefx_leaderboard", "vefx_scores", "video_scores"]
    deps = {k.to_user_string(): sorted(p.to_user_string() for p in graph.get(k).parent_keys)
            for k in graph.get_all_asset_keys()}
    # The inputs are observable sources: what changes outside the graph is in its lineage.
    sources = ["aggregation_config", "bench_files", "candidate_files", "judge_config", "rubric_files",
               "rubric_generator_config", "tool_suite_config"]
    assert all(graph.get(dg.AssetKey(s)).is_observable for s in sources)
    assert deps == {
        **{s: [] for s in sources},
        "input_instances": ["bench_files"],
        "rubrics": ["input_instances", "rubric_files", "rubric_generator_config"],
        "candidate_videos": ["candidate_files", "input_instances"],
        "criterion_evidence": ["candidate_videos", "input_instances", "rubrics", "tool_suite_config"],
        "criterion_scores": ["candidate_videos", "criterion_evidence", "judge_config", "rubrics"],
        "video_scores": ["aggregation_config", "candidate_videos", "criterion_scores"],
        "judge_noise": ["aggregation_config", "candidate_videos", "criterion_evidence", "judge_config", "rubrics"],
        "control_scores": ["aggregation_config", "candidate_videos", "criterion_scores", "input_instances",
                           "judge_config", "rubrics", "tool_suite_config", "video_scores"],
        "controls": ["control_scores"],
        "leaderboard": ["criterion_scores", "judge_noise", "video_scores"],
        "costs": ["firm_checklists", "firm_scores", "rubrics", "vefx_scores", "video_scores"],
        "site": ["controls", "costs", "criterion_scores", "firm_scores", "human_alignment", "leaderboard",
                 "vefx_leaderboard", "vefx_scores", "video_scores"],
        "diagnostic_reports": ["candidate_videos", "criterion_evidence", "criterion_scores", "input_instances",
                               "rubrics", "video_scores"],
        "human_alignment": ["criterion_scores", "firm_scores", "vefx_scores", "video_scores"],
        "firm_checklists": ["input_instances"],
        "firm_verdicts": ["candidate_videos", "firm_checklists", "input_instances"],
        "firm_scores": ["candidate_videos", "firm_checklists", "input_instances"],
        "best_of_n": ["firm_scores", "video_scores"],
        "vefx_scores": ["candidate_videos", "input_instances"],
        "vefx_leaderboard": ["vefx_scores"],
        "backbone_robustness": [],  # reads the other profiles' evaluations of the bench, not this graph
    }
    parts = {k.to_user_string(): type(graph.get(k).partitions_def).__name__ for k in graph.get_all_asset_keys()}
    assert parts["bench_files"] == parts["rubric_files"] == parts["rubrics"] == "StaticPartitionsDefinition"
    assert parts["candidate_files"] == "MultiPartitionsDefinition"
    assert parts["judge_config"] == "NoneType"
    assert parts["video_scores"] == "MultiPartitionsDefinition"
    assert parts["leaderboard"] == "NoneType"
    assert parts["human_alignment"] == "NoneType"
    mp = graph.get(dg.AssetKey("video_scores")).partitions_def
    assert [d.name for d in mp.partitions_defs] == ["model", "task"]
    assert {c.name for c in defs.resolve_asset_graph().asset_check_keys} == {"leaderboard_in_range", "human_alignment_in_range", "rubrics_follow_the_rules", "scores_in_range",
            "every_candidate_scored_or_explained", "leaderboard_covers_partitions", "firm_scores_recompute",
            "vefx_scores_valid", *(f"tells_controls_apart_{t}" for t in ("T2V", "TI2V", "TS2V", "TV2V", "TSV2V"))}
    assert parts["firm_checklists"] == "StaticPartitionsDefinition"
    assert parts["firm_scores"] == parts["firm_verdicts"] == "MultiPartitionsDefinition"
    assert parts["best_of_n"] == "NoneType"
    assert parts["vefx_scores"] == "MultiPartitionsDefinition" and parts["vefx_leaderboard"] == "NoneType"
    assert all(graph.get(k).code_version for k in graph.get_all_asset_keys() if k.to_user_string() not in sources)
    # Automation: the sensors and the nightly observation; every table of the graph follows its inputs.
    repo = defs.get_repository_def()
    assert {s.name: s.default_status for s in repo.sensor_defs} == {
        "candidate_store_sensor": dg.DefaultSensorStatus.RUNNING,
        "default_automation_condition_sensor": dg.DefaultSensorStatus.RUNNING,
        "dead_run_sensor": dg.DefaultSensorStatus.RUNNING}
    assert [s.name for s in repo.schedule_defs] == ["nightly_reconcile"]
    # One machine: a run's steps share its process (one code-location import per run, not per step).
    assert defs.resolve_implicit_global_asset_job_def().executor_def.name == "in_process"
    for key in ("input_instances", "rubrics", "candidate_videos", "criterion_evidence", "criterion_scores",
                "video_scores", "diagnostic_reports", "leaderboard", "costs", "site"):
        assert graph.get(dg.AssetKey(key)).automation_condition is not None, key
    assert {j.name for j in repo.get_all_jobs()} >= {"observe_bench_files", "observe_candidate_files",
                                                      "observe_evaluator"}
    # FIRM-Video runs only when asked: nothing materializes it automatically.
    for key in ("firm_checklists", "firm_verdicts", "firm_scores", "best_of_n", "vefx_scores", "vefx_leaderboard"):
        assert graph.get(dg.AssetKey(key)).automation_condition is None, key


def test_workspace_validates_with_the_dagster_cli(tmp_path):
    out = subprocess.run([str(Path(sys.executable).parent / "dagster"), "definitions", "validate", "-w", "workspace.yaml"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "DAGSTER_HOME": str(tmp_path), "ARGUS_HOME": str(tmp_path / "a")})
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_sensor_intervals_are_settings(monkeypatch):
    """60 s, 30 s and 30 s unless ARGUS_SENSOR_INTERVAL_S, ARGUS_AUTOMATION_INTERVAL_S and
    ARGUS_DEAD_RUN_INTERVAL_S say otherwise (the daemon tests tick every few seconds), read when Dagster
    builds the code location."""
    import pytest

    from argus_dagster.infra.environment import SettingError
    from argus_dagster.location import defs as lazy

    def intervals() -> dict[str, int]:
        return {s.name: s.minimum_interval_seconds for s in lazy().get_repository_def().sensor_defs}

    monkeypatch.delenv("ARGUS_SENSOR_INTERVAL_S", raising=False)
    monkeypatch.delenv("ARGUS_AUTOMATION_INTERVAL_S", raising=False)
    monkeypatch.delenv("ARGUS_DEAD_RUN_INTERVAL_S", raising=False)
    assert intervals() == {"candidate_store_sensor": 60, "default_automation_condition_sensor": 30,
                           "dead_run_sensor": 30}
    monkeypatch.setenv("ARGUS_SENSOR_INTERVAL_S", "3")
    monkeypatch.setenv("ARGUS_AUTOMATION_INTERVAL_S", "2")
    monkeypatch.setenv("ARGUS_DEAD_RUN_INTERVAL_S", "1")
    assert intervals() == {"candidate_store_sensor": 3, "default_automation_condition_sensor": 2,
                           "dead_run_sensor": 1}
    monkeypatch.setenv("ARGUS_AUTOMATION_INTERVAL_S", "0")
    with pytest.raises(SettingError, match="ARGUS_AUTOMATION_INTERVAL_S=0: must be at least 1"):
        lazy()


def test_a_process_without_an_instance_of_its_own_is_refused_naming_argus_ui(tmp_path):
    """A bare ``dagster dev`` (or any Dagster process without DAGSTER_HOME) runs on a throwaway instance
    whose sensors would re-run the evaluation and write into its storage: the code location refuses to
    load there, in one line naming ``argus ui``; with an instance of its own it loads."""
    import os

    dagster = str(Path(sys.executable).parent / "dagster")
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    env.update(ARGUS_HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT))
    refused = subprocess.run([dagster, "definitions", "validate", "-m", "argus_dagster.location"], cwd=tmp_path,
                             env=env, capture_output=True, text=True, timeout=300)
    from argus_dagster.infra.environment import served_instance_problem

    env_now = os.environ.pop("DAGSTER_HOME")
    try:
        message = served_instance_problem()  # the one line, as this process would say it without an instance
    finally:
        os.environ["DAGSTER_HOME"] = env_now
    said = [line for line in (refused.stdout + refused.stderr).splitlines() if line.rstrip().endswith(message)]
    assert refused.returncode != 0 and said, refused.stdout[-2000:] + refused.stderr[-2000:]
    assert message.startswith("argus-dagster serves one evaluation") and ": start the UI with `argus ui`" in message
    env["DAGSTER_HOME"] = str(tmp_path / "dagster_home")
    (tmp_path / "dagster_home").mkdir()
    loaded = subprocess.run([dagster, "definitions", "validate", "-m", "argus_dagster.location"], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=300)
    assert loaded.returncode == 0, loaded.stdout[-2000:] + loaded.stderr[-2000:]
