"""Every error a person can meet has the `hint:` line the README promises (issue 12 item 12):
each raise of a ``KbError`` class in kb/, ci/ and pipeline/ passes a hint, or its class has a
default one. Agent-facing refusals (the work branch's confinement, the read tools, the model
Proposer) answer a model's tool call, not a person, and are left out."""

from __future__ import annotations

import ast
from pathlib import Path

import kb.errors

ROOT = Path(__file__).resolve().parents[1]
AGENT_FACING = {"pipeline/workspace.py"}


def _without_hint() -> list[str]:
    classes = {name: cls for name, cls in vars(kb.errors).items() if isinstance(cls, type) and issubclass(cls, kb.errors.KbError)}
    missing = []
    for package in ("kb", "ci", "pipeline"):
        for file in sorted((ROOT / package).rglob("*.py")):
            rel = file.relative_to(ROOT).as_posix()
            if rel in AGENT_FACING:
                continue
            for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
                call = node.exc if isinstance(node, ast.Raise) else None
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in classes):
                    continue
                hinted = len(call.args) >= 2 or any(k.arg in ("hint", None) for k in call.keywords)
                if not hinted and not classes[call.func.id].default_hint:
                    missing.append(f"{rel}:{node.lineno}: {call.func.id}")
    return missing


def test_every_error_a_person_sees_has_a_hint() -> None:
    assert _without_hint() == []
