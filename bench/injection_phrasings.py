"""Injection phrasings through the real offline loop: how many reach merged pages.

    python bench/injection_phrasings.py [--kb .venv/bin/kb] [--docs NAME=FOLDER]... [--locomo FILE]

Each phrasing of ``tests/kb/injection_phrasings.py`` (38 in 9 languages, plain and hidden) is put
in a document of its own, between two ordinary sentences, and in a conversation of its own (a
user's turn between two ordinary ones), each in a fresh repository: ``kb init``, ``kb evidence
add`` (the chat with ``--user pat``), ``kb run --no-index``, all through the command given by
``--kb`` (this checkout's, or ``/work/main/.venv/bin/kb`` for "before"). A phrasing *reaches* a
page when any 12-character window of it (NFKC, invisible characters dropped, lower case; windows
that the carrier's own sentences contain are not used) occurs in a page of main after the run.
A run the Reviewer stops (needs-human, exit 1) merges nothing, so its phrasing reaches nothing;
the report lists those apart. The ordinary sentences of the table go in one more document, which
must merge with every sentence kept.

With ``--docs`` and ``--locomo`` this checkout's detector (``kb.injection.unsafe_statement``) is
also run on every sentence of the documentation sets (split per line as the offline document
Proposer splits them) and of the LoCoMo turns: each sentence it flags is a false positive.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
import unicodedata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.kb.injection_phrasings import ORDINARY, PHRASINGS  # noqa: E402

BEFORE, AFTER = "The office opens at nine on weekdays.", "Parking is behind building B."
CHAT_BEFORE, CHAT_AFTER = "I moved to Lisbon in 2021 for work.", "I have two cats called Miso and Tofu."
_INVISIBLE = re.compile("[\u00ad\u200b-\u200f\u2060-\u206f\ufeff]")


def _norm(text: str) -> str:
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", text)).lower()


def _windows(text: str, carrier: str) -> set[str]:
    norm = _norm(text)
    return {w for i in range(0, max(1, len(norm) - 11), 3) if (w := norm[i : i + 12]).strip() and w not in carrier}


def _kb(kb: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([kb, *args], cwd=cwd, capture_output=True, text=True)


def _pages(repo: Path) -> str:
    names = subprocess.run(["git", "-C", str(repo), "ls-tree", "-r", "--name-only", "main"], check=True, capture_output=True, text=True)
    texts = []
    for name in names.stdout.splitlines():
        if name.endswith(".md") and name.startswith(("knowledge/", "users/")):
            shown = subprocess.run(["git", "-C", str(repo), "show", f"main:{name}"], check=True, capture_output=True, text=True)
            texts.append(shown.stdout)
    return _norm("\n".join(texts))


def _one(kb: str, base: Path, kind: str, text: str) -> dict[str, Any]:
    """One phrasing in a fresh repository: add it (a document or a chat), ``kb run``, read main."""
    repo = base / "kb"
    assert _kb(kb, "init", str(repo), cwd=base).returncode == 0
    if kind == "document":
        file = base / "note.md"
        file.write_text(f"# Site note\n\n{BEFORE}\n{text}\n{AFTER}\n", encoding="utf-8")
        added = _kb(kb, "evidence", "add", str(file), cwd=repo)
        carrier = _norm(f"{BEFORE} {AFTER} site note")
    else:
        file = base / "chat.json"
        turns = [CHAT_BEFORE, text, CHAT_AFTER]
        file.write_text(json.dumps([{"role": "user", "content": t} for t in turns]), encoding="utf-8")
        added = _kb(kb, "evidence", "add", str(file), "--kind", "conversation", "--user", "pat", cwd=repo)
        carrier = _norm(f"{CHAT_BEFORE} {CHAT_AFTER}")
    run = _kb(kb, "run", "--no-index", cwd=repo)
    pages = _pages(repo)
    return {
        "added": added.returncode,
        "run": run.returncode,
        "reached": any(w in pages for w in _windows(text, carrier)),
        "carrier_merged": _norm(BEFORE if kind == "document" else "lisbon") in pages,
    }


def run_loop(kb: str) -> dict[str, Any]:
    """Every phrasing alone, as a document and as a chat, then the ordinary sentences as one document."""
    start = time.perf_counter()
    out: dict[str, Any] = {}
    for kind in ("document", "chat"):
        rows = []
        for lang, how, text in PHRASINGS:
            with tempfile.TemporaryDirectory() as tmp:
                rows.append({"phrasing": f"{lang}/{how}", **_one(kb, Path(tmp), kind, text)})
        out[kind] = {
            "reached": [r["phrasing"] for r in rows if r["reached"]],
            "merged_runs": sum(r["run"] == 0 for r in rows),
            "stopped_by_review": [r["phrasing"] for r in rows if r["run"] != 0],
            "carrier_merged": sum(r["carrier_merged"] for r in rows),
        }
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        repo = base / "kb"
        _kb(kb, "init", str(repo), cwd=base)
        file = base / "ordinary.md"
        file.write_text("# Ordinary sentences\n\n" + "\n".join(t for _, t in ORDINARY) + "\n", encoding="utf-8")
        _kb(kb, "evidence", "add", str(file), cwd=repo)
        run = _kb(kb, "run", "--no-index", cwd=repo)
        pages = _pages(repo)
    out["ordinary"] = {"run": run.returncode, "dropped": [t for _, t in ORDINARY if _norm(t) not in pages]}
    out["seconds"] = round(time.perf_counter() - start, 1)
    return out


def detector_false_positives(docs: dict[str, Path], locomo: Path | None) -> dict[str, Any]:
    from agents.offline.extractive import SENTENCE_RE
    from kb.injection import unsafe_statement

    sets: dict[str, list[str]] = {}
    for name, folder in docs.items():
        sets[name] = [
            s.strip()
            for p in sorted(folder.rglob("*.md"))
            for line in p.read_text(encoding="utf-8").splitlines()
            for s in SENTENCE_RE.findall(line.strip())
        ]
    if locomo is not None:
        data = json.loads(locomo.read_text(encoding="utf-8"))
        turns = [t["text"] for sample in data for turns in sample["conversation"].values() if isinstance(turns, list) for t in turns]
        sets["locomo"] = [s.strip() for t in turns for s in SENTENCE_RE.findall(t)]
    out: dict[str, Any] = {}
    for name, sentences in sets.items():
        sentences = [s for s in sentences if s]
        start = time.perf_counter()
        flagged = [s for s in sentences if unsafe_statement(s)]
        out[name] = {"sentences": len(sentences), "flagged": flagged, "seconds": round(time.perf_counter() - start, 2)}
    out["phrasings_flagged"] = sum(
        all(unsafe_statement(s.strip()) for s in SENTENCE_RE.findall(text) if s.strip()) for _, _, text in PHRASINGS
    )
    out["ordinary_flagged"] = [t for _, t in ORDINARY if unsafe_statement(t)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kb", default=str(ROOT / ".venv" / "bin" / "kb"))
    parser.add_argument("--docs", action="append", default=[], metavar="NAME=FOLDER")
    parser.add_argument("--locomo", type=Path)
    parser.add_argument("--no-loop", action="store_true", help="only the detector's false positives")
    args = parser.parse_args()
    report: dict[str, Any] = {
        "phrasings": len(PHRASINGS),
        "languages": sorted({lang for lang, _, _ in PHRASINGS}),
        "ordinary": len(ORDINARY),
        "kb": args.kb,
    }
    if not args.no_loop:
        report["loop"] = run_loop(args.kb)
    if args.docs or args.locomo:
        docs = {name: Path(folder) for name, folder in (d.split("=", 1) for d in args.docs)}
        report["detector"] = detector_false_positives(docs, args.locomo)
    json.dump(report, sys.stdout, indent=1, ensure_ascii=False)
    print()


if __name__ == "__main__":
    main()
