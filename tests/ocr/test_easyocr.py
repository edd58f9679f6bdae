"""easyocr as the second ``ocr`` backend, on easyocr's own networks with random weights saved under the
file names it loads. Runs in the ``ocr`` venv (``make test-ocr``); elsewhere it is skipped."""

import importlib.util
import os

import cv2
import numpy as np
import pytest
import torch

from argus_dagster.method.evidence.media_store import MediaStore
from argus_dagster.method.evidence.tools.easyocr_backend import EasyOcr, EasyOcrEngine, easyocr_files
from argus_dagster.method.evidence.tools.registry import FallbackTool, model_suite

# Collected and skipped (never "no tests collected") outside the ocr venv; inside it, easyocr must import.
if os.environ.get("ARGUS_OCR_TESTS") == "1" or importlib.util.find_spec("easyocr") is not None:
    import easyocr
else:
    easyocr = None
pytestmark = pytest.mark.skipif(easyocr is None, reason="easyocr lives in the 'ocr' extra's venv: run `make test-ocr`")


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory):
    """``easyocr/`` with a CRAFT detector and a generation-2 English recognizer of random weights."""
    from easyocr.config import recognition_models
    from easyocr.craft import CRAFT
    from easyocr.model.vgg_model import Model

    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("models")
    folder = root / "easyocr"
    folder.mkdir()
    files = easyocr_files()
    torch.save(CRAFT(pretrained=False).state_dict(), folder / files["detector"][0])
    n_class = len(recognition_models["gen2"]["english_g2"]["characters"]) + 1  # + the CTC blank
    recognizer = Model(num_class=n_class, input_channel=1, output_channel=256, hidden_size=256)
    # easyocr saved its recognizers from DataParallel: every key carries a "module." prefix.
    torch.save({f"module.{k}": v for k, v in recognizer.state_dict().items()}, folder / files["recognizer"][0])
    return root


@pytest.fixture(scope="module")
def text_image(tmp_path_factory):
    img = np.full((80, 240, 3), 255, np.uint8)
    cv2.putText(img, "ARGUS", (20, 55), cv2.FONT_HERSHEY_SIMPLEX, 1.5, (0, 0, 0), 3)
    path = tmp_path_factory.mktemp("img") / "text.png"
    cv2.imwrite(str(path), img)
    return str(path)


def test_easyocr_loads_from_disk_and_reads(models_dir, text_image):
    suite = model_suite(str(models_dir), ocr_backend="easyocr")
    tool = suite.get("ocr")
    assert isinstance(tool, EasyOcr)
    assert tool.version == f"easyocr-{easyocr.__version__}-custom"  # random weights: not the release checksums
    assert not tool.engine.release
    rec = tool.run({"on": "output_video", "target": "ARGUS"}, MediaStore({"output_video": text_image}))
    assert rec["ok"] and rec["backend"] == "easyocr" and rec["n_frames"] == 1
    for line in rec["lines"]:
        assert isinstance(line["text"], str) and 0.0 <= line["conf"] <= 1.0 and line["t"] == 0.0
    assert 0.0 <= rec["match"] <= 1.0 and rec["frames_with_match"] in (0.0, 1.0)
    assert rec["target"] == "ARGUS"


def test_engine_reads_a_frame_directly(models_dir, text_image):
    engine = EasyOcrEngine(models_dir / "easyocr", "cpu")
    frame = cv2.cvtColor(cv2.imread(text_image), cv2.COLOR_BGR2RGB)
    found = engine.read(frame)
    assert all(isinstance(t, str) and 0.0 <= c <= 1.0 for t, c in found)
    net = engine.reader.recognizer
    assert net.Prediction.out_features == len(engine.reader.character) + 1


def test_missing_easyocr_weights_fall_back_to_rapidocr_naming_the_path(tmp_path):
    (tmp_path / "easyocr").mkdir()
    (tmp_path / "easyocr" / easyocr_files()["detector"][0]).write_bytes(b"")
    suite = model_suite(str(tmp_path), ocr_backend="easyocr")
    tool = suite.get("ocr")
    assert isinstance(tool, FallbackTool) and tool.version.startswith("rapidocr")
    missing = tmp_path / "easyocr" / easyocr_files()["recognizer"][0]
    assert tool.reason == f"easyocr unavailable: easyocr weights missing: {missing}"
    assert model_suite(str(tmp_path / "nowhere"), ocr_backend="easyocr").get("ocr").reason.endswith("is missing")
