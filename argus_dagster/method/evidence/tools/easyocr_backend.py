"""``ocr`` through easyocr, the second backend beside rapidocr, with weights from ``easyocr/`` only.

easyocr needs torchvision matched to torch, so it lives in the optional ``ocr`` extra (its own venv).
The folder holds easyocr's own files under the names it loads: ``craft_mlt_25k.pth`` (CRAFT text
detector) and ``english_g2.pth`` (the generation-2 English recognizer). Downloads stay disabled:
easyocr's networks are built by easyocr's own loaders from these files; weights whose checksum is not
easyocr's release are loaded too and marked ``custom`` in the tool version.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from argus_dagster.infra.media import JUDGE_POLICY
from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.evidence.tools.models import ModelStore, ModelUnavailable
from argus_dagster.method.evidence.tools.ocr import ocr_record

try:  # easyocr is optional: the 'ocr' extra (make test-ocr) installs it with a matched torchvision
    import easyocr
    from easyocr.config import detection_models, recognition_models
    from easyocr.detection import get_detector, get_textbox
    from easyocr.recognition import get_recognizer
    EASYOCR_MISSING = ""
except ImportError as exc:
    EASYOCR_MISSING = str(exc)

EASYOCR_FOLDER = "easyocr"
DETECTOR_NAME = "craft"
RECOGNIZER_NAME = "english_g2"
# easyocr's generation-2 recognizer width (its Reader hard-codes the same numbers).
GEN2_PARAMS = {"input_channel": 1, "output_channel": 256, "hidden_size": 256}


def _require_easyocr() -> None:
    if EASYOCR_MISSING:
        raise ModelUnavailable(f"easyocr is not installed ({EASYOCR_MISSING}); install the 'ocr' extra "
                               "(torch and torchvision matched, see docs/tools.md)")


def easyocr_files() -> dict[str, tuple[str, str]]:
    """File name and release checksum of the detector and recognizer, from easyocr's own config."""
    _require_easyocr()
    det = detection_models[DETECTOR_NAME]
    rec = recognition_models["gen2"][RECOGNIZER_NAME]
    return {"detector": (det["filename"], det["md5sum"]), "recognizer": (rec["filename"], rec["md5sum"])}


def _md5(path: Path) -> str:
    digest = hashlib.md5()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


class EasyOcrEngine:
    """An easyocr ``Reader`` whose networks are loaded from ``folder`` without any download."""

    def __init__(self, folder: Path, device: str):
        _require_easyocr()
        files = easyocr_files()
        paths = {k: folder / name for k, (name, _) in files.items()}
        missing = [str(p) for p in paths.values() if not p.is_file()]
        if missing:
            raise ModelUnavailable(f"easyocr weights missing: {', '.join(missing)}")
        self.release = all(_md5(paths[k]) == md5 for k, (_, md5) in files.items())
        gpu = device if device.startswith("cuda") else False
        reader = easyocr.Reader(["en"], gpu=gpu, model_storage_directory=str(folder),
                                user_network_directory=str(folder), download_enabled=False,
                                detector=False, recognizer=False, verbose=False)
        reader.detect_network = DETECTOR_NAME
        reader.get_textbox = get_textbox
        reader.get_detector = get_detector
        reader.detector = get_detector(str(paths["detector"]), device=reader.device, quantize=False)
        dict_list = {"en": str(Path(easyocr.__file__).parent / "dict" / "en.txt")}
        reader.recognizer, reader.converter = get_recognizer(
            "generation2", GEN2_PARAMS, reader.character, {}, dict_list, str(paths["recognizer"]),
            device=reader.device, quantize=False)
        self.reader = reader
        self.version = f"easyocr-{easyocr.__version__}" + ("" if self.release else "-custom")

    def read(self, frame: np.ndarray) -> list[tuple[str, float]]:
        return [(str(text), float(conf)) for _, text, conf in self.reader.readtext(frame)]


class EasyOcr:
    name = "ocr"
    max_frames = 4

    def __init__(self, store: ModelStore):
        self.store = store
        self.engine: EasyOcrEngine = store.get(EASYOCR_FOLDER, EasyOcrEngine, required=())
        self.version = self.engine.version
        self.config = {"weights": store.weights(EASYOCR_FOLDER)}

    def run(self, args: dict[str, Any], media: MediaStore) -> dict[str, Any]:
        fr = media.frames(args.get("on", "output_video"), JUDGE_POLICY)
        pick = np.linspace(0, len(fr.array) - 1, min(self.max_frames, len(fr.array))).round().astype(int)
        lines: list[dict[str, Any]] = []
        per_frame: list[list[str]] = []
        for i in sorted(set(pick.tolist())):
            with self.store.on_device():
                found = self.engine.read(np.ascontiguousarray(fr.array[i]))
            per_frame.append([t for t, _ in found])
            lines += [{"text": t, "conf": round(c, 3), "t": round(fr.timestamps[i], 3)} for t, c in found]
        return ocr_record("easyocr", lines, per_frame, str(args.get("target") or ""))
