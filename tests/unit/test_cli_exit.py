"""The ``argus`` command leaves without the interpreter's teardown, and loses nothing by it: what it
printed reaches a pipe or a file, its exit status is kept, and a profiler run under it still writes
its results (the ordinary exit is kept for it). A numeric option out of its range is refused where it
is parsed: one line on stderr, exit status 2, nothing run."""

import os
import pstats
import re
import subprocess
import sys
from pathlib import Path

import pytest

ARGUS = str(Path(sys.executable).parent / "argus")


def _env(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARGUS_", "DAGSTER_"))}
    return {**env, "ARGUS_HOME": str(home)}


def test_output_and_status_survive_the_quick_exit(tmp_path):
    out = tmp_path / "out.txt"
    with out.open("w") as f:  # a file: fully buffered, so only a flush before leaving gets it there
        rc = subprocess.run([ARGUS, "evaluations"], env=_env(tmp_path / "home"), stdout=f, stderr=subprocess.PIPE,
                            timeout=120).returncode
    assert rc == 1  # nothing evaluated in an empty home
    assert out.read_text().strip() == "no evaluation recorded yet: run `argus demo` or `argus evaluate`"


def test_a_profiler_run_under_argus_still_writes_its_results(tmp_path):
    prof = tmp_path / "argus.prof"
    done = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), ARGUS, "evaluations"],
                          env=_env(tmp_path / "home"), capture_output=True, text=True, timeout=120)
    assert "no evaluation recorded yet" in done.stdout  # (cProfile exits 0 whatever the script returned)
    assert any("cli.py" in fn for fn, _, _ in pstats.Stats(str(prof)).stats)  # the command's own code was seen


# Each numeric option of each command, and values it must refuse: negative, zero where zero means
# nothing, huge, not a number, not finite; what its range is, written out here.
ALIGN = ["align", "--human", "h.csv", "--scores", "s.parquet"]
BAD_NUMBERS = [
    (["history"], "--limit", ["-1", "0", "1000001", "99999999999999999999", "x", "1.5", ""], "from 1 to 1000000"),
    (["open"], "--port", ["-1", "65536", "99999999999999999999", "http", "80.5"], "from 0 to 65535"),
    (["ui"], "--port", ["-1", "65536", "1e3", "x"], "from 0 to 65535"),
    (["ui"], "--reports-port", ["-1", "0", "65536", "x"], "from 1 to 65535"),
    (ALIGN, "--n-boot", ["-1", "100001", "1e9", "x", "10.5"], "from 0 to 100000"),
    (["best-of-n"], "--mix", ["final=-1", "final=0", "final=nan", "final=inf", "final=1e10", "final=x", "final",
                              "=1"], "COLUMN=WEIGHT with a positive weight"),
]
# --human-scale LO HI: each finite, at most 1e9 in magnitude, LO below HI.
BAD_SCALES = [(["nan", "5"], "finite number"), (["1", "inf"], "finite number"), (["-10000000000", "5"], "finite number"),
              (["x", "5"], "finite number"), (["5", "1"], "LO must be below HI"), (["3", "3"], "LO must be below HI")]


def _refused(argv: list[str], home: Path) -> str:
    """The one line ``argus argv`` says on stderr, having printed nothing and exited 2."""
    done = subprocess.run([ARGUS, *argv], env=_env(home), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == "", (argv, done.returncode, done.stdout)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, (argv, done.stderr)
    return lines[0]


@pytest.mark.parametrize("command, option, values, expected", BAD_NUMBERS,
                         ids=[f"{c[0]}{o}" for c, o, _, _ in BAD_NUMBERS])
def test_a_numeric_option_out_of_its_range_is_refused_where_it_is_parsed(tmp_path, command, option, values, expected):
    for value in values:
        line = _refused([*command, f"{option}={value}"], tmp_path / "home")
        assert line.startswith(f"argus {command[0]}: argument {option}: {value[:40]!r}: ") and expected in line, line
    assert not (tmp_path / "home").exists()  # refused before anything was read or written


@pytest.mark.parametrize("values, expected", BAD_SCALES, ids=["-".join(v) for v, _ in BAD_SCALES])
def test_a_human_scale_that_is_no_range_is_refused_where_it_is_parsed(tmp_path, values, expected):
    line = _refused([*ALIGN, "--human-scale", *values], tmp_path / "home")
    assert re.match(r"argus align: argument --human-scale: ", line) and expected in line, line


def test_numbers_in_range_are_read_as_given():
    from argus_dagster.client.arguments import parser

    p = parser()
    assert p.parse_args(["history", "--limit", "1"]).limit == 1
    assert p.parse_args(["history"]).limit is None  # every materialization
    assert p.parse_args(["open", "--port", "0"]).port == 0 and p.parse_args(["open", "--port", "65535"]).port == 65535
    assert p.parse_args(["ui", "--port", "0", "--reports-port", "65535"]).reports_port == 65535
    assert p.parse_args([*ALIGN, "--n-boot", "0"]).n_boot == 0
    assert p.parse_args([*ALIGN, "--human-scale", "-1", "1.5"]).human_scale == [-1.0, 1.5]
    assert p.parse_args(["best-of-n", "--mix", "final=1", "pq=0.5"]).mix == [("final", 1.0), ("pq", 0.5)]
