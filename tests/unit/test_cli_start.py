"""``argus --help`` and the light commands start without the heavy libraries (Dagster, polars), and
``argus align --help`` still ends with the legend of its table's columns."""

import subprocess
import sys

import pytest

from argus_dagster.client.cli import main
from argus_dagster.protocols.alignment.metrics import ALIGNMENT_LEGEND

LOADED = ("import sys\nfrom argus_dagster.client.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n"
          "    pass\nprint(' '.join(m for m in ('dagster', 'polars', 'numpy', 'cv2') if m in sys.modules), file=sys.stderr)")


def _heavy_loaded(*argv: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", LOADED, *argv], capture_output=True, text=True, timeout=120)
    return done.stderr.strip().splitlines()[-1].split() if done.stderr.strip() else []


def test_argus_help_loads_neither_dagster_nor_polars():
    assert _heavy_loaded("--help") == []


def test_argus_env_and_a_home_without_evaluations_load_neither_dagster_nor_polars(tmp_path, monkeypatch):
    monkeypatch.setenv("ARGUS_HOME", str(tmp_path / "home"))
    assert _heavy_loaded("env") == []
    assert _heavy_loaded("evaluations") == []


def test_align_help_ends_with_the_column_legend(capsys):
    with pytest.raises(SystemExit):
        main(["align", "--help"])
    out = capsys.readouterr().out
    legend = [line for line in ALIGNMENT_LEGEND.splitlines() if line.strip()]
    assert out.rstrip().splitlines()[-len(legend):] == legend
