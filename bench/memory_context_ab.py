"""Two versions of ``build_context`` on the same LoCoMo repository and index, in one run.

    kb eval memory --locomo ../shared/data/locomo/locomo-dev.json --workdir /tmp/locomo   # builds the repo
    python bench/memory_context_ab.py --repo /tmp/locomo/locomo --old-rev 4e8a744~1

The old version is loaded from git (``kb/memory_context.py`` at ``--old-rev``); the new one is
the working tree's. Prints LoCoMo evidence recall@5/@10 per variant for both, scored exactly as
``kb eval memory`` scores them.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def load_old(rev: str) -> types.ModuleType:
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:kb/memory_context.py"], capture_output=True, text=True, check=True
    ).stdout
    module = types.ModuleType("memory_context_old")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"{rev}:kb/memory_context.py", "exec"), module.__dict__)
    return module


def main() -> None:
    import kb.memory_context as new
    from kb.repo import Repo
    from kb.retrieval.search import open_searcher
    from pipeline.eval.memory import DIA_RE, VariantScore, slug, turn_map, turns_of

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, required=True, help="the repository `kb eval memory --locomo --workdir W` left in W/locomo")
    parser.add_argument("--locomo", type=Path, default=ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json")
    parser.add_argument("--old-rev", required=True)
    parser.add_argument("--variants", default="pages,both")
    args = parser.parse_args()
    versions = {"old": load_old(args.old_rev), "new": new}
    variants = args.variants.split(",")
    repo = Repo(args.repo)
    searcher = open_searcher(repo)
    turns = turn_map(repo)
    scores = {(name, v): VariantScore() for name in versions for v in variants}
    for sample in json.loads(args.locomo.read_text()):
        conv = sample["conversation"]
        valid = {t["dia_id"] for k, v in conv.items() if re.fullmatch(r"session_\d+", k) for t in v}
        speakers = (conv["speaker_a"], conv["speaker_b"])
        for qa in sample["qa"]:
            gold = {e.strip() for e in qa.get("evidence") or []}
            if not gold or not all(DIA_RE.match(e) and e in valid for e in gold):
                continue
            named = [s for s in speakers if s.split()[0].lower() in qa["question"].lower()]
            user = slug(f"{sample.get('sample_id', 'conv')}-{named[0] if len(named) == 1 else speakers[0]}")
            for name, module in versions.items():
                for variant in variants:
                    context = module.build_context(repo, user, qa["question"], budget=10**6, variant=variant, k=10, searcher=searcher)
                    base = set().union(*(turns_of(i, turns) for i in context.items if i.kind == "profile")) if variant != "raw" else set()
                    for k in (5, 10):
                        covered = base.union(*(turns_of(i, turns) for i in context.ranked[:k]))
                        scores[(name, variant)].add(int(qa["category"]), k, len(gold & covered) / len(gold))
    for (name, variant), score in scores.items():
        summary = score.summary()
        print(
            json.dumps(
                {
                    "version": name,
                    "variant": variant,
                    **summary["overall"],
                    "recall@10 per category": {c: v["recall@10"] for c, v in summary["per_category"].items()},
                }
            )
        )


if __name__ == "__main__":
    main()
