"""Credentials refused by the secret gate, before and after, and false positives on real text.

    python bench/secrets_kinds.py --docs httpx=/tmp/httpx-0.28.1/docs \\
        --docs starlette=/tmp/sdists/starlette-1.10.0/docs --docs click=/tmp/sdists/click-8.5.1/docs \\
        --locomo /work/shared/data/locomo/locomo-dev.json [--before main] [--cli]

The kinds are the table of ``tests/kb/secret_kinds.py`` (a realistic but fake credential of each
kind and a harmless near-miss). "Before" is ``kb/secrets.py`` as committed at ``--before`` (read
with ``git show``, loaded on its own: it needs only the standard library); "after" is this
checkout's. A kind is refused when the scanner finds anything in its text (what
``kb evidence add`` refuses on). The documentation sets are every Markdown file under each
folder, scanned whole; LoCoMo is every turn's text. With ``--cli`` the "after" figures are
confirmed through the real command: each kind's text and each near-miss as a file given to
``kb evidence add`` in a fresh repository (exit 5 = refused), then each documentation set as a
folder and each LoCoMo sample as a conversation (exit 0 = stored).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kb.secrets import find_secrets  # noqa: E402
from tests.kb.secret_kinds import KINDS, expand  # noqa: E402

Scanner = Callable[[str], list[Any]]


def _module_at(ref: str) -> ModuleType:
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{ref}:kb/secrets.py"], check=True, capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / "secrets_before.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("secrets_before", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["secrets_before"] = module
    spec.loader.exec_module(module)
    return module


def _cases() -> list[tuple[str, str, str, str]]:
    return [(kind, lang, expand(secret, n), expand(near, n)) for n, (kind, lang, secret, near) in enumerate(KINDS)]


def _locomo_turns(path: Path) -> list[str]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return [t["text"] for sample in data for key, turns in sample["conversation"].items() if isinstance(turns, list) for t in turns]


def _scan_set(scan: Scanner, texts: Iterable[tuple[str, str]]) -> dict[str, Any]:
    start = time.perf_counter()
    findings: list[str] = []
    n = chars = 0
    for name, text in texts:
        n += 1
        chars += len(text)
        findings.extend(f"{name}:{hit.line}: {hit.kind}" for hit in scan(text))
    return {"items": n, "chars": chars, "findings": findings, "seconds": round(time.perf_counter() - start, 2)}


def _kb(kb: Path, *args: str, cwd: Path) -> int:
    return subprocess.run([str(kb), "-q", *args], cwd=cwd, capture_output=True, text=True).returncode


def _cli_check(kb: Path, cases: list[tuple[str, str, str, str]], docs: dict[str, Path], locomo: Path | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        repo = base / "kb"
        subprocess.run([str(kb), "init", str(repo)], check=True, capture_output=True, env=None)
        refused = stored_near = 0
        for n, (_, _, secret, near) in enumerate(cases):
            for text, is_secret in ((secret, True), (near, False)):
                file = base / f"{'s' if is_secret else 'n'}{n:03d}.md"
                file.write_text(f"# Notes\n\n{text}\n", encoding="utf-8")
                code = _kb(kb, "evidence", "add", str(file), cwd=repo)
                refused += is_secret and code == 5
                stored_near += (not is_secret) and code == 0
        sets = {
            name: _kb(kb, "evidence", "add", str(folder), "--glob", "*.md", "--source", name, cwd=repo) for name, folder in docs.items()
        }
        if locomo is not None:
            codes = []
            for sample in json.loads(locomo.read_text(encoding="utf-8")):
                conv = sample["conversation"]
                for key, turns in conv.items():
                    if isinstance(turns, list) and turns:
                        file = base / f"{sample['sample_id']}-{key}.json"
                        file.write_text(json.dumps([{"role": t["speaker"], "content": t["text"]} for t in turns]), encoding="utf-8")
                        codes.append(_kb(kb, "evidence", "add", str(file), "--kind", "conversation", cwd=repo))
            sets["locomo"] = max(codes)
        return {"refused": refused, "near_misses_stored": stored_near, "set_exit_codes": sets}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", action="append", default=[], metavar="NAME=FOLDER")
    parser.add_argument("--locomo", type=Path)
    parser.add_argument("--before", default="main", help="git ref whose kb/secrets.py is 'before'")
    parser.add_argument("--cli", action="store_true", help="confirm the 'after' figures through kb evidence add")
    args = parser.parse_args()
    before = _module_at(args.before).find_secrets
    cases = _cases()
    docs = {name: Path(folder) for name, folder in (d.split("=", 1) for d in args.docs)}
    report: dict[str, Any] = {"kinds": len(cases), "languages": sorted({c[1] for c in cases})}
    for label, scan in (("before", before), ("after", find_secrets)):
        missed = [kind for kind, _, secret, _ in cases if not scan(secret)]
        flagged = [kind for kind, _, _, near in cases if scan(near)]
        report[label] = {"refused": len(cases) - len(missed), "missed": missed, "near_misses_flagged": flagged, "sets": {}}
        for name, folder in docs.items():
            files = sorted(folder.rglob("*.md"))
            report[label]["sets"][name] = _scan_set(scan, ((str(p.relative_to(folder)), p.read_text(encoding="utf-8")) for p in files))
        if args.locomo:
            turns = _locomo_turns(args.locomo)
            report[label]["sets"]["locomo"] = _scan_set(scan, ((f"turn {i}", t) for i, t in enumerate(turns)))
    if args.cli:
        report["after"]["cli"] = _cli_check(ROOT / ".venv" / "bin" / "kb", cases, docs, args.locomo)
    json.dump(report, sys.stdout, indent=1, ensure_ascii=False)
    print()


if __name__ == "__main__":
    main()
