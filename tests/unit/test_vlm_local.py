"""The local transformers backend on a tiny vision-language model built here from a config.

Random weights, saved with ``save_pretrained`` and loaded back through the same path a real
checkpoint takes (``AutoProcessor`` + ``AutoModelForImageTextToText``, local files only).
"""

from __future__ import annotations

import numpy as np
import pytest

from argus_dagster.method.judge import JUDGE_PROMPT_VERSION, VlmJudge
from argus_dagster.method.rubric.generate import PROMPT_VERSION
from argus_dagster.vlm.ledger import CallStats
from argus_dagster.vlm.reply import VlmError
from argus_dagster.vlm.transformers_client import TransformersClient

CHAT_TEMPLATE = (
    "{% for m in messages %}<s>{{ m['role'] }}: {% if m['content'] is string %}{{ m['content'] }}"
    "{% else %}{% for c in m['content'] %}{% if c['type'] == 'image' %}<image>{% else %}{{ c['text'] }}"
    "{% endif %}{% endfor %}{% endif %}</s>{% endfor %}{% if add_generation_prompt %}<s>assistant: {% endif %}"
)


def build_tiny_llava(folder) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        LlavaProcessor,
        PreTrainedTokenizerFast,
    )

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<pad>", "<s>", "</s>", "<image>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(['{"score": 7, "rationale": "the frames show the criterion"}'] * 20, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>")
    fast.add_special_tokens({"additional_special_tokens": ["<image>"]})
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                              image_size=28, patch_size=14, projection_dim=32)
    text = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                       num_key_value_heads=2, vocab_size=len(fast), max_position_embeddings=4096,
                       pad_token_id=0, bos_token_id=1, eos_token_id=2)
    config = LlavaConfig(vision_config=vision, text_config=text, image_token_index=fast.convert_tokens_to_ids("<image>"),
                         vision_feature_layer=-1, vision_feature_select_strategy="default", image_seq_length=4)
    torch.manual_seed(0)
    LlavaForConditionalGeneration(config).save_pretrained(folder)
    LlavaProcessor(image_processor=CLIPImageProcessor(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28}),
                   tokenizer=fast, chat_template=CHAT_TEMPLATE, patch_size=14, vision_feature_select_strategy="default",
                   num_additional_image_tokens=1).save_pretrained(folder)


