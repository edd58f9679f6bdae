"""The package's folder rules (docs/architecture.md, "Which folder may import which"), read from the
source: every import counts, at module level or inside a function body alike.

- ``method``, ``protocols``, ``vlm`` and ``infra`` import neither ``outputs`` nor ``client`` nor Dagster;
  ``infra`` imports only ``infra``, ``vlm`` only ``vlm`` and ``infra``, ``method`` only ``method``, ``vlm``
  and ``infra``, ``protocols`` those and itself; ``outputs`` anything of the library but ``client``;
- ``records`` (what the assets and the command line read of Dagster's records) imports what ``outputs``
  may, and Dagster; ``client``, ``definitions``, ``assets`` and ``resources`` may import it;
- only ``argus_dagster/definitions.py``, ``argus_dagster/location.py`` (the served code location:
  the wiring and the command line's ``evaluate`` job), ``client/``, ``records/`` and the top-level
  ``assets/`` and ``resources/`` folders import Dagster;
- the top-level ``assets/`` and ``resources/`` folders import as ``argus_dagster.assets`` and
  ``argus_dagster.resources`` (the package's links to them; the wheel holds them there): no module imports
  a top-level ``assets`` or ``resources``, names a user's own folders may hold;
- ``client/`` reaches ``assets`` and ``resources`` only through ``argus_dagster/definitions.py``;
  nothing of the library (nor ``assets``, ``resources``) imports ``client``;
- no import cycles between modules;
- fewer than 40 imports inside function bodies, each with its reason (``# deferred: ...``);
- every module over 500 lines is one listed in docs/architecture.md with why.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("argus_dagster", "assets", "resources")
# The name each folder of PACKAGES imports under.
IMPORTED_AS = {"argus_dagster": "argus_dagster", "assets": "argus_dagster.assets", "resources": "argus_dagster.resources"}
NOT_OURS = ("assets", "resources")  # top-level names the project does not own
DAGSTER = ("dagster", "dagster_aws", "dagster_celery", "dagster_postgres", "dagster_k8s", "dagster_webserver",
           "dagster_shared", "dagster_graphql")
LIBRARY = ("method", "protocols", "vlm", "outputs", "infra", "records", "client")
# What each folder may import of the project (its own folder always).
MAY_IMPORT = {
    "infra": set(),
    "vlm": {"infra"},
    "method": {"vlm", "infra"},
    "protocols": {"method", "vlm", "infra"},
    "outputs": {"protocols", "method", "vlm", "infra"},
    "records": {"outputs", "protocols", "method", "vlm", "infra"},
    "client": {"definitions", "records", "outputs", "protocols", "method", "vlm", "infra"},
    "definitions": {"assets", "resources", "records", "outputs", "protocols", "method", "vlm", "infra"},
    "location": {"definitions", "client", "infra"},
    "assets": {"resources", "records", "outputs", "protocols", "method", "vlm", "infra"},
    "resources": {"records", "outputs", "protocols", "method", "vlm", "infra"},
}
MAY_IMPORT_DAGSTER = {"client", "definitions", "location", "assets", "resources", "records"}
MOST_DEFERRED = 40


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # a module of the project, or a third-party top-level name
    line: int
    deferred: bool  # inside a function body
    reason: str  # the `# deferred: ...` comment on its line(s), if any


def modules(root: Path, packages=PACKAGES) -> dict[str, Path]:
    out = {}
    for package in packages:
        # rglob does not follow links: argus_dagster/assets (a link to assets/) is read once, as assets/.
        for p in (root / package).rglob("*.py"):
            if "__pycache__" in p.parts:
                continue
            parts = (IMPORTED_AS[package], *p.relative_to(root / package).with_suffix("").parts)
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def imports(root: Path, packages=PACKAGES) -> list[Import]:
    names = modules(root, packages)
    out = []
    for m, p in names.items():
        source = p.read_text()
        lines = source.splitlines()
        pkg = m if p.name == "__init__.py" else m.rpartition(".")[0]

        def walk(node, in_function: bool, m=m, pkg=pkg, lines=lines) -> None:
            for child in ast.iter_child_nodes(node):
                inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                if isinstance(child, ast.ImportFrom):
                    if child.level:
                        base = pkg.split(".")[:len(pkg.split(".")) - child.level + 1]
                        target = ".".join(base + ([child.module] if child.module else []))
                    else:
                        target = child.module or ""
                    # `from package import module` imports the module.
                    targets = [f"{target}.{a.name}" if f"{target}.{a.name}" in names else target for a in child.names]
                elif isinstance(child, ast.Import):
                    targets = [a.name for a in child.names]
                else:
                    walk(child, inner)
                    continue
                text = " ".join(lines[child.lineno - 1:child.end_lineno])
                reason = text.partition("# deferred:")[2].strip()
                for t in dict.fromkeys(targets):
                    out.append(Import(m, t, child.lineno, in_function, reason))

        walk(ast.parse(source), False)
    return out


def folder(module: str) -> str:
    """The folder a module belongs to: a library folder, ``definitions``, ``assets``, ``resources``
    (``argus_dagster`` itself: ``root``)."""
    parts = module.split(".")
    if parts[0] != "argus_dagster":
        return parts[0]
    if len(parts) == 1:
        return "root"
    return parts[1] if parts[1] in LIBRARY or parts[1] in ("definitions", "location", "assets", "resources") else "root"


def project_target(target: str, names: dict[str, Path]) -> str | None:
    """The project module an import names (``a.b.c`` of ``from a.b import c`` when c is a name in a.b)."""
    while target and target not in names:
        target = target.rpartition(".")[0]
    return target or None


def rule_breaks(root: Path, packages=PACKAGES) -> list[str]:
    names = modules(root, packages)
    out = []
    for i in imports(root, packages):
        src = folder(i.module)
        if i.target.split(".")[0] in NOT_OURS:
            out.append(f"{i.module}:{i.line} imports the top-level name {i.target} (import argus_dagster.{i.target})")
            continue
        if i.target.split(".")[0] in DAGSTER:
            if src not in MAY_IMPORT_DAGSTER:
                out.append(f"{i.module}:{i.line} imports Dagster ({i.target})")
            continue
        t = project_target(i.target, names)
        if t is None:
            continue
        dst = folder(t)
        if dst in (src, "root") or src == "root":
            continue
        if dst not in MAY_IMPORT.get(src, set()):
            out.append(f"{i.module}:{i.line} ({src}) imports {t} ({dst})")
    return sorted(out)


def graph(root: Path, packages=PACKAGES) -> dict[str, set[str]]:
    names = modules(root, packages)
    g = {m: set() for m in names}
    for i in imports(root, packages):
        t = project_target(i.target, names)
        if t and t != i.module:
            g[i.module].add(t)
    return g


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    for start in sorted(g):
        if start in index:
            continue
        work = [(start, iter(sorted(g[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def deferred(root: Path, packages=PACKAGES) -> list[Import]:
    return [i for i in imports(root, packages) if i.deferred]


# -- the project --

def test_each_folder_imports_only_what_its_rules_allow():
    assert rule_breaks(ROOT) == []


def test_no_import_cycles_counting_imports_inside_functions():
    assert cycles(graph(ROOT)) == []


def test_few_imports_inside_functions_each_with_its_reason():
    inner = deferred(ROOT)
    # One import statement may name several modules: count statements.
    statements = {(i.module, i.line) for i in inner}
    assert len(statements) < MOST_DEFERRED, sorted(statements)
    assert sorted({f"{i.module}:{i.line}" for i in inner if not i.reason}) == []


def test_every_module_over_500_lines_is_listed_with_its_reason():
    """docs/architecture.md, "Modules over 500 lines": each such module is named there, and each named
    one is still that long (a module split or shortened leaves the list)."""
    doc = (ROOT / "docs" / "architecture.md").read_text().partition("### Modules over 500 lines")[2]
    doc = doc.partition("\n#")[0]
    listed = set(re.findall(r"^- `([^`]+\.py)`", doc, flags=re.M))
    long = {p.relative_to(ROOT).as_posix() for p in modules(ROOT).values()
            if len(p.read_text().splitlines()) > 500}
    assert long == listed


# The asset layer adapts Dagster; loops over videos, partitions and their thread pools and locks are
# the domain's (argus_dagster/method/gather.py: the evidence loop, judging ahead, the judging of a
# partition, the partitions of a range; outputs/report.py: one comparison page at a time). No asset
# module runs a pool or holds a lock of its own.
POOLS_IN_ASSETS: set[str] = set()


def pools(root: Path) -> set[str]:
    """The modules of the asset and resource folders that import a thread pool or a lock (``threading``,
    ``concurrent.futures``, the VLM queue's ``request_pool``)."""
    out = set()
    for m, p in modules(root, ("assets", "resources")).items():
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Import) and any(a.name in ("threading", "concurrent.futures") for a in node.names):
                out.add(m)
            elif isinstance(node, ast.ImportFrom) and (node.module in ("threading", "concurrent.futures")
                                                       or any(a.name == "request_pool" for a in node.names)):
                out.add(m)
    return out


