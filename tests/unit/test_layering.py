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
