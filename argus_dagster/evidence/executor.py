"""Runs one criterion's normalized plan against a candidate's media and records the trace."""

from __future__ import annotations

import time
from typing import Any

from ..media import MediaError
from .media_store import MediaStore
from .plan import NormalizedPlan
from .tools.registry import ToolSuite
from .vocabulary import TOOL_SPECS, crop_id_for


def run_plan(plan: NormalizedPlan, media: MediaStore, tools: ToolSuite) -> list[dict[str, Any]]:
    """Execute every step in order. A step never raises: failures become ``ok: false`` records."""
    records: list[dict[str, Any]] = []
    for i, step in enumerate(plan.steps):
        name, args = step["tool"], step["args"]
        tool = tools.get(name)
        t0 = time.perf_counter()
        try:
            missing = [a for a in TOOL_SPECS[name].media_args
                       if args.get(a) is not None and not media.has(args[a])]
            if missing:
                result = {"ok": False, "error": f"media {[args[a] for a in missing]} not available for this candidate"}
            else:
                result = tool.run(args, media)
                if name == "crop_compare" and result.get("ok"):
                    result.setdefault("registered", crop_id_for(args.get("crop_from", "output_video")))
        except MediaError as exc:
            result = {"ok": False, "error": str(exc)}
        except Exception as exc:  # a tool bug must not take down the candidate
            result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        records.append({
            "step": i,
            "tool": name,
            "tool_version": getattr(tool, "version", ""),
            "args": args,
            "seconds": round(time.perf_counter() - t0, 4),
            **result,
        })
    return records
