"""Fixtures for the unit tests (builders live in unit_helpers.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from unit_helpers import FPS

from argus_dagster.infra.media import write_video


@pytest.fixture
def write_clip(tmp_path: Path):
    """``write_clip(name, frames, fps=12)`` writes an MP4 under tmp_path and returns its path."""

    def _write(name: str, frames: np.ndarray, fps: float = FPS) -> str:
        path = tmp_path / name
        write_video(path, frames, fps)
        return str(path)

    return _write
