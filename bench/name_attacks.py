"""Names with line-boundary, control, bidi and invisible characters against the evidence log
(issue 23, item 2): how many repositories each version of kb leaves corrupted.

For every character, two attacks, each on a fresh repository: a file named
``meeting<char>notes.md`` inside a folder given to ``kb evidence add FOLDER``, and a file added
with ``--source 'x<char>y.md'``. Then ``kb check``, ``kb evidence list`` (text and ``--json``),
``kb evidence add`` of a clean file and ``kb run --no-index``. A repository is *corrupted* when any
of these fails after the attack was accepted (a refused attack, exit 2 with a hint, corrupts
nothing); *unclean* counts the accepted attacks whose stored source still holds a character that
is not printable or a ledger whose lines split differently at ``\\n`` and at every line boundary.

Each version runs in a worker process that imports kb from the given source tree and calls the
CLI's real entry point in-process (the same as the tests' ``cli`` fixture), so that both versions
measure the same thing at the same cost. Usage, comparing main with this tree::

    rm -rf /tmp/kb-main-src && mkdir /tmp/kb-main-src && git archive main | tar -x -C /tmp/kb-main-src
    .venv/bin/python bench/name_attacks.py --before /tmp/kb-main-src --after .

It prints a Markdown table (and ``--json`` the per-case outcomes).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# C0 but NUL (no file name can hold it) and DEL; C1 (NEL, CSI ...); the line and paragraph
# separators; the bidi controls; invisible format characters (soft hyphen, zero-width space,
# non-joiner, joiner, word joiner, BOM, a tag character).
CHARACTERS = (
    [chr(c) for c in range(0x01, 0x20)]
    + ["\x7f"]
    + [chr(c) for c in range(0x80, 0xA0)]
    + ["\u2028", "\u2029"]
    + list("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
    + list("\u00ad\u200b\u200c\u200d\u2060\ufeff\U000e0041")
)
GROUPS = {
    "line boundaries (LF CR VT FF FS GS RS NEL LS PS)": set("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"),
    "bidi controls": set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"),
    "invisible format characters": set("\u00ad\u200b\u200c\u200d\u2060\ufeff\U000e0041"),
}


def _group(char: str) -> str:
    return next((name for name, chars in GROUPS.items() if char in chars), "other C0/C1 controls and DEL")


def _kb(*args: str) -> tuple[int, str, str]:
    """``kb --quiet *args`` in this process: exit code, stdout, stderr."""
    from kb.cli.app import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(["--quiet", *args])
        except SystemExit as exc:
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def _attack(work: Path, char: str, mode: str) -> dict[str, object]:
    root = work / "repo"
    _kb("init", str(root))
    r = str(root)
    payload = work / "in"
    payload.mkdir()
    if mode == "folder":
        (payload / f"meeting{char}notes.md").write_text("Minutes: the budget review moves to Friday.\n", encoding="utf-8")
        add = _kb("--repo", r, "evidence", "add", str(payload))
    else:
        note = payload / "note.md"
        note.write_text("Minutes: the budget review moves to Friday.\n", encoding="utf-8")
        add = _kb("--repo", r, "evidence", "add", str(note), "--source", f"x{char}y.md")
    outcome: dict[str, object] = {"char": f"U+{ord(char):04X}", "mode": mode, "group": _group(char), "add": add[0]}
    if add[0] != 0:
        outcome.update(corrupted=False, unclean=False, refused=True)
        return outcome
    later = work / "later.md"
    later.write_text("The office closes at six on Fridays.\n", encoding="utf-8")
    steps = {
        "check": _kb("--repo", r, "check")[0],
        "list": _kb("--repo", r, "evidence", "list")[0],
        "list_json": _kb("--repo", r, "evidence", "list", "--json")[0],
        "add_again": _kb("--repo", r, "evidence", "add", str(later))[0],
        "run": _kb("--repo", r, "run", "--no-index")[0],
    }
    ledger = (root / "evidence" / "ledger.jsonl").read_text(encoding="utf-8")
    lines = ledger.split("\n")[:-1]
    sources: list[str] = []
    for line in lines:
        with contextlib.suppress(ValueError):
            sources.append(str(json.loads(line).get("source", "")))
    unclean = ledger.splitlines() != lines or any(not s.isprintable() for s in sources)
    outcome.update(steps, corrupted=any(code != 0 for code in steps.values()), unclean=unclean, refused=False)
    return outcome


def worker(limit: int | None) -> None:
    import kb

    results = []
    started = time.perf_counter()
    for char in CHARACTERS[:limit]:
        for mode in ("folder", "source"):
            with tempfile.TemporaryDirectory(prefix="kb-names-") as tmp:
                results.append(_attack(Path(tmp), char, mode))
    json.dump({"kb": kb.__file__, "seconds": round(time.perf_counter() - started, 1), "cases": results}, sys.stdout)


def _run_version(src: Path, limit: int | None) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="kb-names-home-") as home:
        env = os.environ | {"PYTHONPATH": str(src.resolve()), "KB_SIGNING_KEY": str(Path(home) / "review_ed25519"), "KB_LOCK_WAIT": "5"}
        command = [sys.executable, __file__, "--worker", *(["--limit", str(limit)] if limit else [])]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    data: dict[str, object] = json.loads(done.stdout)
    assert str(data["kb"]).startswith(str(src.resolve())), f"imported {data['kb']}, not the tree {src}"
    return data


def _row(name: str, cases: list[dict[str, object]]) -> str:
    accepted = [c for c in cases if not c["refused"]]
    corrupted = sum(1 for c in accepted if c["corrupted"])
    unclean = sum(1 for c in accepted if c["unclean"])
    return f"| {name} | {len(cases)} | {len(cases) - len(accepted)} | {corrupted} | {unclean} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--before", type=Path, help="source tree of the version before (e.g. main, from git archive)")
    parser.add_argument("--after", type=Path, default=Path("."), help="source tree of the version after")
    parser.add_argument("--json", type=Path, help="also write the per-case outcomes here")
    parser.add_argument("--limit", type=int, help="only the first N characters (a quick try)")
    args = parser.parse_args()
    if args.worker:
        worker(args.limit)
        return
    versions = {"before": args.before, "after": args.after} if args.before else {"after": args.after}
    results = {label: _run_version(src, args.limit) for label, src in versions.items()}
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")
    print(f"{len(CHARACTERS[: args.limit])} characters x 2 attacks (a file name in a folder, --source)\n")
    print("| version / attack | cases | refused | corrupted repositories | unclean ledgers |")
    print("|---|---|---|---|---|")
    for label, data in results.items():
        cases: list[dict[str, object]] = data["cases"]  # type: ignore[assignment]
        print(_row(f"**{label}**, all ({data['seconds']} s)", cases))
        for mode in ("folder", "source"):
            print(_row(f"{label}: {mode}", [c for c in cases if c["mode"] == mode]))
        for group in [*GROUPS, "other C0/C1 controls and DEL"]:
            print(_row(f"{label}: {group}", [c for c in cases if c["group"] == group]))
    for label, data in results.items():
        failing: dict[str, int] = {}
        for case in data["cases"]:  # type: ignore[attr-defined]
            for step in ("check", "list", "list_json", "add_again", "run"):
                if case.get(step, 0) != 0:
                    failing[f"{step} exit {case[step]}"] = failing.get(f"{step} exit {case[step]}", 0) + 1
        print(f"\n{label}: failing steps: {', '.join(f'{k}: {v}' for k, v in sorted(failing.items())) or 'none'}")


if __name__ == "__main__":
    main()
