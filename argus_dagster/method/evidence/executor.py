"""Runs one criterion's normalized plan against a candidate's media and records the trace.

With a cache, every step is content-addressed (:mod:`argus_dagster.infra.cache`): its key is the tool's name
and version, its arguments, the content hash of each medium it reads, the keys of the earlier steps
it depends on, and the sampling policies. A step that reads a crop depends on the ``crop_compare``
that cut it; a ``crop_compare`` depends on the earlier ``sam_track`` on its medium (whose best box it
uses). A cached step is not run; when a step has to run and a step it depends on came from the cache,
that dependency is run first (unrecorded) so the crop or track it leaves behind exists.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from contextlib import nullcontext
from typing import Any

from argus_dagster.infra.cache import ContentCache
from argus_dagster.infra.identities import StepIdentity, record_key
from argus_dagster.infra.media import SAMPLING_ID, MediaError
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.evidence.plan import NormalizedPlan
from argus_dagster.method.evidence.tools.registry import ToolSuite
from argus_dagster.method.evidence.vocabulary import DERIVED_MEDIA, TOOL_SPECS, crop_id_for

# Tools that compute (on the CPU, or a device) run at most this many at once in a process, however
# many criteria run concurrently: more than the cores only adds memory, each holding its own float
# copies of the frames. Tools that wait on the network (a VLM, a search API) do not take a slot.
# A process cache, not a resource's: the cores are the process's, shared by every run and stage that
# runs tools in it at once. Bound: one semaphore of the tools resource's ``tool_threads`` slots.
_SLOTS: list[threading.BoundedSemaphore] = []
_SLOTS_LOCK = threading.Lock()


def set_tool_threads(threads: int | None) -> None:
    """Size the process's slots (the tools resource's ``tool_threads``, when a run sets it up; None:
    one per CPU). The first size given holds for the process: a semaphore some thread waits on is
    never swapped."""
    with _SLOTS_LOCK:
        if not _SLOTS:
            _SLOTS.append(threading.BoundedSemaphore(threads or os.cpu_count() or 1))


def tool_slots() -> threading.BoundedSemaphore:
    """The process's slots: as :func:`set_tool_threads` sized them, else one per CPU."""
    set_tool_threads(None)
    return _SLOTS[0]


WAITING_TOOLS = frozenset({"vlm_qa", "web_search"})


def _produces(step: dict[str, Any]) -> str | None:
    if step["tool"] == "crop_compare":
        return crop_id_for(step["args"].get("crop_from", "output_video"))
    if step["tool"] == "web_search":
        return "reference"
    return None


def dependencies(steps: list[dict[str, Any]], i: int) -> list[int]:
    """Indices of the earlier steps whose side effects step ``i`` reads."""
    step = steps[i]
    deps = []
    for a in TOOL_SPECS[step["tool"]].media_args:
        m = step["args"].get(a)
        if m in DERIVED_MEDIA:
            makers = [j for j in range(i) if _produces(steps[j]) == m]
            if makers:
                deps.append(makers[-1])
    if step["tool"] == "crop_compare":
        src = step["args"].get("crop_from", "output_video")
        deps += [j for j in range(i) if steps[j]["tool"] == "sam_track" and steps[j]["args"].get("on") == src]
    return sorted(set(deps))


def _run_step(step: dict[str, Any], media: MediaStore, tools: ToolSuite) -> dict[str, Any]:
    name, args = step["tool"], step["args"]
    tool = tools.get(name)
    t0 = time.perf_counter()
    try:
        missing = [args[a] for a in TOOL_SPECS[name].media_args if args.get(a) is not None and not media.has(args[a])]
        if missing:
            result = {"ok": False, "error": f"media {missing} not available for this candidate"}
        else:
            with nullcontext() if name in WAITING_TOOLS else tool_slots():
                result = tool.run(args, media)
            if name == "crop_compare" and result.get("ok"):
                result.setdefault("registered", crop_id_for(args.get("crop_from", "output_video")))
    except MediaError as exc:
        result = {"ok": False, "error": str(exc)}
    except Exception as exc:  # a tool bug must not take down the candidate
        result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    return {"tool": name, "tool_version": getattr(tool, "version", ""), "args": args,
            "seconds": round(time.perf_counter() - t0, 4), **result}


