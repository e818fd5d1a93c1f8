"""Two limits on every product module (docs/architecture.md, "Module size"): at most 700 lines,
and no import of another module's private (``_name``) attribute. No file is exempt."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.test_layers import PACKAGES, ROOT, all_modules, module_name

MAX_LINES = 700


def private_imports(path: Path, modules: set[str]) -> list[str]:
    """``module:name`` for each ``from module import _name`` of a project module in ``path``."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            base = ".".join([*anchor, base] if base else anchor)
        if base.split(".")[0] not in PACKAGES or base not in modules or base == here:
            continue
        found += [f"{base}:{alias.name}" for alias in node.names if alias.name.startswith("_") and not alias.name.startswith("__")]
    return found


def test_no_module_over_the_line_limit() -> None:
    long = []
    for name, path in sorted(all_modules().items()):
        count = len(path.read_text(encoding="utf-8").splitlines())
        if count > MAX_LINES:
            long.append(f"{name}: {count} lines")
    assert long == [], f"split these modules (at most {MAX_LINES} lines each):\n" + "\n".join(long)


def test_no_private_import_across_modules() -> None:
    modules = set(all_modules())
    bad = [f"{name} imports {what}" for name, path in sorted(all_modules().items()) for what in private_imports(path, modules)]
    assert bad == [], "make these public, or keep them in one module:\n" + "\n".join(bad)


def test_the_private_import_scan_finds_a_planted_one(tmp_path: Path) -> None:
    planted = ROOT / "kb" / "_planted_probe.py"
    try:
        planted.write_text("from kb.ids import _hidden, evidence_id\nfrom kb import __version__\n", encoding="utf-8")
        assert private_imports(planted, set(all_modules())) == ["kb.ids:_hidden"]
    finally:
        planted.unlink()
    assert tmp_path.exists()
