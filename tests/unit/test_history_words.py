"""What a plan and a diff say in words: an evaluator by name, each reason with what it touches."""

from argus_dagster.history import evaluator_label, reason_lines


def test_an_evaluator_is_named_as_a_person_reads_it():
    assert evaluator_label("vlm/openai/Qwen2.5-VL-7B/judge-4") == "openai:Qwen2.5-VL-7B"
    assert evaluator_label("vlm/openai/org/model-7b/judge-4") == "openai:org/model-7b"  # a model name with a slash
    assert evaluator_label("evidence-only/5") == "evidence-only"
    assert evaluator_label({"backend": "offline", "model": "rules", "prompt_version": "3"}) == "offline"
    assert evaluator_label({"backend": "openai", "model": "judge", "prompt_version": "3"}) == "openai:judge"


def test_each_reason_counts_the_partitions_and_videos_it_touches():
    judge = "judge: evidence-only -> openai:judge"
    why = {("criterion_scores", "m|T2V"): ["an input runs first", judge],
           ("criterion_scores", "n|T2V"): [judge],
           ("criterion_scores", "m|TI2V"): [judge],
           ("video_scores", "m|T2V"): ["an input runs first"],
           ("rubrics", "T2V"): ["rubric generator: offline -> openai:judge"],
           ("criterion_evidence", "m|TI2V"): ["videos of TI2V x m changed"]}
    requested = {"criterion_scores": {"m|T2V", "n|T2V", "m|TI2V"}, "video_scores": {"m|T2V"}, "rubrics": {"T2V"},
                 "criterion_evidence": {"m|TI2V"}, "leaderboard": {None}}
    n_videos = {("T2V", "m"): 3, ("T2V", "n"): 2, ("TI2V", "m"): 4, ("TI2V", "n"): 7}
    lines = dict(line.rsplit(": ", 1) for line in reason_lines(why, requested, n_videos))
    assert lines == {judge: "3 partitions, 9 videos",
                     "rubric generator: offline -> openai:judge": "1 task, 5 videos",  # every video of the task
                     "videos of TI2V x m changed": "1 partition, 4 videos"}
