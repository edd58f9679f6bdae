"""The performance and capacity pages describe the present: no history phrases, and every figure
under a command that measures it today. How the figures moved lives in CHANGELOG.md."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = ("docs/performance.md", "docs/capacity.md")

# Words that tell how a figure moved rather than what it is.
HISTORY = re.compile(r"\b(before|was|went from|no longer)\b", re.IGNORECASE)

# A measured figure: a number with a unit of time, size or share, or a ratio such as 1.18x.
FIGURE = re.compile(
    r"(?<![\w.])\d[\d,]*(?:\.\d+)?\s?(?:ms|s|MB|GB|KB|MiB|GiB|%|hours|minutes)(?!\w)"
    r"|(?<![\w.])\d+(?:\.\d+)?x(?!\w)"
)

# A command a reader can run: a benchmark module, an argus subcommand or a make target.
BENCHMARK = re.compile(r"\.venv/bin/python -m (benchmarks\.\w+)")
ARGUS = re.compile(r"\.venv/bin/argus ([a-z][\w-]*|--help)")
INLINE_PYTHON = re.compile(r"\.venv/bin/python -c ")
MAKE = re.compile(r"(?:^|`)make ([a-z][\w-]*)")


def sections(text: str) -> list[tuple[str, str]]:
    """``(heading, body)`` for the text under each heading (any level), the title's included; a
    ``#`` line inside a fenced block is not a heading."""
    out: list[tuple[str, list[str]]] = []
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and re.match(r"#{1,6} ", line):
            out.append((line.lstrip("#").strip(), []))
        elif out:
            out[-1][1].append(line)
    return [(h, "\n".join(body)) for h, body in out]


def argus_subcommands() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "argus_dagster" / "client").rglob("*.py"):
        names |= set(re.findall(r"add_parser\(\s*\"([\w-]+)\"", path.read_text()))
    return names


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.MULTILINE))


def commands(body: str) -> dict[str, bool]:
    """Each command named in ``body``, and whether what it runs exists in this tree."""
    found: dict[str, bool] = {}
    for module in BENCHMARK.findall(body):
        found[f"python -m {module}"] = (ROOT / (module.replace(".", "/") + ".py")).is_file()
    subcommands = argus_subcommands()
    for sub in ARGUS.findall(body):
        found[f"argus {sub}"] = sub == "--help" or sub in subcommands
    if INLINE_PYTHON.search(body):
        found["python -c"] = True
    targets = make_targets()
    for target in MAKE.findall(body):
        found[f"make {target}"] = target in targets
    return found


@pytest.mark.parametrize("page", PAGES)
def test_page_holds_no_history_phrase(page):
    lines = (ROOT / page).read_text().splitlines()
    hits = [f"{page}:{n}: {m.group(0)!r} in {line.strip()[:90]!r}"
            for n, line in enumerate(lines, 1) for m in HISTORY.finditer(line)]
    assert not hits, "history belongs in CHANGELOG.md:\n" + "\n".join(hits)


@pytest.mark.parametrize("page", PAGES)
def test_each_figure_bearing_section_names_a_command_that_exists(page):
    parts = sections((ROOT / page).read_text())
    assert len(parts) >= 4, f"{page} has its sections under headings"
    bearing = [(h, b) for h, b in parts if FIGURE.search(b)]
    assert bearing, f"{page} holds figures"
    for heading, body in bearing:
        named = commands(body)
        assert named, (f"{page}, section {heading!r}: figures such as {FIGURE.search(body).group(0)!r} "
                       f"with no command that measures them")
        missing = [c for c, ok in named.items() if not ok]
        assert not missing, f"{page}, section {heading!r}: {missing} name nothing in this tree"


def test_history_phrase_and_figure_patterns_read_what_they_mean():
    assert HISTORY.search("it was 2.78 GB") and HISTORY.search("Went from 10 to 9 s")
    assert HISTORY.search("No longer grows") and HISTORY.search("before the change")
    assert not HISTORY.search("the wasm build, a beforehand check, wash")
    assert [m.group(0) for m in FIGURE.finditer("91.0 s, 1.18x, 3.6 ms, 1.58 GB, 92.2%, 46 minutes")] == [
        "91.0 s", "1.18x", "3.6 ms", "1.58 GB", "92.2%", "46 minutes"]
    assert not FIGURE.search("20 models x 1,000 inputs x 5 tasks, a 2-frame clip, fd 2")
    assert commands("```\n.venv/bin/python -m benchmarks.no_such_bench\n```") == {
        "python -m benchmarks.no_such_bench": False}
    assert commands("    .venv/bin/python -m benchmarks.scale --videos 1000") == {
        "python -m benchmarks.scale": True}
    assert commands("`make bench` runs both") == {"make bench": True}
    assert commands("time .venv/bin/argus --help; .venv/bin/argus no-such-command") == {
        "argus --help": True, "argus no-such-command": False}


def test_changelog_holds_the_history_in_dated_entries():
    text = (ROOT / "CHANGELOG.md").read_text()
    dates = re.findall(r"^## (\d{4}-\d{2}-\d{2})$", text, re.MULTILINE)
    assert len(dates) >= 2 and dates == sorted(dates, reverse=True), dates
    assert HISTORY.search(text), "the changelog tells how the figures moved"


