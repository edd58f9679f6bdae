"""FIRM-Video's training-data folder (seed 001, §3.3): prose reasoning from the verifier's decisions,
instructions worded for each task, the condition media each task needs, only videos valid on all three
dimensions, and a folder that `datasets` and PIL load."""

import json
import re

import cv2
import numpy as np
import pytest
from unit_helpers import FPS, W, moving_frames, texture

from argus_dagster.infra.media import write_video
from argus_dagster.protocols.firm import export as fx
from argus_dagster.protocols.firm.types import DIMENSIONS, IF, PQ, WC
from tests.skips import module

IF_ROWS = [
    {"dimension": IF, "item_id": "r1", "question": "Does the video show a red kite?", "verdict": "yes",
     "verifiable": True, "evidence": "a red kite flies in frames 1-8", "importance": 5},
    {"dimension": IF, "item_id": "r2", "question": "Is the kite over a beach?", "verdict": "no",
     "verifiable": True, "evidence": "the kite is over a field of grass", "importance": 4},
    {"dimension": IF, "item_id": "r3", "question": "Does a dog run?", "verdict": "no", "verifiable": False,
     "evidence": "no dog is in view", "importance": 2},
]
WC_ROWS = [
    {"dimension": WC, "item_id": "q1", "target": "the kite", "aspect": "structure", "question": "Is the kite deformed?",
     "verdict": "yes", "verifiable": True, "evidence": "its tail fuses with the string in frame 5"},
    {"dimension": WC, "item_id": "q2", "target": "the kite", "aspect": "temporal_consistency",
     "question": "Does the kite change colour?", "verdict": "no", "verifiable": True, "evidence": "stays red"},
    {"dimension": WC, "item_id": "q3", "target": "the sky", "aspect": "temporal_consistency",
     "question": "Does the sky flicker?", "verdict": "no", "verifiable": True, "evidence": "steady"},
    {"dimension": WC, "item_id": "q4", "target": "the string", "aspect": "physical_plausibility",
     "question": "Does the string float without tension?", "verdict": "no", "verifiable": False, "evidence": "too thin"},
]


def test_if_reasoning_is_prose_from_the_evidence_met_first_then_unmet():
    text = fx.if_reasoning(IF_ROWS)
    assert text.startswith("The video meets one of the three requirements of the prompt.")
    # met first, then unmet, then what cannot be seen (seed §3.3's order), each with its evidence
    met, unmet, unseen = (text.index("a red kite flies in frames 1-8"), text.index("over a field of grass"),
                          text.index("no dog is in view"))
    assert met < unmet < unseen
    assert "important requirement \u201cIs the kite over a beach?\u201d" in text
    assert "does not count as met" in text
    # no item ids, no yes/no tags, no share or rating: the score is the target's other field
    assert not re.search(r"\br\d\b|\(r\d|share|rating|\d/5|0\.\d+", text)


def test_if_reasoning_all_met_and_none_met():
    rows = [dict(IF_ROWS[0]), {**IF_ROWS[1], "verdict": "yes"}]
    assert fx.if_reasoning(rows).startswith("The video meets every requirement of the prompt (two in all).")
    none = [{**r, "verdict": "no", "verifiable": True} for r in IF_ROWS]
    assert fx.if_reasoning(none).startswith("The video meets none of the three requirements")


def test_wc_reasoning_scene_then_violations_by_target_and_aspect():
    text = fx.wc_reasoning("A red kite flies over a field under a blue sky", WC_ROWS)
    assert text.startswith("A red kite flies over a field under a blue sky.")
    assert "For the kite, the frames show a problem of structure: its tail fuses with the string in frame 5." in text
    assert "The sky stays consistent and plausible throughout." in text
    assert "Left undecided, because the frames do not show enough: Does the string float without tension" in text
    assert "stays red" not in text  # a clean answer of a violated target is not a violation
    clean = fx.wc_reasoning("", [{**r, "verdict": "no"} for r in WC_ROWS[:3]])
    assert clean.startswith("No violation of common sense or physics is seen.")
    assert "The kite and the sky stay consistent" in clean


def test_the_stored_template_loses_its_score_sentence():
    stored = "No measured defect. Checked without a VLM: blur. Not measured: distortion. Rating 5/5."
    assert fx.strip_score_sentences(stored) == "No measured defect. Checked without a VLM: blur. Not measured: distortion."
    t = "2 of 3 requirements are met. Importance-weighted share met: 0.8462, rating 3/5."
    assert fx.strip_score_sentences(t) == "2 of 3 requirements are met."


