"""Dependencies point one way: agents and ci build on kb; pipeline builds on all three; ci never
imports agents; kb imports none of them except its CLI modules (the composition root)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {"kb": {"agents", "ci", "pipeline"}, "ci": {"agents", "pipeline"}, "agents": {"ci", "pipeline"}, "pipeline": set()}


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_point_one_way(package: str) -> None:
    bad = []
    for path in sorted((ROOT / package).rglob("*.py")):
        if package == "kb" and path.name.startswith("cli"):
            continue
        wrong = imports_of(path) & FORBIDDEN[package]
        if wrong:
            bad.append(f"{path.relative_to(ROOT)} imports {sorted(wrong)}")
    assert bad == []
