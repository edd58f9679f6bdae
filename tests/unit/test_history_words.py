"""What a plan and a diff say in words: an evaluator by name, each reason with what it touches."""

from argus_dagster.outputs.history_words import evaluator_label, reason_lines


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
    # the criterion judgments stored for the partitions whose criterion_scores a reason runs
    judgments = {("T2V", "m"): 18, ("T2V", "n"): 12, ("TI2V", "m"): 40, ("TI2V", "n"): 70}
    counted = dict(line.rsplit(": ", 1) for line in reason_lines(why, requested, n_videos, judgments=judgments))
    assert counted[judge] == "3 partitions, 9 videos, 70 criterion judgments as stored now"  # 18 + 12 + 40
    assert counted["videos of TI2V x m changed"] == "1 partition, 4 videos"  # runs no criterion_scores itself


def test_an_edited_input_is_named_with_its_own_videos():
    from argus_dagster.outputs.history_words import input_changes

    before = [{"input_id": "apple", "prompt": "An apple.", "content_hash": "a1", "error": None},
              {"input_id": "pear", "prompt": "A pear.", "content_hash": "p1", "error": None},
              {"input_id": "plum", "prompt": "A plum.", "content_hash": "u1", "error": None},
              {"input_id": "gone", "prompt": "Gone.", "content_hash": "g1", "error": None}]
    now = [{"input_id": "apple", "prompt": "An apple falls.", "content_hash": "a2", "error": None},
           {"input_id": "pear", "prompt": "A pear.", "content_hash": "p2", "error": None},  # its image replaced
           {"input_id": "plum", "prompt": "A plum.", "content_hash": "u1", "error": None},
           {"input_id": "new", "prompt": "New.", "content_hash": "n1", "error": None}]
    said = input_changes("T2V", before, now)
    assert said == [("prompt of T2V/apple changed", "apple"), ("input T2V/gone removed", "gone"),
                    ("input T2V/new added", "new"), ("conditions of T2V/pear changed", "pear")]
    assert input_changes("T2V", None, now) == []  # nothing stored to compare with: said otherwise
    why = {("input_instances", "T2V"): [t for t, _ in said]}
    inputs_of = {t: {("T2V", i)} for t, i in said}
    lines = reason_lines(why, {"input_instances": {"T2V"}}, {("T2V", "m"): 9, ("T2V", "n"): 9}, inputs_of,
                         {("T2V", "apple"): 5, ("T2V", "gone"): 0, ("T2V", "new"): 2, ("T2V", "pear"): 1})
    assert lines == ["prompt of T2V/apple changed: 1 input, 5 videos", "input T2V/gone removed: 1 input, 0 videos",
                     "input T2V/new added: 1 input, 2 videos", "conditions of T2V/pear changed: 1 input, 1 video"]
    # the inputs' rubrics are written again: each names the criteria its rubric holds now
    now = {("T2V", "apple"): ["subject_present", "action", "a", "b", "c", "d", "e"], ("T2V", "pear"): ["shape"]}
    lines = reason_lines(why, {"input_instances": {"T2V"}, "rubrics": {"T2V"}}, {("T2V", "m"): 9}, inputs_of,
                         {("T2V", "apple"): 5, ("T2V", "pear"): 1}, rubric_now=now)
    assert lines[0] == ("prompt of T2V/apple changed: 1 input, 5 videos; its rubric (now: a, action, b, c, d, e and "
                        "1 more) is written again")
    assert lines[3] == "conditions of T2V/pear changed: 1 input, 1 video; its rubric (now: shape) is written again"