def test_the_asset_layer_runs_no_pool_of_its_own_but_those_listed():
    assert {m for m in pools(ROOT) if folder(m) == "assets"} == POOLS_IN_ASSETS


def test_a_pool_in_an_asset_module_is_found(tmp_path):
    root = _tree(tmp_path, {"assets/evidence.py": "def f():\n    from concurrent.futures import ThreadPoolExecutor\n",
                            "assets/judging.py": "from argus_dagster.vlm.priorities import request_pool\n",
                            "assets/plain.py": "import dagster as dg\n"})
    assert pools(root) == {"argus_dagster.assets.evidence", "argus_dagster.assets.judging"}


PROTOCOL_NAMES = ("firm", "vefx")  # the protocols' names: infra/ says none of them


def protocols_named(root: Path) -> list[str]:
    """``module:line`` of every line of ``infra/`` that names a protocol (a record, a schema, a cache
    namespace): a protocol keeps its identities and tables in its own folder and registers them."""
    out = []
    for p in sorted((root / "argus_dagster" / "infra").rglob("*.py")):
        for n, line in enumerate(p.read_text().splitlines(), 1):
            if re.search(r"\b(" + "|".join(PROTOCOL_NAMES) + ")", line.lower()):  # not "confirm"
                out.append(f"{p.relative_to(root).as_posix()}:{n}")
    return out


