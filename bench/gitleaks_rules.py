"""Convert gitleaks' published rule set (config/gitleaks.toml, MIT) into kb's compact data file.

    python bench/gitleaks_rules.py MIRROR [--out kb/gitleaks.json]

MIRROR is a git directory of github.com/gitleaks/gitleaks (the search tool's ``fetch``); the file
is read from its HEAD with ``git show``, and the commit and the licence text go into the output's
header. Only what matching needs is kept: each rule's id, regex, keywords, entropy threshold,
secret group and its allow-lists that do not depend on file paths (kb scans text, not a tree);
plus the global allow-list's regexes and stopwords. Rules that match file names only are dropped.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tomllib
from pathlib import Path
from typing import Any


def _git(mirror: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(mirror), *args], check=True, capture_output=True, text=True).stdout


def _allowlists(rule: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for allow in rule.get("allowlists", []):
        if allow.get("paths") or allow.get("commits"):
            continue  # about where a file lies, not about the text
        entry: dict[str, Any] = {"target": allow.get("regexTarget", "secret")}
        if allow.get("regexes"):
            entry["regexes"] = allow["regexes"]
        if allow.get("stopwords"):
            entry["stopwords"] = sorted({w.lower() for w in allow["stopwords"]})
        if len(entry) > 1:
            out.append(entry)
    return out


def convert(mirror: Path) -> dict[str, Any]:
    commit = _git(mirror, "rev-parse", "HEAD").strip()
    config = tomllib.loads(_git(mirror, "show", "HEAD:config/gitleaks.toml"))
    rules = []
    for rule in config["rules"]:
        if "regex" not in rule:
            continue
        entry: dict[str, Any] = {"id": rule["id"], "regex": rule["regex"], "keywords": sorted({k.lower() for k in rule["keywords"]})}
        if rule.get("entropy"):
            entry["entropy"] = rule["entropy"]
        if rule.get("secretGroup"):
            entry["group"] = rule["secretGroup"]
        if allow := _allowlists(rule):
            entry["allow"] = allow
        rules.append(entry)
    glob = config.get("allowlist", {})
    return {
        "source": "https://github.com/gitleaks/gitleaks/blob/" + commit + "/config/gitleaks.toml",
        "commit": commit,
        "licence": "MIT",
        "licence_text": _git(mirror, "show", "HEAD:LICENSE").strip(),
        "converted_by": "bench/gitleaks_rules.py (ids, regexes, keywords, entropy, secret groups, path-free allow-lists)",
        "allow": {"regexes": glob.get("regexes", []), "stopwords": sorted({w.lower() for w in glob.get("stopwords", [])})},
        "rules": rules,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mirror", type=Path)
    parser.add_argument("--out", type=Path, default=Path("kb/gitleaks.json"))
    args = parser.parse_args()
    data = convert(args.mirror)
    args.out.write_text(json.dumps(data, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    print(f"{len(data['rules'])} rules from {data['commit'][:12]} -> {args.out} ({args.out.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
