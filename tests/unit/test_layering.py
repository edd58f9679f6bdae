"""The layering the design states: the domain library (``argus_dagster``) imports neither ``assets``
nor ``resources``, except ``argus_dagster/definitions.py``, the one place that wires them and the one
the command line reaches them through."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imported(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module.split(".")[0])
    return out


def test_the_domain_library_reaches_assets_and_resources_only_through_definitions():
    offenders = {str(p.relative_to(ROOT)): sorted(_imported(p) & {"assets", "resources"})
                 for p in (ROOT / "argus_dagster").rglob("*.py") if p.name != "definitions.py"}
    assert {p: names for p, names in offenders.items() if names} == {}


def test_the_example_break_is_caught(tmp_path):
    """The check reads imports inside functions too (where the command line's lazy imports live)."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from assets.sources import report\n    import resources.bench\n")
    assert _imported(module) == {"assets", "resources"}


def _graph(package: Path) -> dict[str, set[str]]:
    """Which module of ``package`` imports which other, at module level or inside functions alike."""
    names = {}
    for p in package.rglob("*.py"):
        parts = p.relative_to(package.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    graph = {m: set() for m in names}
    for m, p in names.items():
        pkg = m if p.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom):
                base = pkg.split(".")[:len(pkg.split(".")) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                targets = [target] + [f"{target}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[m] |= {t for t in targets if t in names and t != m}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_domain_library_has_no_import_cycles():
    """Imports inside functions count: a cycle hidden in a function is still a cycle."""
    assert _cycles(_graph(ROOT / "argus_dagster")) == []


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import x\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n")
    (pkg / "c.py").write_text("from .a import y\n")
    assert _cycles(_graph(pkg)) == [["pkg.a", "pkg.b"]]
