"""The tool suite: one object per process that owns every tool (and any loaded weights)."""

from __future__ import annotations

from typing import Any

from ..vocabulary import TOOL_SPECS
from . import Tool, UnavailableTool
from .classical import ChangeProbe, ClassicalAesthetic, FlickerProbe, MotionProbe, SsimCompare
from .ocr import RapidOcr
from .vlm_qa import NoVlmQa

MODEL_BACKED = ("sam_track", "crop_compare", "dino_sim", "depth_probe", "spatial_relation")


class ToolSuite:
    """Tools by name. Tools of the vocabulary this suite cannot run are :class:`UnavailableTool`."""

    def __init__(self, tools: dict[str, Tool]):
        missing = set(TOOL_SPECS) - set(tools)
        if missing:
            raise ValueError(f"tool suite lacks {sorted(missing)}")
        self.tools = tools

    def get(self, name: str) -> Tool:
        return self.tools[name]

    def available(self) -> frozenset[str]:
        return frozenset(n for n, t in self.tools.items() if not isinstance(t, UnavailableTool))

    def versions(self) -> dict[str, str]:
        return {n: t.version for n, t in sorted(self.tools.items())}

    def describe(self) -> dict[str, Any]:
        return {n: ("available" if not isinstance(t, UnavailableTool) else t.reason) for n, t in self.tools.items()}


def embedded_suite(*, vlm_qa: Tool | None = None, web_search: bool = False) -> ToolSuite:
    """The embedded default: weight-free tools on the CPU; model-backed ones report what is missing."""
    tools: dict[str, Tool] = {
        "flicker_probe": FlickerProbe(),
        "motion_probe": MotionProbe(),
        "aesthetic": ClassicalAesthetic(),
        "ssim_compare": SsimCompare(),
        "change_probe": ChangeProbe(),
        "ocr": RapidOcr(),
        "vlm_qa": vlm_qa or NoVlmQa(),
        "web_search": UnavailableTool("web_search", "no search key configured"),
    }
    for name in MODEL_BACKED:
        tools[name] = UnavailableTool(name, "needs model weights; no models folder is configured (ARGUS_MODELS_DIR)")
    return ToolSuite(tools)
