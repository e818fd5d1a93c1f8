"""The serving layer's modules stay readable: none over 700 lines, and none reaches into another
module's private names (a name that another module needs is public in the module that owns it)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
RETRIEVAL = ROOT / "kb" / "retrieval"
MAX_LINES = 700


def test_no_retrieval_module_is_over_the_line_limit() -> None:
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in sorted(RETRIEVAL.glob("*.py"))}
    assert sizes and {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def private_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("kb", "agents", "ci", "pipeline"):
            found += [f"{node.module}.{alias.name}" for alias in node.names if alias.name.startswith("_")]
    return found


def test_no_private_name_crosses_a_retrieval_module_boundary() -> None:
    product = [p for package in ("kb", "agents", "ci", "pipeline") for p in sorted((ROOT / package).rglob("*.py"))]
    bad = {
        str(p.relative_to(ROOT)): names
        for p in product
        if (names := [n for n in private_imports(p) if n.startswith("kb.retrieval.") or p.parent == RETRIEVAL])
    }
    assert bad == {}


def test_the_check_sees_a_private_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from kb.retrieval.corpus import _date, page_doc\nfrom kb.retrieval import _x\n", encoding="utf-8")
    assert private_imports(probe) == ["kb.retrieval.corpus._date", "kb.retrieval._x"]