def _keep(record: dict[str, Any]) -> bool:
    # A step that failed (not merely unavailable, nor "not measurable" on this clip, which the same
    # clip always is) may succeed next time: it is not stored.
    return bool(record.get("ok") or record.get("unavailable") or record.get("not_measurable"))


def run_plan(plan: NormalizedPlan, media: MediaStore, tools: ToolSuite, cache: ContentCache | None = None,
             hits: list[bool] | None = None) -> list[dict[str, Any]]:
    """Execute every step in order. A step never raises: failures become ``ok: false`` records.

    A record from the cache is the record as first computed; ``hits`` (when given) gets, per step,
    whether it came from the cache.
    """
    steps = plan.steps
    if plan.reference != "none" and media.has(plan.reference):
        media.use_reference(plan.reference)  # method §6: `reference` is the input's medium
    keys: list[str | None] = []
    executed: set[int] = set()

    def execute(j: int) -> dict[str, Any]:
        for d in dependencies(steps, j):
            if d not in executed:
                execute(d)
        executed.add(j)
        return _run_step(steps[j], media, tools)

    records: list[dict[str, Any]] = []
    caching = cache is not None and cache.enabled
    for i, step in enumerate(steps):
        key = step_key(step, media, tools, [keys[d] for d in dependencies(steps, i)]) if caching else None
        keys.append(key)
        if key is None:
            rec, hit = execute(i), False
        else:
            assert cache is not None  # a key is made only when caching
            rec, hit = cache.get_or_compute(key, functools.partial(execute, i), keep=_keep)
        records.append({"step": i, **rec})
        if hits is not None:
            hits.append(hit)
    return records


def step_identity(step: dict[str, Any], media: MediaStore, tools: ToolSuite,
                  dep_keys: list[str | None]) -> StepIdentity | None:
    """The identity of one step, or None when a medium it reads has no content hash. A tool whose
    request shows more media than its arguments name (``vlm_qa`` opens with the output video's
    frames) says which (``also_reads``); their hashes are part of it too."""
    if any(k is None for k in dep_keys):
        return None
    tool = tools.get(step["tool"])
    reads = [(a, step["args"].get(a)) for a in TOOL_SPECS[step["tool"]].media_args]
    also = getattr(tool, "also_reads", None)
    reads += [(f"shown:{m}", m) for m in (also(step["args"], media) if also else ())]
    digests = {}
    for a, m in reads:
        if m is None or (m in DERIVED_MEDIA and media.stands_for(m) is None):
            continue  # a crop or a retrieved reference: the key of the step that made it stands for it
        d = media.digest(m)
        if d is None:
            return None
        digests[a] = d
    return StepIdentity(tool=step["tool"], tool_version=str(getattr(tool, "version", "")),
                        tool_config=tool_config(tool), args=step["args"], media=digests,
                        after=tuple(k for k in dep_keys if k is not None), sampling=SAMPLING_ID)  # none is None (above)


def tool_config(tool: Any) -> dict[str, Any]:
    """What a tool is configured with beyond its version (thresholds, the model behind it, a
    request's identity): its ``config``, when it has one."""
    return dict(getattr(tool, "config", None) or {})


def step_key(step: dict[str, Any], media: MediaStore, tools: ToolSuite, dep_keys: list[str | None]) -> str | None:
    """The content key of one step (:func:`step_identity`), or None when it has none."""
    ident = step_identity(step, media, tools, dep_keys)
    return None if ident is None else record_key(ident)
