"""Where each module's tests are: for every module of the package (``argus_dagster``, its ``assets`` and
``resources``), the test files that import it, read from the source. A module no test file imports is
listed with the modules of the package that import it (its tests are theirs: a command module is run
through ``argus_dagster.client.cli``, for one).

The table is the section "Where a module's tests are" of tests/README.md; ``tests/unit/test_module_map.py``
keeps it equal to the source. After adding a module or a test file:

    PYTHONPATH=$PWD .venv/bin/python -m tests.module_map --write
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "tests" / "README.md"
SECTION = "## Where a module's tests are"
# The folders of the package and the names they import under (argus_dagster/assets links to assets/).
FOLDERS = {"argus_dagster": "argus_dagster", "assets": "argus_dagster.assets", "resources": "argus_dagster.resources"}


def _only_a_docstring(p: Path) -> bool:
    body = ast.parse(p.read_text()).body
    return all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body)


def package_modules(root: Path = ROOT) -> dict[str, Path]:
    """``{module name: file}`` for every module of the package (rglob does not follow the links)."""
    out = {}
    for folder, name in FOLDERS.items():
        for p in sorted((root / folder).rglob("*.py")):
            if "__pycache__" in p.parts:
                continue
            if p.name == "__init__.py" and _only_a_docstring(p):
                continue  # a folder's package file that holds nothing to test
            parts = (name, *p.relative_to(root / folder).with_suffix("").parts)
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def imported(source: Path, modules: dict[str, Path], root: Path = ROOT) -> set[str]:
    """The package modules ``source`` imports (``from a import b`` imports ``a.b`` where that is a module)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(r"argus_dagster(\.\w+)+:\w+", node.value):
            names = [node.value.partition(":")[0]]  # a command the command line imports by name (client/cli.py)
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative to the file's package (an __init__.py's is its own folder)
                folder, *inner = source.relative_to(root).with_suffix("").parts
                pkg = [FOLDERS.get(folder, folder), *inner[:-1]]
                pkg = pkg[:len(pkg) - node.level + 1]
                base = ".".join([*pkg, base] if base else pkg)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for n in names:
            while n and n not in modules:
                n = n.rpartition(".")[0]
            if n:
                out.add(n)
    return out


def test_files(root: Path = ROOT) -> list[Path]:
    return sorted(p for p in (root / "tests").rglob("test_*.py") if "__pycache__" not in p.parts)


def table(root: Path = ROOT) -> str:
    """The section's table, one row per module, as tests/README.md holds it."""
    modules = package_modules(root)
    tests: dict[str, list[str]] = {m: [] for m in modules}
    for t in test_files(root):
        for m in imported(t, modules, root):
            tests[m].append(t.relative_to(root / "tests").as_posix())
    importers: dict[str, set[str]] = {m: set() for m in modules}
    for m, p in modules.items():
        for dep in imported(p, modules, root):
            if dep != m:
                importers[dep].add(m)
    rows = ["| module | its tests (the test files that import it) |", "|---|---|"]
    for m in sorted(modules):
        if tests[m]:
            cell = ", ".join(f"`{t}`" for t in sorted(tests[m]))
        else:
            through = sorted(importers[m])
            cell = ("none imports it; through " + ", ".join(f"`{i}`" for i in through)) if through else "none"
        rows.append(f"| `{m}` | {cell} |")
    return "\n".join(rows) + "\n"


def _split(text: str) -> tuple[str, str, str]:
    """The README's text before the section's table, the table, and after it."""
    head, _, after = text.partition(SECTION)
    lines = after.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.startswith("|") or line.startswith("## ")), len(lines))
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return head + SECTION + "".join(lines[:start]), "".join(lines[start:end]), "".join(lines[end:])


def readme_table(text: str) -> str:
    """The table of the section in the README's text ('' where there is none)."""
    return _split(text)[1] if SECTION in text else ""


def write(root: Path = ROOT) -> None:
    before, _, after = _split(README.read_text())
    README.write_text(before + table(root) + after)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="write the table into tests/README.md")
    args = ap.parse_args(argv)
    if args.write:
        write()
    else:
        sys.stdout.write(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
