"""A pass's fingerprint: what produced its scores, beyond the judge's name. The judge (backend, model,
the model id the server reported, the endpoints without credentials, the answer bounds and sampling),
the prompt versions, each tool's version and configuration (a model-backed tool's configuration names
its checkpoint's digest), the versions of the packages that compute scores, and the device.

``criterion_scores`` records it in each materialization's metadata (``fingerprint``, and its digest
``fingerprint_id``, also put on the run as the tag ``argus/fingerprint``); ``argus history --format
json`` shows it and ``argus diff`` names every field that differs between two passes.
"""

import os
import platform
import sys
from importlib import metadata
from typing import Any

from argus_dagster.method.evidence.executor import tool_config
from argus_dagster.method.evidence.tools.vlm_qa import QA_PROMPT_VERSION
from argus_dagster.method.judge import JUDGE_PROMPT_VERSION
from argus_dagster.method.rubric.generate import PROMPT_VERSION as RUBRIC_PROMPT_VERSION
from argus_dagster.method.rubric.offline import PROMPT_VERSION as OFFLINE_RUBRIC_PROMPT_VERSION
from argus_dagster.records.fingerprints import digest

from .judging import JudgeResource
from .tools import ToolsResource
from .vlm import VlmResource

FINGERPRINT_TAG = "argus/fingerprint"
# The packages whose code computes a score (decoding, tools, judging, aggregation, the tables).
PACKAGES = ("argus-dagster", "dagster", "numpy", "polars", "scipy", "opencv-python-headless", "decord", "torch",
            "transformers", "rapidocr-onnxruntime", "onnxruntime", "easyocr", "requests")
# The judge's sampling: every request asks for the most likely answer (temperature 0).
TEMPERATURE = 0.0


def package_versions() -> dict[str, str | None]:
    """Each of :data:`PACKAGES` as installed (None where it is not), read without importing it."""
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device(tools_device: str) -> dict[str, Any]:
    """Where the tools ran: the configured device, the CPU's model and count, and where torch is loaded
    and a GPU is in use, its name and CUDA version."""
    out: dict[str, Any] = {"tools": tools_device, "cpu": _cpu_model(), "cpus": os.cpu_count(),
                           "python": platform.python_version(), "system": platform.system()}
    torch = sys.modules.get("torch")  # only where a tool loaded it: a fingerprint imports nothing
    if torch is not None and tools_device.startswith("cuda") and torch.cuda.is_available():
        out["gpu"] = torch.cuda.get_device_name(0)
        out["cuda"] = torch.version.cuda
    return out


def fingerprint(judge: JudgeResource, vlm: VlmResource, tools: ToolsResource) -> dict[str, Any]:
    """The fingerprint of the scores these resources produce (see the module's docstring)."""
    served: list[str] = []
    if vlm.configured:
        served = sorted(getattr(vlm.client(), "served_models", ()) or ())
    suite = tools.suite()
    return {
        "judge": {"identity": judge.identity(vlm), "backend": vlm.backend if vlm.configured else "evidence-only",
                  "model": vlm.model_name() if vlm.configured else None, "served_model": ", ".join(served) or None,
                  "endpoints": vlm.shown_urls() or None, "temperature": TEMPERATURE,
                  "max_new_tokens": vlm.max_new_tokens, "max_answer_chars": vlm.max_answer_chars,
                  "parse_retries": vlm.parse_retries},
        "prompts": {"judge": JUDGE_PROMPT_VERSION, "vlm_qa": QA_PROMPT_VERSION, "rubric": RUBRIC_PROMPT_VERSION,
                    "offline_rubric": OFFLINE_RUBRIC_PROMPT_VERSION},
        "tools": {name: f"{getattr(tool, 'version', '')} {digest(tool_config(tool))}"
                  for name, tool in sorted(suite.tools.items())},
        "packages": package_versions(),
        "device": device(tools.device),
    }