def test_instructions_are_worded_for_each_task():
    t2v = fx.task_instruction("T2V", IF, "A red kite", ["output_video"] * 8)
    assert "follows its text prompt." in t2v and "Text prompt:\nA red kite" in t2v
    assert "images 1-8 are frames of the video to evaluate" in t2v
    edit = fx.task_instruction("TV2V", IF, "Remove the woman", ["source_video"] * 8 + ["output_video"] * 8)
    assert "Edit instruction:\nRemove the woman" in edit and "Text prompt" not in edit
    assert "images 1-8 are frames of the source video" in edit and "images 9-16 are frames of the video to evaluate" in edit
    assert "8 frames" in edit  # the video's own frame count, not the source's too
    wc = fx.task_instruction("TSV2V", WC, "Replace the dog", ["output_video"] * 4)
    assert "Edit instruction (context only):\nReplace the dog" in wc and "Text prompt" not in wc
    ti2v = fx.task_instruction("TI2V", IF, "It slides", ["first_frame"] + ["output_video"] * 8)
    assert "starting from the given first frame" in ti2v and "image 1 is the first frame" in ti2v


def test_frame_references_parse():
    assert fx.parse_frame_ref("/a/b#c/v.mp4#frame=12&t=0.500") == ("/a/b#c/v.mp4", 12)
    with pytest.raises(ValueError, match="expected <uri>#frame="):
        fx.parse_frame_ref("/a/v.mp4")


def _score_row(task, iid, *, unscored=None, uri=None):
    row = {"task": task, "model": "m", "input_id": iid, "sample": "", "frames": [f"{uri or iid}.mp4#frame={k}&t=0"
                                                                                  for k in (0, 5, 9)],
           "if_rating": 3, "wc_rating": 4, "pq_rating": 5, "wc_scene": "A quiet street",
           "if_rationale": "x. Importance-weighted share met: 0.5000, rating 2/5.",
           "wc_rationale": "y", "pq_rationale": "Sharp, stable frames; no compression artifacts.",
           "if_reason": "", "wc_reason": "", "pq_reason": ""}
    if unscored:
        row[f"{unscored}_rating"] = None
        row[f"{unscored}_reason"] = "WC: none of the 4 answers is verified"
    return row


def _frames(uri, indices):
    if uri.startswith("broken"):
        raise OSError(f"{uri}: cannot be decoded")
    return [np.full((24, 32, 3), 10 * i, np.uint8) for i in indices]


def _conditions(inp):
    out = []
    if inp.get("source_video"):
        out += [("source_video", np.zeros((24, 32, 3), np.uint8))] * 2
    out += [("subject_image", np.ones((16, 16, 3), np.uint8))] * len(inp.get("subject_images") or [])
    return out


def test_the_folder_loads_with_datasets_and_pil_and_keeps_only_valid_videos(tmp_path):
    datasets = module("datasets")
    from PIL import Image

    rows = [_score_row("TV2V", "e1"), _score_row("TV2V", "e2", unscored="wc"), _score_row("TV2V", "e3", uri="broken"),
            _score_row("TSV2V", "s1"), _score_row("T2V", "t1")]
    inputs = {("TV2V", "e1"): {"prompt": "Remove the woman", "source_video": "e1_src.mp4"},
              ("TV2V", "e2"): {"prompt": "Make it night", "source_video": "e2_src.mp4"},
              ("TV2V", "e3"): {"prompt": "Zoom in", "source_video": "e3_src.mp4"},
              ("TSV2V", "s1"): {"prompt": "Put this cat in", "source_video": "s1.mp4", "subject_images": ["cat.png"]},
              ("T2V", "t1"): {"prompt": "A kite"}}
    verdicts = {("TV2V", "m", "e1", ""): IF_ROWS + WC_ROWS}
    out = tmp_path / "firm"
    res = fx.export_dataset(out, rows, verdicts, inputs, sources={"bench": "b"}, video_frames=_frames,
                            condition_frames=_conditions)
    assert (res.n_videos, res.n_instances) == (3, 9)
    assert len(res.left_out) == 2
    assert any(x.startswith("TV2V/m/e2: left out, not valid on every dimension (world_coherence: WC: none")
               for x in res.left_out)
    assert any(x.startswith("TV2V/m/e3: left out, its frames cannot be written") for x in res.left_out)

    ds = datasets.load_dataset("json", data_files=str(out / fx.JSONL), cache_dir=str(tmp_path / "hf"))["train"]
    assert ds.num_rows == 9
    by = {r["id"]: r for r in ds}
    e1_if = by["TV2V/m/e1/if"]
    assert e1_if["image_roles"] == ["source_video"] * 2 + ["output_video"] * 3
    assert e1_if["prompt"] == "Remove the woman" and "Edit instruction:\nRemove the woman" in e1_if["instruction"]
    assert e1_if["target"] == {"reasoning": fx.if_reasoning(IF_ROWS, "the edit instruction"), "score": 3}
    assert e1_if["target"]["reasoning"].startswith("The video meets one of the three requirements of the edit instruction.")
    assert by["TV2V/m/e1/wc"]["image_roles"] == ["output_video"] * 3  # WC and PQ judge the output alone
    assert by["TV2V/m/e1/wc"]["target"]["reasoning"].startswith("A quiet street. For the kite")
    assert by["TV2V/m/e1/pq"]["target"]["reasoning"] == "Sharp, stable frames; no compression artifacts."
    assert by["TSV2V/m/s1/if"]["image_roles"] == ["source_video"] * 2 + ["subject_image"] + ["output_video"] * 3
    assert by["T2V/m/t1/if"]["image_roles"] == ["output_video"] * 3
    # without verdict rows, the stored rationale is used without its score sentence
    assert by["T2V/m/t1/if"]["target"]["reasoning"] == "x."
    for r in ds:
        assert r["messages"][0]["content"].count("<image>") == len(r["images"])
        assert json.loads(r["messages"][1]["content"]) == r["target"]
        for p in r["images"]:
            with Image.open(out / p) as im:
                im.load()
                assert im.size[0] > 0
    card = (out / fx.CARD).read_text()
    assert "- videos: 3; instances: 9 (instruction_following 3, world_coherence 3, perceptual_quality 3)" in card
    assert "- Left out: 2 videos" in card and "- bench: b" in card
    assert "instruction_following ratings: 1: 0, 2: 0, 3: 3, 4: 0, 5: 0" in card


