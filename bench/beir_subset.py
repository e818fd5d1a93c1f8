#!/usr/bin/env python3
"""Write a smaller BEIR corpus for before/after quality runs that must stay short.

The subset keeps every document some judged query points at (so every query keeps its
answers) and fills up to ``--docs`` with the remaining documents in sorted id order:
deterministic, so the same subset is used before and after a change. Scores on a subset are
higher than on the full corpus (fewer distractors); compare them only with each other.

    python bench/beir_subset.py ../shared/data/scifact --docs 600 --out /tmp/scifact-600.jsonl
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path


def subset(folder: Path, docs: int) -> tuple[list[str], int, int]:
    """The subset's corpus lines (sorted by id), how many are judged, and the corpus size."""
    with open(folder / "qrels" / "dev.tsv", encoding="utf-8") as handle:
        judged = sorted({row[1] for row in csv.reader(handle, delimiter="\t") if len(row) >= 3 and row[0] != "query-id"})
    lines = {}
    with open(folder / "corpus.jsonl", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                lines[str(json.loads(line)["_id"])] = line.rstrip("\n")
    keep = [d for d in judged if d in lines][:docs]
    chosen = set(keep)
    keep += [d for d in sorted(lines) if d not in chosen][: max(0, docs - len(keep))]
    return [lines[d] for d in sorted(keep)], len(chosen), len(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="a BEIR folder: corpus.jsonl, qrels/dev.tsv")
    parser.add_argument("--docs", type=int, required=True, help="documents to keep (judged ones first)")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    kept, judged, total = subset(args.folder, args.docs)
    args.out.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
    print(f"{args.out}: {len(kept)} documents ({judged} judged) of {total}")


if __name__ == "__main__":
    main()
