"""FIRM-Video without a VLM: PQ rated from the CPU tools' records, IF and WC unscored with the reason."""

from __future__ import annotations

from typing import Iterable

from argus_dagster.protocols.firm.prompts import PQ_CHECKLIST
from argus_dagster.protocols.firm.types import IF, PQ, WC, DimensionResult

# Documented calibration of the measurable defects (numbers as FlickerProbe, MotionProbe and
# ClassicalAesthetic report them; the quality components are ClassicalAesthetic's native-resolution
# measures on 0-1, where clean real clips sit near 1).
PQ_OFFLINE_LIMITS = {
    "low_resolution": "shorter side < 360 px",
    "blur": "sharpness component < 0.35",
    "noise": "noise component < 0.35",
    "exposure": "exposure component < 0.35",
    "compression": "blockiness component < 0.35",
    "brightness_instability": "luma jitter > 3.0 levels",
    "color_instability": "colour jitter > 3.0 levels",
    "flicker": "share of flagged frames > 0.10",
    "frozen": "static share of steps > 0.90, over 60% repeated frames, or a freeze of 1 s or more",
}
OFFLINE_UNMEASURED = ("distortion",)
PQ_OFFLINE_VERSION = "firm-pq-offline-2"


# A native-resolution quality component (0-1, 1 = a clean real clip) under this is a defect.
DEFECT_BELOW = 0.35


def pq_offline(records: Iterable[dict], *, width: int | None = None, height: int | None = None) -> DimensionResult:
    """PQ rating from CPU tool records (``flicker_probe``, ``motion_probe``, ``aesthetic``): 5 minus one
    per measured defect, at least 1. Defects no record measures are named as not measured; with no
    usable record at all the dimension stays unscored."""
    recs = {r.get("tool"): r for r in records if r.get("ok")}
    found: dict[str, str] = {}
    measured: list[str] = []
    if width and height:
        measured.append("low_resolution")
        if min(width, height) < 360:
            found["low_resolution"] = f"{width}x{height}"
    a = recs.get("aesthetic")
    c = (a or {}).get("components") or {}
    if c:  # the native-resolution measures, each on 0-1 (1 = clean): a defect below DEFECT_BELOW
        assert a is not None  # c comes from a
        for defect, comp in (("blur", "sharpness"), ("noise", "noise_sigma"), ("exposure", "exposure"),
                             ("compression", "blockiness")):
            if comp in c:
                measured.append(defect)
                if c[comp] < DEFECT_BELOW:
                    found[defect] = f"{comp} {a.get(comp, c[comp]):.2f} ({c[comp]:.2f} of clean)"
    f = recs.get("flicker_probe")
    if f:
        measured += ["brightness_instability", "color_instability", "flicker"]
        if f["jitter"] > 3.0:
            found["brightness_instability"] = f"luma jitter {f['jitter']:.2f}"
        if f.get("color_jitter", 0.0) > 3.0:
            found["color_instability"] = f"colour jitter {f['color_jitter']:.2f}"
        if f["flagged_fraction"] > 0.10:
            found["flicker"] = f"{f['flagged_fraction']:.0%} of frames flagged"
    m = recs.get("motion_probe")
    if m:
        measured.append("frozen")
        freeze, copies = m.get("longest_freeze_s", 0.0), m.get("duplicate_fraction", 0.0)
        if m.get("static_fraction", 0.0) > 0.90 or copies > 0.6 or freeze >= 1.0:
            found["frozen"] = (f"static share {m.get('static_fraction', 0.0):.2f}, {copies:.0%} repeated frames, "
                               f"longest freeze {freeze:.1f}s")
    unmeasured = [d for d, _ in PQ_CHECKLIST if d not in measured]
    if not measured:
        return DimensionResult(PQ, reason="PQ offline: no usable CPU tool record (flicker_probe, motion_probe, "
                               "aesthetic) for this video", detail={"source": PQ_OFFLINE_VERSION})
    r = max(1, 5 - len(found))
    text = (("Measured defects: " + "; ".join(f"{d.replace('_', ' ')} ({why})" for d, why in found.items()) + ".")
            if found else "No measured defect.")
    text += f" Checked without a VLM: {', '.join(measured)}. Not measured: {', '.join(unmeasured)}. Rating {r}/5."
    defects = [{"id": d, "present": d in found, "evidence": found.get(d, "")} for d in measured]
    return DimensionResult(PQ, None, r, text, "", [], "", {"defects": defects, "not_measured": unmeasured,
                                                          "source": PQ_OFFLINE_VERSION})


def unscored_offline() -> dict[str, DimensionResult]:
    reason = "unscored: {} needs a VLM (checklist verification from frames); none is configured"
    return {IF: DimensionResult(IF, reason=reason.format("instruction following")),
            WC: DimensionResult(WC, reason=reason.format("world coherence"))}


def evaluate_offline(records: Iterable[dict], *, width: int | None = None,
                     height: int | None = None) -> dict[str, DimensionResult]:
    """All three dimensions of one video without a VLM: PQ from the CPU tool records, IF and WC unscored."""
    return {**unscored_offline(), PQ: pq_offline(records, width=width, height=height)}
