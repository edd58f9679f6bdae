"""The tool suite: one object per process that owns every tool (and any loaded weights).

:func:`embedded_suite` is the weight-free default; :func:`model_suite` adds the model-backed tools
whose weights are found under the models folder. A tool whose weights are missing stays an
:class:`UnavailableTool` naming the missing path (normalization then falls back, method §6); a tool
with a weight-free counterpart (``aesthetic``, ``ocr``) falls back to it and says so in its record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, TypeVar

from argus_dagster.method.evidence.tools import Tool, UnavailableTool
from argus_dagster.method.evidence.tools.classical import ChangeProbe, ClassicalAesthetic, FlickerProbe, MotionProbe, SsimCompare
from argus_dagster.method.evidence.tools.models import ModelStore, ModelUnavailable
from argus_dagster.method.evidence.tools.ocr import RapidOcr
from argus_dagster.method.evidence.tools.vlm_qa import NoVlmQa
from argus_dagster.method.evidence.vocabulary import TOOL_SPECS

if TYPE_CHECKING:
    from argus_dagster.method.evidence.media_store import MediaStore

MODEL_BACKED = ("sam_track", "crop_compare", "dino_sim", "depth_probe", "spatial_relation")
OCR_BACKENDS = ("rapidocr", "easyocr")
T = TypeVar("T")


class FallbackTool:
    """A weight-free stand-in for a model-backed tool that cannot load; every record says why."""

    def __init__(self, tool: Tool, reason: str):
        self.tool = tool
        self.name = tool.name
        self.version = tool.version
        self.reason = reason
        self.config = getattr(tool, "config", None)

    def run(self, args: dict[str, Any], media: MediaStore) -> dict[str, Any]:
        return {**self.tool.run(args, media), "fallback": self.reason}


class ToolSuite:
    """Tools by name. Tools of the vocabulary this suite cannot run are :class:`UnavailableTool`."""

    def __init__(self, tools: dict[str, Tool], store: ModelStore | None = None):
        missing = set(TOOL_SPECS) - set(tools)
        if missing:
            raise ValueError(f"tool suite lacks {sorted(missing)}")
        self.tools = tools
        self.store = store  # the loaded models, when the suite has any

    def get(self, name: str) -> Tool:
        return self.tools[name]

    def available(self) -> frozenset[str]:
        return frozenset(n for n, t in self.tools.items() if not isinstance(t, UnavailableTool))

    def versions(self) -> dict[str, str]:
        return {n: t.version for n, t in sorted(self.tools.items())}

    def describe(self) -> dict[str, Any]:
        def state(t: Tool) -> str:
            if isinstance(t, UnavailableTool):
                return t.reason
            if isinstance(t, FallbackTool):
                return f"fallback to {t.version}: {t.reason}"
            return "available"

        return {n: state(t) for n, t in sorted(self.tools.items())}


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


def _attempt(factory: Callable[[], T]) -> tuple[T | None, str]:
    """The tool, or None and why it cannot load (a missing folder names its path)."""
    try:
        return factory(), ""
    except Exception as exc:  # a corrupt or unsupported checkpoint makes the tool unavailable, not the run
        return None, (str(exc) if isinstance(exc, ModelUnavailable) else f"{type(exc).__name__}: {exc}")


def model_suite(models_dir: str | None, device: str = "cpu", *, vlm_qa: Tool | None = None,
                web_search_url: str = "", web_search_key: str = "", ocr_backend: str = "rapidocr",
                store: ModelStore | None = None) -> ToolSuite:
    """The embedded default plus every model-backed tool whose weights are under ``models_dir``.

    Subfolders: ``dino/`` (dino_sim), ``detector/`` (sam_track, crop_compare, spatial_relation, and
    entity boxes for depth_probe), ``depth/`` (depth_probe, front/back in spatial_relation),
    ``aesthetic/`` (learned aesthetic), ``easyocr/`` (ocr with ``ocr_backend="easyocr"``).
    Models load here, once; the suite is kept for the life of the process.
    """
    from argus_dagster.method.evidence.tools import (  # deferred: torch, transformers and easyocr load only here
        aesthetic_model,
        depth,
        detection,
        dino,
        easyocr_backend,
        spatial,
        web_search,
    )

    if ocr_backend not in OCR_BACKENDS:
        raise ValueError(f"ocr_backend {ocr_backend!r}: expected one of {OCR_BACKENDS}")
    store = store or ModelStore(models_dir or None, device)
    tools = dict(embedded_suite(vlm_qa=vlm_qa).tools)
    localizer, why_det = _attempt(lambda: detection.Localizer(store))
    depth_model, why_depth = _attempt(lambda: depth.DepthModel(store))
    dino_sim, why_dino = _attempt(lambda: dino.DinoSim(store))
    tools["dino_sim"] = dino_sim or UnavailableTool("dino_sim", why_dino)
    tools["sam_track"] = detection.SamTrack(localizer) if localizer else UnavailableTool("sam_track", why_det)
    tools["crop_compare"] = detection.CropCompare(localizer) if localizer else UnavailableTool("crop_compare", why_det)
    tools["spatial_relation"] = (spatial.SpatialRelation(localizer, depth_model) if localizer
                                 else UnavailableTool("spatial_relation", why_det))
    tools["depth_probe"] = depth.DepthProbe(depth_model, localizer) if depth_model else UnavailableTool("depth_probe", why_depth)
    learned, why_aesthetic = _attempt(lambda: aesthetic_model.LearnedAesthetic(store))
    tools["aesthetic"] = learned or FallbackTool(tools["aesthetic"], f"learned aesthetic unavailable: {why_aesthetic}")
    if ocr_backend == "easyocr":
        easy, why_ocr = _attempt(lambda: easyocr_backend.EasyOcr(store))
        tools["ocr"] = easy or FallbackTool(tools["ocr"], f"easyocr unavailable: {why_ocr}")
    if web_search_url and web_search_key:
        search, why_search = _attempt(lambda: web_search.WebSearch(web_search_url, web_search_key))
        tools["web_search"] = search or UnavailableTool("web_search", why_search)
    return ToolSuite(tools, store=store)
