"""Profile benchmark: how many facts about each speaker end up as profile cards or claims.

Usage: python bench/profile_facts.py [--facts bench/data/profile_facts.yaml] [--data ../shared/data] [--json]

Each speaker of ``bench/data/profile_facts.yaml`` (LoCoMo dev conversations, the memory cases)
is ingested into a fresh repository through the normal reviewed loop (``kb memory ingest``, the
configured agents: the offline ones here), and what was merged is read back: the cards
(``facts:``) and claim bullets of ``users/<id>/profile.md`` and of the entity pages (cards,
accounts, policies, warranties, devices, doctors, vehicles). A fact counts as found when every
one of its ``match`` terms is in one card (its fields joined) or one claim bullet.

- recall: facts found / facts listed;
- precision (against the list): profile items that match some listed fact / profile items.
  Facts nobody listed count as misses here, so it is a lower bound of real precision.

Run it on another checkout (``PYTHONPATH=that/checkout``) to compare versions. The data are
third-party (``../shared/data``, see its README); the script says so when they are absent.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from kb.page import parse_page
from kb.repo import Repo
from kb.scaffold import init_repository
from pipeline.memory import ingest

ENTITY_PAGES = ("cards", "accounts", "policies", "warranties", "devices", "doctors", "vehicles")


def profile_items(repo: Repo, user: str) -> list[str]:
    """Every card (fields joined) and claim bullet of the user's profile and entity pages."""
    head = repo.head()
    items: list[str] = []
    for slug in ("profile", *ENTITY_PAGES):
        path = f"users/{user}/{slug}.md"
        raw = repo.read_at(head, path) if head is not None else None
        if raw is None:
            continue
        page = parse_page(raw.decode("utf-8"), path)
        for fact in page.meta.get("facts") or []:
            if slug == "profile" or str(fact.get("key", "")).split(":")[0] in {p.rstrip("s") for p in ENTITY_PAGES} | {"vehicle", "policy"}:
                items.append(" ".join(str(v) for k, v in fact.items() if k not in ("source", "label", "learned", "valid_from", "valid_to")))
        section = ""
        for line in page.body.splitlines():
            if line.startswith("## "):
                section = line[3:].strip()
            elif line.startswith("- ") and "[^" in line and section not in ("Overview", "History"):
                items.append(line[2:].split("[^")[0])
    return items


def found(terms: list[str], items: list[str]) -> bool:
    return any(all(str(t).lower() in item.lower() for t in terms) for item in items)


def run(facts_path: Path, data: Path) -> list[dict[str, Any]]:
    spec = yaml.safe_load(facts_path.read_text(encoding="utf-8"))
    rows = []
    with tempfile.TemporaryDirectory(prefix="kb-profile-bench-") as tmp:
        repo = init_repository(Path(tmp) / "repo")
        for n, speaker in enumerate(spec["speakers"]):
            path = data / "locomo" / "locomo-dev.json" if speaker["source"] == "locomo" else data / "memory-cases" / speaker["case"]
            if not path.exists():
                sys.exit(f"{path} not found: the benchmark data live in ../shared/data (see its README); pass --data")
            if speaker["source"] == "locomo":
                user = f"{speaker['sample']}-{speaker['speaker']}".lower()
                result = ingest(repo, user, [path], sample=speaker["sample"], speaker=speaker["speaker"], build_index=False)
                label = f"{speaker['sample']} {speaker['speaker']}"
            else:
                user = speaker.get("user") or f"user-{chr(ord('a') + n)}"
                result = ingest(repo, user, [path], build_index=False)
                label = speaker["case"]
            merged = result.run is not None and result.run.merge is not None
            items = profile_items(repo, user)
            hits = [f for f in speaker["facts"] if found(f["match"], items)]
            matching = [i for i in items if any(all(str(t).lower() in i.lower() for t in f["match"]) for f in speaker["facts"])]
            rows.append(
                {
                    "speaker": label,
                    "merged": merged,
                    "facts": len(speaker["facts"]),
                    "found": len(hits),
                    "recall": round(len(hits) / len(speaker["facts"]), 3),
                    "profile_items": len(items),
                    "matching_items": len(matching),
                    "precision_vs_list": round(len(matching) / len(items), 3) if items else None,
                    "missed": [f["fact"] for f in speaker["facts"] if f not in hits],
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=Path, default=Path(__file__).parent / "data" / "profile_facts.yaml")
    parser.add_argument("--data", type=Path, default=Path("../shared/data"), help="the shared benchmark data folder")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = run(args.facts, args.data)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    total = sum(r["facts"] for r in rows)
    hit = sum(r["found"] for r in rows)
    items = sum(r["profile_items"] for r in rows)
    matching = sum(r["matching_items"] for r in rows)
    for r in rows:
        print(
            f"{r['speaker']:<42} facts {r['found']:>2}/{r['facts']:<2} recall {r['recall']:.2f}  "
            f"profile items {r['profile_items']:>3}, matching {r['matching_items']:>3} (precision vs list {r['precision_vs_list']})"
            + ("" if r["merged"] else "  NOT MERGED")
        )
    print(
        f"{'all':<42} facts {hit:>2}/{total:<2} recall {hit / total:.2f}  profile items {items}, matching {matching} (precision vs list {matching / max(1, items):.2f})"
    )


if __name__ == "__main__":
    main()
