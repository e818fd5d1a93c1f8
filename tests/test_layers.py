"""The layers, enforced (docs/architecture.md): kb outside its CLI imports none of agents, ci,
pipeline; ci imports no agents or pipeline; agents imports no pipeline; the canonical modules
never import the retrieval package; and no two modules import each other, directly or round a
longer cycle. Every import counts, including those inside functions and TYPE_CHECKING blocks;
relative imports are resolved first. No file is exempt by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import test_pipeline_floors as floors

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("kb", "agents", "ci", "pipeline")
FORBIDDEN = {"kb": {"agents", "ci", "pipeline"}, "ci": {"agents", "pipeline"}, "agents": {"pipeline"}, "pipeline": set()}
CANONICAL = ("kb.page", "kb.markdown", "kb.evidence", "kb.intake", "kb.repo", "kb.config", "kb.scopes", "kb.ids", "kb.errors", "kb.clock")


def module_name(path: Path) -> str:
    return floors.module_name(path, ROOT)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def imports_of(path: Path, modules: dict[str, Path]) -> set[str]:
    """Project modules that ``path`` imports (``from a import b`` counts a.b when b is a module):
    the import reader of the floors test, kept to the packages of ``modules``."""
    here = module_name(path)
    return {name for name in floors.imported(path, ROOT) if name in modules and name != here}


def graph() -> dict[str, set[str]]:
    modules = all_modules()
    return {name: imports_of(path, modules) for name, path in modules.items()}


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_point_one_way(package: str) -> None:
    bad = []
    for name, targets in sorted(graph().items()):
        if name.split(".")[0] != package or name == "kb.cli" or name.startswith("kb.cli."):
            continue
        wrong = sorted(t for t in targets if t.split(".")[0] in FORBIDDEN[package])
        if wrong:
            bad.append(f"{name} imports {wrong}")
    assert bad == []


def test_canonical_modules_never_import_the_retrieval_package() -> None:
    edges = graph()
    bad = [
        f"{m} imports {sorted(t for t in edges[m] if t.startswith('kb.retrieval'))}"
        for m in CANONICAL
        if any(t.startswith("kb.retrieval") for t in edges[m])
    ]
    assert bad == []


def test_no_import_cycles() -> None:
    edges = graph()
    # A package's __init__ is imported along with each of its modules; it may not import back.
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                cycles.append(stack[stack.index(target) :] + [target])
            elif target not in state:
                visit(target, [*stack, target])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    assert cycles == []


def test_the_layer_check_sees_what_it_must() -> None:
    """The checker itself: a relative import and a function-level import are both seen."""
    modules = all_modules()
    assert "kb.errors" in imports_of(ROOT / "kb" / "config.py", modules)
    assert "pipeline.loop" in imports_of(ROOT / "kb" / "cli" / "loop.py", modules)
