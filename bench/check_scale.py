"""Benchmark `kb check` on a generated repository: N pages, M evidence items.

Usage: python bench/check_scale.py --pages 10000 --evidence 2000 [--dir DIR]
Times the full run and `--changed-only` after a one-page change, through the real CLI
(a fresh process each time, as a user or CI would run it), best of --repeat runs. The full run is
also timed with the pure-Python YAML loader (kb before issue 27), and 1,000 page headers are
loaded both ways in this process.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kb.evidence import add_items
from kb.intake import prepare
from kb.markdown import format_citation
from kb.page import render_page
from kb.scaffold import init_repository
from kb.scopes import user_scope
from kb.yamltext import load_yaml

PURE_YAML = "import kb.yamltext as y; y.C_LOADER = None; from kb.cli.app import main; main()"

WORDS = (
    "alpha beta gamma delta policy travel budget flight hotel meal visa receipt manager approval contract supplier invoice region".split()
)
# Users' evidence has words of its own: with one vocabulary, 8 words in a row of a shared page match
# a user's evidence line by chance (twice at 10,000 pages), and `scope.private-text` rightly fires.
USER_WORDS = "ember harbor lantern meadow orchard pebble quartz saddle thistle willow".split()


def sentence(rng: random.Random, n: int = 12, words: list[str] = WORDS) -> str:
    return " ".join(rng.choice(words) for _ in range(n)).capitalize() + "."


def generate(root: Path, pages: int, evidence: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    repo = init_repository(root)
    users = [f"u{n}" for n in range(10)]
    items = []
    for n in range(evidence):
        user = users[n % 10] if n % 2 else None
        lines = [f"Item {n} line {k}: {sentence(rng, words=USER_WORDS if user else WORDS)}" for k in range(1, 21)]
        items.append(prepare(("\n".join(lines) + "\n").encode(), f"ev{n}.md", "document", user_scope(user)))
    add_items(repo, items)
    system_items = [it for it in items if it.scope == "system"]
    by_user = {u: [it for it in items if it.scope == f"user:{u}"] for u in users}
    folders: dict[str, list[tuple[str, str]]] = {}
    files: dict[str, str] = {}
    per_folder = 100
    for n in range(pages):
        if n % 5 == 4:
            user = users[n % 10]
            folder = f"users/{user}/f{(n // per_folder) % 5}"
            pool, scope = by_user[user] + system_items[:50], f"user:{user}"
        else:
            folder = f"knowledge/area{n // (per_folder * 10)}/f{(n // per_folder) % 10}"
            pool, scope = system_items, "system"
        pid = f"{folder}/page-{n}"
        summary = f"Page {n}: {sentence(rng, 8)}"
        cites = []
        body = [f"# Page {n}", "", "## Overview", "", sentence(rng, 20), "", "## Details", ""]
        for c in range(1, 4):
            item = rng.choice(pool)
            line_no = rng.randint(1, 20)
            quote = item.content.splitlines()[line_no - 1].split(": ", 1)[1][:40]
            body.append(f"{sentence(rng)} {sentence(rng)}[^{c}]")
            body.append("")
            cites.append(format_citation(str(c), item.id, line_no, line_no, quote))
        previous = folders.get(folder, [])[-2:]
        if previous:
            body.append("See also " + ", ".join(f"[[{pid}#details]]" for pid, _ in previous) + ".")
            body.append("")
        body.extend(cites)
        meta = {
            "id": pid,
            "type": "fact",
            "title": f"Page {n}",
            "summary": summary,
            "scope": scope,
            "status": "active",
            "sources": sorted({c.split()[1].split("#")[0] for c in cites}),
        }
        files[pid + ".md"] = render_page(meta, "\n".join(body) + "\n")
        folders.setdefault(folder, []).append((pid, summary))
    files.update(index_pages(folders))
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    repo.commit_worktree_paths(sorted(files), "bench: generated pages\n")


def index_pages(folders: dict[str, list[tuple[str, str]]]) -> dict[str, str]:
    """An index page for every folder and every ancestor up to the scope root."""
    files: dict[str, str] = {}
    all_folders = set(folders)
    for folder in list(folders):
        parts = folder.split("/")
        root_len = 1 if parts[0] == "knowledge" else 2
        for k in range(root_len, len(parts)):
            all_folders.add("/".join(parts[:k]))
    for folder in sorted(all_folders, key=lambda f: -f.count("/")):
        scope = "system" if folder.startswith("knowledge") else f"user:{folder.split('/')[1]}"
        children = list(folders.get(folder, []))
        for sub in all_folders:
            if sub.rsplit("/", 1)[0] == folder and sub != folder:
                children.append((f"{sub}/index", f"Folder {sub}."))
        listing = "".join(f"- [[{cid}]]: {l0}\n" for cid, l0 in sorted(children))
        summary = "Entry page of the shared knowledge." if folder == "knowledge" else f"Folder {folder}."
        meta = {"id": f"{folder}/index", "type": "index", "title": folder, "summary": summary, "scope": scope, "status": "active"}
        files[f"{folder}/index.md"] = render_page(meta, f"# {folder}\n\n## Overview\n\n{summary}\n\n## Pages\n\n{listing}")
    return files


def timed(cmd: list[str], cwd: Path, repeat: int) -> tuple[float, str, int]:
    best = float("inf")
    out, code = "", 0
    for _ in range(repeat):
        start = time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        best = min(best, time.perf_counter() - start)
        out, code = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr.strip(), proc.returncode
    return best, out, code


def yaml_headers(root: Path, count: int, repeat: int) -> dict[str, object]:
    """Seconds to load ``count`` page headers with libyaml and with the pure loader, best of ``repeat``."""
    import kb.yamltext as yamltext

    headers = [p.read_text(encoding="utf-8").split("---\n")[1] for p in sorted(root.rglob("page-*.md"))[:count]]
    c_loader = yamltext.C_LOADER
    seconds: dict[str, float] = {}
    values: dict[str, list[object]] = {}
    for name, loader in (("libyaml", c_loader), ("pure", None)):
        yamltext.C_LOADER = loader
        runs = []
        for _ in range(repeat):
            start = time.perf_counter()
            values[name] = [load_yaml(h, 1 << 20) for h in headers]
            runs.append(time.perf_counter() - start)
        seconds[name] = min(runs)
    yamltext.C_LOADER = c_loader
    return {
        "headers": len(headers),
        "libyaml_s": round(seconds["libyaml"], 4),
        "pure_s": round(seconds["pure"], 4),
        "ratio_pure_over_libyaml": round(seconds["pure"] / seconds["libyaml"], 2),
        "identical": values["libyaml"] == values["pure"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pages", type=int, default=10000)
    parser.add_argument("--evidence", type=int, default=2000)
    parser.add_argument("--dir", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    root = (args.dir or Path(tempfile.mkdtemp(prefix="kb-bench-check-"))) / "repo"
    start = time.perf_counter()
    if not (root / "kb.config.yaml").exists():
        generate(root, args.pages, args.evidence)
    gen = time.perf_counter() - start
    kb = [sys.executable, "-m", "kb"]
    full, full_out, full_code = timed(kb + ["check"], root, args.repeat)
    pure, pure_out, _ = timed([sys.executable, "-c", PURE_YAML, "check"], root, args.repeat)
    target = next((root / "knowledge").rglob("page-7.md"))
    target.write_text(target.read_text().replace("## Details", "## Details\n\nOne more sentence."))
    changed, changed_out, changed_code = timed(kb + ["check", "--changed-only"], root, args.repeat)
    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "pages": args.pages,
        "evidence": args.evidence,
        "generate_s": round(gen, 1),
        "full_s": round(full, 2),
        "full_result": full_out,
        "full_exit": full_code,
        "full_pure_yaml_s": round(pure, 2),
        "full_pure_yaml_result": pure_out,
        "ratio_pure_yaml_over_full": round(pure / full, 2),
        "yaml_1000_headers": yaml_headers(root, 1000, args.repeat),
        "changed_only_s": round(changed, 2),
        "changed_only_result": changed_out,
        "changed_only_exit": changed_code,
        "ratio_changed_over_full": round(changed / full, 3),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