def test_infra_names_no_protocol():
    assert protocols_named(ROOT) == []


def test_a_protocol_named_in_infra_is_found(tmp_path):
    root = _tree(tmp_path, {"argus_dagster/infra/identities.py": "class A:\n    pass\n\n\nclass VefxThing:\n    pass\n",
                            "argus_dagster/infra/cache.py": '"""namespaces: the FIRM calls"""\nconfirmed = 1\n'})
    assert protocols_named(root) == ["argus_dagster/infra/cache.py:1", "argus_dagster/infra/identities.py:5"]


def test_every_folder_of_the_layout_exists():
    for name in LIBRARY:
        assert (ROOT / "argus_dagster" / name / "__init__.py").is_file(), name
    assert (ROOT / "argus_dagster" / "definitions.py").is_file()


# -- the checks themselves catch what they claim --

def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    for package in PACKAGES:
        (tmp_path / package).mkdir(exist_ok=True)
        (tmp_path / package / "__init__.py").touch()
    return tmp_path


def test_a_layer_break_inside_a_function_is_found(tmp_path):
    root = _tree(tmp_path, {
        "argus_dagster/infra/__init__.py": "", "argus_dagster/outputs/__init__.py": "",
        "argus_dagster/client/__init__.py": "", "argus_dagster/method/__init__.py": "",
        "argus_dagster/outputs/page.py": "X = 1\n",
        "argus_dagster/infra/files.py": "def f():\n    from argus_dagster.outputs.page import X\n",
        "argus_dagster/method/judge.py": "import dagster as dg\n",
        "argus_dagster/client/run.py": "from argus_dagster.assets.inputs import a\n",
        "assets/inputs.py": "from argus_dagster.client import run\n",
        "resources/tools.py": "from assets.inputs import a\n",
    })
    assert rule_breaks(root) == [
        "argus_dagster.assets.inputs:1 (assets) imports argus_dagster.client.run (client)",
        "argus_dagster.client.run:1 (client) imports argus_dagster.assets.inputs (assets)",
        "argus_dagster.infra.files:2 (infra) imports argus_dagster.outputs.page (outputs)",
        "argus_dagster.method.judge:1 imports Dagster (dagster)",
        "argus_dagster.resources.tools:1 imports the top-level name assets.inputs (import argus_dagster.assets.inputs)",
    ]


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    root = _tree(tmp_path, {
        "argus_dagster/infra/__init__.py": "",
        "argus_dagster/infra/a.py": "from argus_dagster.infra.b import x\n",
        "argus_dagster/infra/b.py": "def f():\n    from argus_dagster.infra import a\n",
        "argus_dagster/infra/c.py": "from .a import y\n",
    })
    assert cycles(graph(root)) == [["argus_dagster.infra.a", "argus_dagster.infra.b"]]


def test_an_import_inside_a_function_without_its_reason_is_found(tmp_path):
    root = _tree(tmp_path, {
        "argus_dagster/infra/__init__.py": "",
        "argus_dagster/infra/a.py": ("def f():\n    import torch  # deferred: optional dependency\n"
                                     "def g():\n    import json\n"),
    })
    inner = deferred(root)
    assert [(i.target, i.line, i.reason) for i in inner] == [("torch", 2, "optional dependency"), ("json", 4, "")]
