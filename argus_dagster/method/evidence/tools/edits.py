"""What an edit instruction asks for, and how far an output carries it out (``change_probe``).

A fixed "enough pixels changed" rule passes a wrong edit and fails a correct edit of a dull clip. Where
the instruction names a property that can be measured without a model (black and white, sepia,
inversion, a colour, brightness, blur, restoring colour, a style word, adding or removing something in
a named region), the probe measures that property on the output against the source, and predicts
how much the requested edit would change the source, so that "unchanged" is judged against what
was asked.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

import cv2
import numpy as np

# Hue angles (degrees) in OpenCV's Lab a*-b* plane, measured on saturated sRGB primaries.
COLOUR_HUES = {"red": 40.0, "orange": 60.0, "yellow": 95.0, "green": 135.0, "cyan": 200.0, "blue": 290.0,
               "purple": 315.0, "violet": 315.0, "pink": 350.0, "magenta": 330.0}
_COLOUR = re.compile(r"\b(" + "|".join(COLOUR_HUES) + r")\b", re.I)
_KINDS: list[tuple[str, re.Pattern]] = [
    ("colourize", re.compile(r"\b(colou?ri[sz]e|restore\b.*\bcolou?rs?|full[- ]colou?r|add colou?r)", re.I)),
    ("grayscale", re.compile(r"\b(black[- ]and[- ]white|gr[ae]y ?scale|monochrome|desaturat\w*|colou?rless)\b", re.I)),
    ("sepia", re.compile(r"\bsepia\b", re.I)),
    ("invert", re.compile(r"\b(invert\w*|negative)\b", re.I)),
    ("brighter", re.compile(r"\b(brighten\w*|brighter|increase the brightness|lighten\w*|lighter)\b", re.I)),
    ("darker", re.compile(r"\b(darken\w*|darker|decrease the brightness|reduce the brightness|dimmer)\b", re.I)),
    ("blur", re.compile(r"\b(blur\w*|defocus\w*|out of focus|soften\w*)\b", re.I)),
    ("remove", re.compile(r"\b(remove|erase|delete|get rid of)\b", re.I)),
    ("add", re.compile(r"\b(add|insert|place|put)\b", re.I)),
    ("colour", re.compile(r"\b(colou?r|turn|make|paint|tint|recolou?r)\b", re.I)),
    ("style", re.compile(r"\b(style|watercolou?r|cartoon|anime|oil painting|sketch|pixel art|claymation|"
                         r"van gogh|ukiyo-e|comic|pencil)\b", re.I)),
]
_REGION = re.compile(r"\b(left|right|top|bottom|upper|lower|cent(?:er|re)|middle)\b", re.I)


@dataclass(frozen=True)
class EditRequest:
    kind: str  # one of the _KINDS names, or "unknown"
    target: str = ""  # a colour name for "colour"
    region: str = ""  # a named part of the frame for add/remove: left, right, top, bottom, center


def parse_edit(instruction: str) -> EditRequest:
    """The measurable request in ``instruction``; ``kind="unknown"`` when none is recognized."""
    text = instruction or ""
    for kind, rx in _KINDS:
        if not rx.search(text):
            continue
        if kind == "colour":
            colours = _COLOUR.findall(text)
            after = re.search(r"\b(?:to|into|with)\b(.*)$", text, re.I)
            tail = _COLOUR.findall(after.group(1)) if after else []
            target = (tail or colours or [""])[0].lower()
            if not target:
                continue
            return EditRequest("colour", target=target)
        region = ""
        if kind in ("add", "remove"):
            m = _REGION.search(text)
            region = {"upper": "top", "lower": "bottom", "centre": "center", "middle": "center"}.get(
                m.group(1).lower(), m.group(1).lower()) if m else ""
        return EditRequest(kind, region=region)
    return EditRequest("unknown")


def _lab(rgb: np.ndarray) -> np.ndarray:
    lab = cv2.cvtColor(rgb, cv2.COLOR_RGB2LAB).astype(np.float32)
    lab[..., 0] *= 100.0 / 255.0
    lab[..., 1:] -= 128.0
    return lab


def _chroma(lab: np.ndarray) -> np.ndarray:
    return np.hypot(lab[..., 1], lab[..., 2])


def _hue(lab: np.ndarray) -> np.ndarray:
    return np.degrees(np.arctan2(lab[..., 2], lab[..., 1])) % 360.0


def _lin(x: float, lo: float, hi: float) -> float:
    return float(np.clip((x - lo) / (hi - lo), 0.0, 1.0))


def sepia(rgb: np.ndarray) -> np.ndarray:
    """The classic sepia matrix (as image editors apply it)."""
    m = np.array([[0.393, 0.769, 0.189], [0.349, 0.686, 0.168], [0.272, 0.534, 0.131]], np.float32)
    return np.clip(rgb.astype(np.float32) @ m.T, 0, 255).astype(np.uint8)


def simulate(req: EditRequest, src: np.ndarray) -> np.ndarray | None:
    """The source with the requested edit applied, where one rendering of it is canonical."""
    if req.kind == "grayscale":
        return np.repeat(cv2.cvtColor(src, cv2.COLOR_RGB2GRAY)[..., None], 3, axis=2)
    if req.kind == "sepia":
        return sepia(src)
    if req.kind == "invert":
        return 255 - src
    if req.kind in ("brighter", "darker"):
        return np.clip(src.astype(np.int16) + (30 if req.kind == "brighter" else -30), 0, 255).astype(np.uint8)
    if req.kind == "blur":
        return cv2.GaussianBlur(src, (0, 0), 2.0)
    return None


def region_mask(region: str, shape: tuple[int, int]) -> np.ndarray | None:
    h, w = shape
    m = np.zeros((h, w), bool)
    if region == "left":
        m[:, : w // 2] = True
    elif region == "right":
        m[:, w // 2:] = True
    elif region == "top":
        m[: h // 2] = True
    elif region == "bottom":
        m[h // 2:] = True
    elif region == "center":
        m[h // 4: 3 * h // 4, w // 4: 3 * w // 4] = True
    else:
        return None
    return m


def _top_gradient(gray: np.ndarray) -> float:
    g = gray.astype(np.float64)
    mag = np.hypot(cv2.Sobel(g, cv2.CV_64F, 1, 0, ksize=3), cv2.Sobel(g, cv2.CV_64F, 0, 1, ksize=3)).ravel()
    return float(np.sort(mag)[-max(1, mag.size // 10):].mean())


def fulfilment(req: EditRequest, src: np.ndarray, out: np.ndarray) -> tuple[float | None, str]:
    """How far ``out`` carries out ``req`` relative to ``src`` (0-1, same size RGB frames), and how
    that was measured; None when the request names no property measurable here."""
    ls, lo = _lab(src), _lab(out)
    cs, co = _chroma(ls), _chroma(lo)
    if req.kind == "grayscale":
        # Shares, not pixel positions: a zoom or shift must not count as "made grey".
        grey_src, grey_out = float((cs < 5.0).mean()), float((co < 5.0).mean())
        if grey_src > 0.97:  # the source is already grey: the output only has to stay grey
            return _lin(float(co.mean()), 8.0, 3.0), "output chroma (the source is nearly grey)"
        return (float(np.clip((grey_out - grey_src) / (1.0 - grey_src), 0.0, 1.0)),
                "share of the source's coloured area that is grey in the output")
    if req.kind == "colourize":
        return _lin(float(co.mean() - cs.mean()), 0.0, 10.0), "mean chroma gained"
    if req.kind == "sepia":
        h = _hue(lo)
        warm = (h > 30) & (h < 110) & (co > 3) & (co < 45)
        extreme = (lo[..., 0] < 12) | (lo[..., 0] > 95)
        return float((warm | extreme).mean()), "share of pixels in sepia's warm, low-chroma tones"
    if req.kind == "invert":
        ys, yo = ls[..., 0], lo[..., 0]
        informative = np.abs(ys - 50.0) > 12.0
        if informative.mean() < 0.01:
            return None, "the source is mid-grey: inversion is not measurable"
        closer = np.abs(yo - (100.0 - ys)) < np.abs(yo - ys)
        return float(closer[informative].mean()), "share of pixels whose lightness is inverted"
    if req.kind in ("brighter", "darker"):
        delta = float(lo[..., 0].mean() - ls[..., 0].mean()) * (1 if req.kind == "brighter" else -1)
        return _lin(delta, 0.0, 8.0), f"mean lightness change {'up' if req.kind == 'brighter' else 'down'}"
    if req.kind == "blur":
        ratio = _top_gradient(cv2.cvtColor(out, cv2.COLOR_RGB2GRAY)) / (_top_gradient(cv2.cvtColor(src, cv2.COLOR_RGB2GRAY)) + 1e-6)
        return _lin(ratio, 0.9, 0.55), "edge strength lost"
    if req.kind == "colour":
        hue = COLOUR_HUES[req.target]

        def share(lab: np.ndarray) -> float:
            dh = np.abs((_hue(lab) - hue + 180.0) % 360.0 - 180.0)
            return float(((dh < 30.0) & (_chroma(lab) > 12.0)).mean())

        return _lin(share(lo) - share(ls), 0.0, 0.04), f"share of {req.target} pixels gained"
    diff = np.abs(out.astype(np.int16) - src.astype(np.int16)).max(axis=2)
    changed = diff > 25
    if req.kind in ("add", "remove"):
        mask = region_mask(req.region, diff.shape)
        if mask is not None:
            inside, outside = float(changed[mask].mean()), float(changed[~mask].mean())
            return (_lin(inside, 0.005, 0.03) * _lin(inside / (outside + 1e-3), 1.0, 2.5),
                    f"change in the {req.region} versus elsewhere")
        frac = float(changed.mean())
        return _lin(frac, 0.005, 0.03) * _lin(frac, 0.7, 0.4), "a local change (not none, not everywhere)"
    if req.kind == "style":
        return _lin(float(changed.mean()), 0.1, 0.5), "share of the frame restyled (the style itself needs a VLM)"
    return None, "no measurable property named"


def measure_edit(instruction: str, pairs: list[tuple[np.ndarray, np.ndarray]]) -> dict:
    """``change_probe``'s edit fields for time-aligned (source, output) frame pairs of equal size."""
    req = parse_edit(instruction)
    per, expected, how = [], [], ""
    for src, output in pairs:
        f, how = fulfilment(req, src, output)
        if f is not None:
            per.append(f)
        sim = simulate(req, src)
        if sim is not None:
            expected.append(float(np.abs(sim.astype(np.int16) - src.astype(np.int16)).mean()))
    out: dict = {"edit": asdict(req), "edit_measure": how}
    out["fulfilment"] = round(float(np.mean(per)), 4) if per else None
    out["fulfilment_per_frame"] = [round(x, 3) for x in per]
    out["expected_change"] = round(float(np.mean(expected)), 4) if expected else None
    return out
