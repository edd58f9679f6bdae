"""tests/README.md's map of where each module's tests are (tests/module_map.py) is the source's."""

from pathlib import Path

from tests import module_map


def test_the_readmes_map_is_the_sources():
    have = module_map.readme_table(module_map.README.read_text())
    want = module_map.table()
    assert have == want, ("tests/README.md's map of module tests is stale: "
                          "PYTHONPATH=$PWD .venv/bin/python -m tests.module_map --write")


def test_the_map_follows_imports_relative_imports_and_commands_named_by_string(tmp_path: Path):
    for folder in ("argus_dagster/client", "argus_dagster/method", "assets", "resources", "tests/unit"):
        (tmp_path / folder).mkdir(parents=True)
    files = {
        "argus_dagster/__init__.py": '"""the package"""\n',
        "argus_dagster/client/__init__.py": '"""commands"""\n',
        "argus_dagster/client/cli.py": 'COMMANDS = {"run": "argus_dagster.client.run:cmd"}\n',
        "argus_dagster/client/run.py": "from argus_dagster.method import judge\n",
        "argus_dagster/method/__init__.py": "",
        "argus_dagster/method/judge.py": "X = 1\n",
        "argus_dagster/method/unused.py": "Y = 2\n",
        "assets/__init__.py": "from .scores import s\n",
        "assets/scores.py": "from argus_dagster.method.judge import X\ns = X\n",
        "resources/__init__.py": "",
        "tests/unit/test_judge.py": "from argus_dagster.method.judge import X\n",
        "tests/unit/test_cli.py": "import argus_dagster.client.cli\n",
        "tests/unit/test_assets.py": "from argus_dagster.assets import s\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    rows = dict(line.strip("|").split(" | ") for line in module_map.table(tmp_path).splitlines()[2:])
    rows = {k.strip(" `"): v.strip() for k, v in rows.items()}
    assert "argus_dagster.client" not in rows  # a package file with only its docstring
    assert rows["argus_dagster.method.judge"] == "`unit/test_judge.py`"
    assert rows["argus_dagster.client.cli"] == "`unit/test_cli.py`"
    assert rows["argus_dagster.client.run"] == "none imports it; through `argus_dagster.client.cli`"
    assert rows["argus_dagster.assets.scores"] == "none imports it; through `argus_dagster.assets`"
    assert rows["argus_dagster.assets"] == "`unit/test_assets.py`"
    assert rows["argus_dagster.method.unused"] == "none"
