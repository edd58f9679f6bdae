"""The tool vocabulary of method §5, as data: which arguments name media, which are text.

Normalization (no models needed) and the executor both read this table, so a tool's contract lives in
one place. The last three tools are measurable, weight-free probes of the embedded default.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CONDITION_MEDIA = ("first_frame", "subject_image", "source_video")
BASE_MEDIA = ("output_video",) + CONDITION_MEDIA
DERIVED_MEDIA = ("reference", "output_crop", "source_crop")
ALL_MEDIA = BASE_MEDIA + DERIVED_MEDIA


@dataclass(frozen=True)
class ToolSpec:
    name: str
    media_args: tuple[str, ...] = ()
    text_args: tuple[str, ...] = ()
    # Media ids this step registers for later steps (the executor owns these ids).
    produces: tuple[str, ...] = ()
    is_similarity: bool = False
    defaults: dict = field(default_factory=dict)


TOOL_SPECS: dict[str, ToolSpec] = {
    s.name: s
    for s in (
        ToolSpec("vlm_qa", media_args=("on",), text_args=("question",), defaults={"on": "output_video"}),
        ToolSpec("sam_track", media_args=("on",), text_args=("query",), defaults={"on": "output_video"}),
        ToolSpec("crop_compare", media_args=("crop_from",), text_args=("region",),
                 produces=("output_crop", "source_crop"), defaults={"crop_from": "output_video"}),
        ToolSpec("dino_sim", media_args=("a", "b"), is_similarity=True),
        ToolSpec("ocr", media_args=("on",), text_args=("target",), defaults={"on": "output_video"}),
        ToolSpec("web_search", text_args=("query",), produces=("reference",)),
        ToolSpec("aesthetic", media_args=("on",), defaults={"on": "output_video"}),
        ToolSpec("depth_probe", media_args=("on",), text_args=("query_a", "query_b"),
                 defaults={"on": "output_video"}),
        ToolSpec("spatial_relation", media_args=("on",), text_args=("entities", "relation"),
                 defaults={"on": "output_video"}),
        ToolSpec("flicker_probe", media_args=("on",), defaults={"on": "output_video"}),
        ToolSpec("motion_probe", media_args=("on",), defaults={"on": "output_video"}),
        ToolSpec("ssim_compare", media_args=("a", "b"), is_similarity=True),
        ToolSpec("change_probe", media_args=("a", "b"),
                 defaults={"a": "source_video", "b": "output_video"}),
    )
}


def crop_id_for(crop_from: str) -> str:
    """The id a crop registers: crops of the source are ``source_crop``, all others ``output_crop``."""
    return "source_crop" if crop_from in ("source_video", "source_crop") else "output_crop"