@pytest.fixture(scope="module")
def tiny_vlm(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny_llava")
    build_tiny_llava(folder)
    return folder


def test_missing_model_folder_names_the_path(tmp_path):
    with pytest.raises(VlmError, match=r"nothing_here/config.json is missing"):
        TransformersClient(tmp_path / "nothing_here")


def test_generates_from_text_and_frames(tiny_vlm):
    client = TransformersClient(tiny_vlm, max_new_tokens=8)
    assert client.backend == "transformers" and client.model == tiny_vlm.name
    stats = CallStats()
    frames = [np.full((40, 60, 3), 90, np.uint8), np.full((1000, 500, 3), 200, np.uint8)]
    reply = client.chat([{"role": "system", "content": ["judge"]},
                         {"role": "user", "content": ["two frames:", *frames, "score?"]}], stats=stats)
    assert isinstance(reply.text, str)
    # The prompt holds the text and one run of image tokens per frame; at most 8 new tokens.
    assert reply.prompt_tokens > 2 * 4 and 1 <= reply.completion_tokens <= 8
    assert stats.requests == 1 and stats.by_endpoint == {"local": 1}


IMAGE_TOKENS_PER_FRAME = 4  # the tiny model's image_seq_length: a 28 px frame in 14 px patches, CLS dropped


def _capture_generate(client) -> list[dict]:
    """Record what reaches ``generate`` (the token ids and the pixels), then generate as usual."""
    seen: list[dict] = []
    real = client.net.generate

    def generate(**inputs):
        seen.append({k: v.detach().clone() for k, v in inputs.items() if hasattr(v, "detach")})
        return real(**inputs)

    client.net.generate = generate
    return seen


@pytest.mark.parametrize("n_frames", [1, 2, 3])
def test_every_frame_reaches_the_model_as_its_own_run_of_image_tokens(tiny_vlm, n_frames):
    """The prompt with frames is the prompt without them plus 4 image tokens per frame, and the model
    is given one image per frame (a client that dropped frames would still answer a string)."""
    client = TransformersClient(tiny_vlm, max_new_tokens=2)
    image_id = client.processor.tokenizer.convert_tokens_to_ids("<image>")
    seen = _capture_generate(client)
    frames = [np.full((40 + 10 * i, 60, 3), 40 * i, np.uint8) for i in range(n_frames)]
    with_frames = client.chat([{"role": "system", "content": ["judge"]},
                               {"role": "user", "content": ["frames:", *frames, "score?"]}])
    text_only = client.chat([{"role": "system", "content": ["judge"]},
                             {"role": "user", "content": ["frames:", "score?"]}])
    assert with_frames.prompt_tokens - text_only.prompt_tokens == IMAGE_TOKENS_PER_FRAME * n_frames
    framed, plain = seen
    assert int((framed["input_ids"] == image_id).sum()) == IMAGE_TOKENS_PER_FRAME * n_frames
    assert int((plain["input_ids"] == image_id).sum()) == 0 and "pixel_values" not in plain
    assert tuple(framed["pixel_values"].shape) == (n_frames, 3, 28, 28)
    # Each frame's own pixels, in order: the darker first frame stays darker than the later ones.
    means = framed["pixel_values"].mean(dim=(1, 2, 3)).tolist()
    assert means == sorted(means) and len(set(means)) == n_frames


def test_frames_keep_their_place_among_the_text(tiny_vlm):
    """Text, frame, text: the image tokens sit between the two texts' tokens, not at either end."""
    client = TransformersClient(tiny_vlm, max_new_tokens=2)
    tok = client.processor.tokenizer
    image_id = tok.convert_tokens_to_ids("<image>")
    seen = _capture_generate(client)
    client.chat([{"role": "user", "content": ["before", np.zeros((28, 28, 3), np.uint8), "after"]}])
    ids = seen[0]["input_ids"][0].tolist()
    where = [i for i, t in enumerate(ids) if t == image_id]
    assert len(where) == IMAGE_TOKENS_PER_FRAME and where == list(range(where[0], where[0] + IMAGE_TOKENS_PER_FRAME))
    assert "before" in tok.decode(ids[:where[0]]) and "after" in tok.decode(ids[where[-1] + 1:])
    assert "after" not in tok.decode(ids[:where[0]])


def test_greedy_decoding_is_deterministic(tiny_vlm):
    client = TransformersClient(tiny_vlm, max_new_tokens=6)
    msgs = [{"role": "user", "content": ["hello", np.zeros((28, 28, 3), np.uint8)]}]
    assert client.chat(msgs).text == client.chat(msgs).text


def test_the_judge_on_the_local_model_records_an_unusable_answer(tiny_vlm):
    """Random weights do not write JSON: the criterion stays unscored with the reason, after retries."""
    stats = CallStats()
    judge = VlmJudge(TransformersClient(tiny_vlm, max_new_tokens=6), stats=stats, parse_retries=1)
    view = {"id": "c1", "dimension": 1, "criterion": "A red car is visible.", "scoring_rule": "10 yes, 0 no",
            "failure_modes": [], "aggregation": "", "target_entity": "red car"}
    j = judge.judge(view, [{"tool": "aesthetic", "ok": True, "quality": 50.0}])
    assert j.score is None and j.rationale.startswith("unscored: unusable answer after 2 attempts")
    assert j.judge == f"vlm/transformers/{tiny_vlm.name}/{JUDGE_PROMPT_VERSION}"
    assert stats.calls == 2 and stats.failures == 1 and stats.parse_retries == 1


def test_the_resources_wire_the_local_model_into_the_judge(tiny_vlm, monkeypatch):
    from argus_dagster.resources import JudgeResource, RubricGeneratorResource
    from argus_dagster.resources.vlm import vlm_from_env

    monkeypatch.delenv("ARGUS_VLM_BASE_URL", raising=False)
    monkeypatch.setenv("ARGUS_VLM_PATH", str(tiny_vlm))
    monkeypatch.setenv("ARGUS_VLM_MODEL", "tiny-llava")
    vlm = vlm_from_env("ARGUS_VLM")
    assert vlm.backend == "transformers" and vlm.workers() == 1
    judge = JudgeResource().judge(vlm)
    assert isinstance(judge, VlmJudge) and judge.identity == f"vlm/transformers/tiny-llava/{JUDGE_PROMPT_VERSION}"
    generator = RubricGeneratorResource().identity(vlm)
    assert {k: generator[k] for k in ("backend", "model", "prompt_version")} == {
        "backend": "transformers", "model": "tiny-llava", "prompt_version": PROMPT_VERSION}
    # The request its rubrics are keyed by: the local model's answer ceiling, not an endpoint's.
    assert (generator["call"]["model"], generator["call"]["max_new_tokens"]) == ("tiny-llava", vlm.max_new_tokens)
    # Without a VLM, the embedded default stays.
    monkeypatch.delenv("ARGUS_VLM_PATH")
    none = vlm_from_env("ARGUS_VLM")
    assert JudgeResource().judge(none).identity == "evidence-only/6"
    assert RubricGeneratorResource().identity(none)["backend"] == "offline"
    with pytest.raises(ValueError, match="needs a configured VLM"):
        JudgeResource(backend="vlm").judge(none)