# Where the docs name the code: a path of the package, a dotted module, or `NAME` in/of `path.py`.
DOCS = ("README.md", "CHANGELOG.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")))
PATH = re.compile(r"(?<![\w/.])((?:argus_dagster|assets|resources|benchmarks)/[\w/]*[\w]+(?:\.py)?/?)")
DOTTED = re.compile(r"(?<![\w/.])((?:argus_dagster|assets|resources|benchmarks)(?:\.\w+)+)")
NAME_IN = re.compile(r"`(\w+)` (?:in|of) `((?:argus_dagster|assets|resources)/[\w/]+\.py)`")


def stale_mentions(doc: str, text: str) -> list[str]:
    """The mentions of code in ``text`` that name nothing in this tree."""
    stale = []
    for n, line in enumerate(text.splitlines(), 1):
        for path in PATH.findall(line):
            if not (ROOT / path).exists() and not (ROOT / f"{path}.py").exists():
                stale.append(f"{doc}:{n}: {path}")
        for dotted in DOTTED.findall(line):
            parts = dotted.split(".")
            # a module, or a module's attribute (the last part) defined in it
            module = ROOT.joinpath(*parts)
            if module.with_suffix(".py").is_file() or (module / "__init__.py").is_file():
                continue
            owner = ROOT.joinpath(*parts[:-1])
            source = owner.with_suffix(".py") if owner.with_suffix(".py").is_file() else owner / "__init__.py"
            if not (source.is_file() and re.search(rf"^\s*(?:def |class |async def )?{parts[-1]}\b", source.read_text(),
                                                   re.MULTILINE)):
                stale.append(f"{doc}:{n}: {dotted}")
        for name, path in NAME_IN.findall(line):
            source = ROOT / path
            if not (source.is_file() and re.search(rf"^\s*(?:def |class |async def )?{name}\b", source.read_text(),
                                                   re.MULTILINE)):
                stale.append(f"{doc}:{n}: {name} in {path}")
    return stale


@pytest.mark.parametrize("doc", DOCS)
def test_docs_name_modules_where_they_are(doc):
    text = (ROOT / doc).read_text()
    assert not stale_mentions(doc, text)
    assert "no Dagster imports" not in text, f"{doc}: the package has modules that import Dagster"


def test_stale_mentions_are_found():
    text = ("`argus_dagster/sqlite_sync.py`, argus_dagster.runner.evaluation_storage, "
            "`manifest_ids` in `argus_dagster/infra/bench.py`; `LOCAL` in `argus_dagster/infra/storage.py`, "
            "argus_dagster.infra.settings.served_settings, argus_dagster/method/, benchmarks/scale.py")
    assert stale_mentions("x", text) == [
        "x:1: argus_dagster/sqlite_sync.py", "x:1: argus_dagster/infra/bench.py",
        "x:1: argus_dagster.runner.evaluation_storage", "x:1: manifest_ids in argus_dagster/infra/bench.py"]


def test_every_module_over_500_lines_is_listed_with_why():
    text = (ROOT / "docs" / "architecture.md").read_text()
    listed_section = dict(sections(text)).get("Modules over 500 lines")
    assert listed_section is not None, "docs/architecture.md has its section 'Modules over 500 lines'"
    listed = dict(re.findall(r"^- `([\w/]+\.py)` \([\d,]+ lines\): (\S.*)", listed_section, re.MULTILINE))
    over = {str(p.relative_to(ROOT)) for package in ("argus_dagster", "assets", "resources")
            for p in (ROOT / package).rglob("*.py")
            if "__pycache__" not in p.parts and len(p.read_text().splitlines()) > 500}
    assert over <= set(listed), f"over 500 lines and not listed with why: {sorted(over - set(listed))}"
    assert set(listed) <= over, f"listed but 500 lines or fewer (or gone): {sorted(set(listed) - over)}"


def _module_file(module: str) -> Path | None:
    path = ROOT.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _top_level_names(source: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.If, ast.Try)):
            names |= {n.name for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            names |= {(a.asname or a.name).split(".")[0] for n in ast.walk(node)
                      if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}
    return names


def unresolved_imports(source: Path) -> list[str]:
    """The project imports of ``source`` (a benchmark) that name no module or definition of this tree."""
    out = []
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names
                    if a.name.split(".")[0] in ("argus_dagster", "assets", "resources") and not _module_file(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.split(".")[0] in ("argus_dagster", "assets", "resources", "benchmarks", "tests"):
            source = _module_file(node.module)
            if source is None:
                out.append(node.module)
                continue
            defined = _top_level_names(source)
            out += [f"{node.module}.{a.name}" for a in node.names
                    if a.name != "*" and a.name not in defined and not _module_file(f"{node.module}.{a.name}")]
    return out


@pytest.mark.parametrize("page", DOCS)
def test_the_benchmarks_the_docs_name_exist_and_import_what_exists(page):
    text = (ROOT / page).read_text()
    for module in sorted(set(re.findall(r"\b(benchmarks\.\w+)", text))):
        source = _module_file(module)
        assert source is not None, f"{page} names {module}, which is not in this tree"
        assert not unresolved_imports(source), f"{page} names {module}, whose imports moved"


def test_unresolved_imports_are_found(tmp_path):
    bench = tmp_path / "probe.py"
    bench.write_text("from argus_dagster.runner import evaluate\nfrom argus_dagster.infra.settings import Settings, "
                     "no_such_name\nimport argus_dagster.sqlite_sync\n")
    assert unresolved_imports(bench) == [
        "argus_dagster.runner", "argus_dagster.infra.settings.no_such_name", "argus_dagster.sqlite_sync"]