def test_a_file_at_out_is_an_error(tmp_path):
    f = tmp_path / "x"
    f.write_text("")
    with pytest.raises(ValueError, match="give a folder"):
        fx.export_dataset(f, [], {}, {})


def test_every_dimension_has_an_instance(tmp_path):
    res = fx.export_dataset(tmp_path / "o", [_score_row("T2V", "t1")], {}, {("T2V", "t1"): {"prompt": "A kite"}},
                            video_frames=_frames, condition_frames=_conditions)
    lines = [json.loads(x) for x in (tmp_path / "o" / fx.JSONL).read_text().splitlines()]
    assert [r["dimension"] for r in lines] == list(DIMENSIONS) and res.per_dimension[PQ] == 1


def test_tasks_sharing_an_input_id_each_show_their_own_condition_media(tmp_path):
    """TI2V and TS2V both have an input ``p0``: each task's IF instance shows its own condition image
    (the written file's pixels are that task's source image), never the other task's."""
    from PIL import Image

    first_frame, subject = texture(1, width=W), texture(2, width=W)  # blocky, and unlike each other
    media = tmp_path / "media"
    media.mkdir()
    cv2.imwrite(str(media / "ti2v_p0.png"), first_frame[:, :, ::-1])  # cv2 writes BGR: the file holds the RGB
    cv2.imwrite(str(media / "ts2v_p0.png"), subject[:, :, ::-1])
    for task, seed in (("TI2V", 3), ("TS2V", 4)):
        write_video(media / f"{task}_m_p0.mp4", moving_frames(seed, n=12), FPS)
    inputs = {("TI2V", "p0"): {"prompt": "The kite lifts off", "first_frame": str(media / "ti2v_p0.png")},
              ("TS2V", "p0"): {"prompt": "This cat walks", "subject_images": [str(media / "ts2v_p0.png")]}}
    rows = [_score_row(task, "p0", uri=str(media / f"{task}_m_p0")) for task in ("TI2V", "TS2V")]
    out = tmp_path / "firm"
    res = fx.export_dataset(out, rows, {}, inputs)  # the real readers: media as `argus export firm` reads them
    assert (res.n_videos, res.left_out) == (2, [])

    by = {r["id"]: r for r in map(json.loads, (out / fx.JSONL).read_text().splitlines())}
    sources = {"TI2V": ("first_frame", first_frame), "TS2V": ("subject_image", subject)}
    for task, (role, own) in sources.items():
        rec = by[f"{task}/m/p0/if"]
        with Image.open(out / rec["images"][0]) as im:
            shown = np.asarray(im.convert("RGB"), dtype=float)
        other = next(img for t, (_, img) in sources.items() if t != task)
        assert shown.shape == own.shape
        # JPEG keeps the blocky image within a few levels (about 5); the other task's is about 44 away
        assert np.abs(shown - own).mean() < 10 < 30 < np.abs(shown - other).mean(), (task, rec["images"][0])
        assert rec["image_roles"] == [role] + ["output_video"] * 3, rec["image_roles"]
