"""Random-weight checkpoints in the models-folder layout, built from configs (no download).

Tests and benchmarks load these through exactly the path a real checkpoint takes. ``size="tiny"``
gives models of a few hundred kilobytes that run in milliseconds on a CPU; ``size="real"`` gives the
architectures of the checkpoints docs/tools.md recommends (DINOv2-base, OWLv2-base-patch16, Depth
Anything small, a CLIP ViT-B/16 image tower with a LAION-style head), for timing on real hardware.
Their outputs mean nothing: only shapes, ranges and speed do.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import save_file
from transformers import (
    BitImageProcessor,
    CLIPConfig,
    CLIPImageProcessor,
    CLIPModel,
    CLIPTokenizer,
    DepthAnythingConfig,
    DepthAnythingForDepthEstimation,
    Dinov2Config,
    Dinov2Model,
    DPTImageProcessor,
    Owlv2Config,
    Owlv2ForObjectDetection,
    Owlv2ImageProcessor,
    Owlv2Processor,
)

MODEL_FOLDERS = ("dino", "detector", "depth", "aesthetic")
IMAGENET_MEAN, IMAGENET_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
CLIP_MEAN, CLIP_STD = [0.4815, 0.4578, 0.4082], [0.2686, 0.2613, 0.2758]


def _dinov2_config(size: str, **extra):
    if size == "tiny":
        return Dinov2Config(**{"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                               "intermediate_size": 64, "image_size": 56, "patch_size": 14, **extra})
    return Dinov2Config(**extra)  # DINOv2-base: width 768, 12 layers, patch 14


def build_dino(folder: Path, size: str = "tiny") -> None:
    side = 56 if size == "tiny" else 224
    Dinov2Model(_dinov2_config(size)).save_pretrained(folder)
    BitImageProcessor(size={"shortest_edge": side}, crop_size={"height": side, "width": side}, do_center_crop=True,
                      image_mean=IMAGENET_MEAN, image_std=IMAGENET_STD, do_convert_rgb=True).save_pretrained(folder)


def _char_tokenizer() -> CLIPTokenizer:
    """A CLIP tokenizer over single characters: enough for text queries to reach the text tower.

    The start token must not be id 0: OWL models treat a query whose first id is 0 as padding."""
    vocab: dict[str, int] = {}
    for c in string.ascii_lowercase + string.digits:
        vocab[c] = len(vocab)
        vocab[c + "</w>"] = len(vocab)
    vocab["<|startoftext|>"] = len(vocab)
    vocab["<|endoftext|>"] = len(vocab)
    return CLIPTokenizer(vocab=vocab, merges=[])


def build_detector(folder: Path, size: str = "tiny") -> None:
    tokenizer = _char_tokenizer()
    ids = {k: tokenizer.convert_tokens_to_ids(t) for k, t in
           (("bos_token_id", "<|startoftext|>"), ("eos_token_id", "<|endoftext|>"), ("pad_token_id", "<|endoftext|>"))}
    if size == "tiny":
        side = 64
        cfg = Owlv2Config(
            text_config=dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                             num_attention_heads=2, max_position_embeddings=16, **ids),
            vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                               image_size=side, patch_size=16),
            projection_dim=32)
    else:  # OWLv2 base, patch 16, 960 px
        side = 960
        cfg = Owlv2Config(text_config=dict(**ids), vision_config=dict(image_size=side, patch_size=16))
    model = Owlv2ForObjectDetection(cfg)
    # Random box deltas saturate the sigmoid (boxes collapse to the frame's edges); scaled down, each box
    # stays near its patch's prior box, as a trained head's boxes do.
    with torch.no_grad():
        model.box_head.dense2.weight.mul_(0.01)
        model.box_head.dense2.bias.zero_()
    model.save_pretrained(folder)
    Owlv2Processor(image_processor=Owlv2ImageProcessor(size={"height": side, "width": side}),
                   tokenizer=tokenizer).save_pretrained(folder)


def build_depth(folder: Path, size: str = "tiny") -> None:
    if size == "tiny":
        side = 56
        backbone = _dinov2_config("tiny", num_hidden_layers=4, out_features=["stage1", "stage2", "stage3", "stage4"],
                                  reshape_hidden_states=False)
        cfg = DepthAnythingConfig(backbone_config=backbone, neck_hidden_sizes=[16, 16, 32, 32], fusion_hidden_size=16,
                                  head_hidden_size=8, reassemble_hidden_size=32, patch_size=14)
    else:  # Depth Anything small: a DINOv2-small backbone
        side = 518
        cfg = DepthAnythingConfig()
    DepthAnythingForDepthEstimation(cfg).save_pretrained(folder)
    DPTImageProcessor(size={"height": side, "width": side}, keep_aspect_ratio=True, ensure_multiple_of=14,
                      do_pad=False, image_mean=IMAGENET_MEAN, image_std=IMAGENET_STD).save_pretrained(folder)


def build_aesthetic(folder: Path, size: str = "tiny", seed: int = 0) -> None:
    """A CLIP image tower and a LAION-style linear head (see ``aesthetic_model``)."""
    if size == "tiny":
        side, dims = 56, [32, 16, 1]
        cfg = CLIPConfig(text_config=dict(vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                          num_attention_heads=2, max_position_embeddings=16, bos_token_id=0,
                                          eos_token_id=1, pad_token_id=1),
                         vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                            num_attention_heads=2, image_size=side, patch_size=14),
                         projection_dim=32)
    else:  # CLIP ViT-B/16 image tower, LAION predictor shape (projection 512 -> 1024 -> 128 -> 64 -> 16 -> 1)
        side, dims = 224, [512, 1024, 128, 64, 16, 1]
        cfg = CLIPConfig(vision_config=dict(patch_size=16), projection_dim=512)
    CLIPModel(cfg).save_pretrained(folder)
    CLIPImageProcessor(size={"shortest_edge": side}, crop_size={"height": side, "width": side},
                       image_mean=CLIP_MEAN, image_std=CLIP_STD).save_pretrained(folder)
    rng = np.random.default_rng(seed)
    head = {}
    for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:])):
        head[f"layers.{2 * i}.weight"] = (rng.standard_normal((d_out, d_in)) / np.sqrt(d_in)).astype(np.float32)
        head[f"layers.{2 * i}.bias"] = np.zeros(d_out, np.float32)
    head[f"layers.{2 * (len(dims) - 2)}.bias"] = np.array([5.5], np.float32)  # mid-range of [1, 10]
    save_file(head, str(folder / "head.safetensors"))
    (folder / "head.json").write_text(json.dumps({"normalize_embedding": True, "score_range": [1, 10]}))


BUILDERS = {"dino": build_dino, "detector": build_detector, "depth": build_depth, "aesthetic": build_aesthetic}


def build_models(root: str | Path, size: str = "tiny", which: tuple[str, ...] = MODEL_FOLDERS) -> Path:
    """Write random-weight checkpoints for ``which`` under ``root`` (one subfolder each); returns root."""
    if size not in ("tiny", "real"):
        raise ValueError(f"size {size!r}: expected 'tiny' or 'real'")
    root = Path(root)
    torch.manual_seed(0)
    for name in which:
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        BUILDERS[name](folder, size)
    return root
