"""The project imports under names it owns: its top-level ``assets/`` and ``resources/`` folders are
``argus_dagster.assets`` and ``argus_dagster.resources``, so a Dagster project's own ``assets/`` and
``resources/`` (most have them) neither hide the project's nor are hidden by it, and the wheel installs
one top-level package."""

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _users_project(folder: Path) -> Path:
    """A Dagster project of a user's, with packages called ``assets`` and ``resources`` of its own."""
    (folder / "assets").mkdir(parents=True)
    (folder / "assets" / "__init__.py").write_text(
        "import dagster as dg\n\n\n@dg.asset\ndef users_table():\n    return 1\n")
    (folder / "resources").mkdir()
    (folder / "resources" / "__init__.py").write_text("WAREHOUSE = 'the user\\'s warehouse'\n")
    return folder


def _env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "dagster_home").mkdir(exist_ok=True)
    return {**os.environ, "ARGUS_HOME": str(tmp_path / "home"), "DAGSTER_HOME": str(tmp_path / "dagster_home"),
            "PYTHONPATH": str(ROOT)}


def test_dagster_validates_the_definitions_from_a_folder_with_assets_and_resources_of_its_own(tmp_path):
    """``dagster definitions validate`` puts the working folder first on ``sys.path``: with the
    project's folders imported as top-level ``assets``, an empty ``assets/`` there failed the load of the
    code location (``cannot import name 'ALL_ASSETS' from 'assets'``)."""
    project = _users_project(tmp_path / "project")
    (project / "assets" / "__init__.py").write_text("")  # the case that broke: an empty folder of that name
    done = subprocess.run([str(BIN / "dagster"), "definitions", "validate", "-m", "argus_dagster.location"],
                          cwd=project, env=_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    # Dagster's log lines, each "<time> - dagster - <LEVEL> - <message>": the message of each, colours removed
    said = [re.sub(r"\x1b\[[0-9;]*m", "", line).split(" - ", 3)[-1] for line in (done.stdout + done.stderr).splitlines()
            if " - dagster - " in line]
    assert said[-2:] == ["Validation successful for code location argus_dagster.location.",
                         "All code locations passed validation."], said


def test_a_users_assets_and_the_projects_import_side_by_side(tmp_path):
    """One process imports the user's ``assets`` and ``resources`` and this project's definitions: each
    name means what its owner wrote, and the project's asset modules are files of its own folders."""
    project = _users_project(tmp_path / "project")
    script = (
        "import assets, resources, argus_dagster.definitions as d, argus_dagster.assets as pa\n"
        "import argus_dagster.resources as pr\n"
        "print(assets.users_table.key.to_user_string())\n"
        "print(resources.WAREHOUSE)\n"
        "print(pa.__file__)\n"
        "print(pr.__file__)\n"
        "print(len(pa.ALL_ASSETS) > 10, 'video_scores' in {k.to_user_string() for a in pa.ALL_ASSETS for k in a.keys})\n"
        "print(callable(d.build_definitions))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=project, env=_env(tmp_path),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    table, warehouse, assets_file, resources_file, found, wired = done.stdout.splitlines()
    assert (table, warehouse) == ("users_table", "the user's warehouse")
    assert Path(assets_file).resolve() == (ROOT / "assets" / "__init__.py").resolve()
    assert Path(resources_file).resolve() == (ROOT / "resources" / "__init__.py").resolve()
    assert (found, wired) == ("True True", "True")


def test_the_wheel_installs_one_top_level_package_holding_assets_and_resources(tmp_path):
    """The build follows the package's links: the wheel holds ``argus_dagster/assets`` and
    ``argus_dagster/resources`` as files, and no top-level ``assets`` or ``resources``."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for package in ("argus_dagster", "assets", "resources"):
        shutil.copytree(ROOT / package, src / package, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([str(BIN / "pip"), "--disable-pip-version-check", "wheel", "--no-deps",
                           "--no-build-isolation", "-q", "-w", str(tmp_path / "dist"), str(src)],
                          env=_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("argus_dagster-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"argus_dagster"}
    in_assets = {n.removeprefix("argus_dagster/assets/") for n in names if n.startswith("argus_dagster/assets/")}
    in_resources = {n.removeprefix("argus_dagster/resources/") for n in names
                    if n.startswith("argus_dagster/resources/")}
    assert in_assets == {p.relative_to(ROOT / "assets").as_posix() for p in (ROOT / "assets").rglob("*.py")}
    assert in_resources == {p.relative_to(ROOT / "resources").as_posix()
                            for p in (ROOT / "resources").rglob("*.py")}
