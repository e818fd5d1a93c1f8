"""Profile benchmark: how many facts about each speaker end up as profile cards or claims.

Usage: python bench/profile_facts.py [--facts bench/data/profile_facts.yaml] [--data ../shared/data] [--json]

Each speaker of ``bench/data/profile_facts.yaml`` (LoCoMo dev conversations, the memory cases)
is ingested into a fresh repository through the normal reviewed loop (``kb memory ingest``, the
configured agents: the offline ones here), and what was merged is read back: the cards
(``facts:``) and claim bullets of ``users/<id>/profile.md`` and of the entity pages (cards,
accounts, policies, warranties, devices, doctors, vehicles). A fact counts as found when every
one of its ``match`` terms is in one card (its fields joined) or one claim bullet.

- recall: facts found / facts listed;
- precision: right items / judged items. An item is right when it matches a listed fact or
  ``bench/data/profile_judgments.yaml`` judges it right (a true fact about the speaker nobody
  listed), wrong when that file judges it wrong (about someone else, not what was said, or not
  a fact); wrong wins. Items neither listed nor judged are counted and printed (``--unjudged``)
  so that a person judges them: the figure is over judged items only;
- precision vs list (the older, lower bound): items matching a listed fact / all items.

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


def normal(item: str) -> str:
    return " ".join(item.lower().split())


def judged_as(item: str, judged: set[str]) -> bool:
    """The item is in ``judged`` (normalised), or starts with an entry that ends in " ..." (a
    card whose details, with their evidence ids, are too long to copy)."""
    text = normal(item)
    return text in judged or any(j.endswith(" ...") and text.startswith(j[:-4]) for j in judged)


def run(facts_path: Path, data: Path, judgments_path: Path | None = None) -> list[dict[str, Any]]:
    spec = yaml.safe_load(facts_path.read_text(encoding="utf-8"))
    judged = yaml.safe_load(judgments_path.read_text(encoding="utf-8")) if judgments_path and judgments_path.exists() else {}
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
            verdicts = (judged or {}).get(label) or {}
            wrong_set = {normal(i) for i in verdicts.get("wrong") or []}
            right_set = {normal(i) for i in verdicts.get("right") or []}
            wrong = [i for i in items if judged_as(i, wrong_set)]
            right = [i for i in items if i not in wrong and (i in matching or judged_as(i, right_set))]
            unjudged = [i for i in items if i not in wrong and i not in right]
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
                    "right": len(right),
                    "wrong": len(wrong),
                    "unjudged": len(unjudged),
                    "precision": round(len(right) / (len(right) + len(wrong)), 3) if right or wrong else None,
                    "missed": [f["fact"] for f in speaker["facts"] if f not in hits],
                    "wrong_items": wrong,
                    "unjudged_items": unjudged,
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=Path, default=Path(__file__).parent / "data" / "profile_facts.yaml")
    parser.add_argument("--data", type=Path, default=Path("../shared/data"), help="the shared benchmark data folder")
    parser.add_argument("--judgments", type=Path, default=Path(__file__).parent / "data" / "profile_judgments.yaml")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--unjudged", action="store_true", help="also print the items nobody has judged yet")
    args = parser.parse_args()
    rows = run(args.facts, args.data, args.judgments)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    total = sum(r["facts"] for r in rows)
    hit = sum(r["found"] for r in rows)
    items = sum(r["profile_items"] for r in rows)
    matching = sum(r["matching_items"] for r in rows)
    right = sum(r["right"] for r in rows)
    wrong = sum(r["wrong"] for r in rows)
    unjudged = sum(r["unjudged"] for r in rows)
    for r in rows:
        print(
            f"{r['speaker']:<38} facts {r['found']:>2}/{r['facts']:<2} recall {r['recall']:.2f}  items {r['profile_items']:>3}: "
            f"right {r['right']:>3}, wrong {r['wrong']:>2}, unjudged {r['unjudged']:>2}, precision {r['precision']}  "
            f"(vs list {r['precision_vs_list']})" + ("" if r["merged"] else "  NOT MERGED")
        )
        for item in r["wrong_items"]:
            print(f"    wrong: {item}")
        for item in r["unjudged_items"] if args.unjudged else []:
            print(f"    unjudged: {item}")
    print(
        f"{'all':<38} facts {hit:>2}/{total:<2} recall {hit / total:.2f}  items {items:>3}: right {right}, wrong {wrong}, "
        f"unjudged {unjudged}, precision {right / max(1, right + wrong):.2f}  (vs list {matching / max(1, items):.2f})"
    )


if __name__ == "__main__":
    main()
