"""The suite's own rule: a test that cannot run on this machine skips through ``tests/skips.py``, which
says what it needs and fails it under ``CI=true`` instead; no other skip is silent there."""

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# The skips that stand under CI, each for its reason.
ALLOWED = {
    # easyocr lives in a venv of its own (`make test-ocr`, which CI runs beside `make test`)
    "ocr/test_easyocr.py": "easyocr is None",
    # the message said without a CUDA device: on a machine with one, there is nothing to check
    "unit/test_model_tools.py": "torch.cuda.is_available()",
    # FIFOs and /dev/zero: every Linux machine has them; the test says what it needs elsewhere
    "integration/test_hostile_media.py": 'not hasattr(os, "mkfifo")',
}
SKIP = re.compile(r"pytest\.skip\(|pytest\.mark\.skipif\(|pytest\.importorskip\(")


def skips(root: Path = TESTS) -> dict[str, list[str]]:
    """Every skip written in a test file, by file (``tests/skips.py`` itself left out)."""
    out: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == "skips.py":
            continue
        for line in path.read_text().splitlines():
            if SKIP.search(line) and not line.lstrip().startswith("#"):
                out.setdefault(rel, []).append(line.strip())
    return out


def test_every_skip_goes_through_the_rule_or_is_named_with_its_reason():
    found = skips()
    loose = {rel: lines for rel, lines in found.items()
             if rel not in ALLOWED or not all(ALLOWED[rel] in line for line in lines)}
    assert loose == {}, f"skip through tests/skips.py (unavailable, machine_lacks), which fails under CI=true: {loose}"
    assert set(found) == set(ALLOWED)  # an allowance with no skip left is removed


def test_the_scan_finds_a_bare_skip(tmp_path):
    bare = "pytest." + "skip"  # written apart, so that this file holds no skip of its own
    (tmp_path / "unit").mkdir()
    (tmp_path / "unit" / "test_x.py").write_text(f'import pytest\n\ndef test_x():\n    {bare}("no root")\n')
    (tmp_path / "skips.py").write_text(f"{bare}(what)\n")
    assert skips(tmp_path) == {"unit/test_x.py": [f'{bare}("no root")']}
