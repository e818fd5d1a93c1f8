"""The two floors of ``pipeline/`` (docs/architecture.md), enforced: *steps* (one stage of a change:
propose, review, merge, approval, records, workspace, roles and what they share) never import
*flows* (jobs that chain steps: the loop, memory ingest, retention, consolidation, evaluation) or
the forge layer. Every module of ``pipeline/`` sits on exactly one floor, so a new module is placed
on purpose. Every import counts, including those inside functions and ``TYPE_CHECKING`` blocks;
relative imports are resolved first."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = frozenset(
    {
        "propose",
        "review",
        "merge",
        "approval",
        "records",
        "workspace",
        "roles",
        "backend",  # the Proposer's confined write backend on a work branch
        "runs",  # run folders and transcripts of a step
        "forget",  # rewriting history without forgotten items; retention (a flow) calls it
    }
)
FLOWS = frozenset({"loop", "memory", "retention", "consolidate", "forge", "eval", "mcp"})


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str, root: Path) -> bool:
    where = root.joinpath(*name.split("."))
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def imported(path: Path, root: Path) -> set[str]:
    """The modules under ``root`` that ``path`` imports (``from a import b`` gives ``a``, and
    ``a.b`` when ``b`` is a module)."""
    here = module_name(path, root)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {name for name in found if is_module(name, root)}


def floor_of(module: str) -> str | None:
    """``step`` or ``flow`` for a module of ``pipeline`` (by its name under ``pipeline.``)."""
    parts = module.split(".")
    if parts[0] != "pipeline" or len(parts) < 2:
        return None
    return "step" if parts[1] in STEPS else "flow" if parts[1] in FLOWS else None


def floor_violations(root: Path) -> list[str]:
    """What breaks the floors in the ``pipeline`` package under ``root``: unplaced modules, and
    step modules importing a flow."""
    bad = []
    for path in sorted((root / "pipeline").rglob("*.py")):
        name = module_name(path, root)
        if name == "pipeline":
            continue
        floor = floor_of(name)
        if floor is None:
            bad.append(f"{name} is on no floor: add it to STEPS or FLOWS (docs/architecture.md)")
        elif floor == "step":
            bad += [f"{name} (a step) imports {target} (a flow)" for target in sorted(imported(path, root)) if floor_of(target) == "flow"]
    return bad


def test_steps_never_import_flows_or_the_forge() -> None:
    assert floor_violations(ROOT) == []


def test_the_floors_catch_a_planted_import(tmp_path: Path) -> None:
    pipeline = tmp_path / "pipeline"
    (pipeline / "forge").mkdir(parents=True)
    (pipeline / "__init__.py").write_text('"""pipeline."""\n', encoding="utf-8")
    (pipeline / "forge" / "__init__.py").write_text("", encoding="utf-8")
    (pipeline / "forge" / "base.py").write_text("from pipeline.review import review_branch\n", encoding="utf-8")
    (pipeline / "loop.py").write_text("from pipeline.review import review_branch\n", encoding="utf-8")
    (pipeline / "review.py").write_text("def f():\n    from .loop import run_loop\n", encoding="utf-8")  # lazy, relative
    (pipeline / "merge.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pipeline.forge.base\n", encoding="utf-8"
    )
    (pipeline / "helpers.py").write_text("", encoding="utf-8")
    assert floor_violations(tmp_path) == [
        "pipeline.helpers is on no floor: add it to STEPS or FLOWS (docs/architecture.md)",
        "pipeline.merge (a step) imports pipeline.forge.base (a flow)",
        "pipeline.review (a step) imports pipeline.loop (a flow)",
    ]
    # flows importing steps is the direction the floors allow
    assert not any(v.startswith(("pipeline.loop ", "pipeline.forge")) for v in floor_violations(tmp_path))
