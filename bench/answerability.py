"""Answerability on documentation sites: is the answer in the first hit's printed passage?

    python bench/answerability.py bench/data/answerability/mkdocs.json --docs /tmp/ans/mkdocs/docs \
        [--workdir /tmp/ans/run-mkdocs] [--reuse] [--fusions]

As a user would: ``kb init``, ``kb evidence add DOCS --source NAME`` and ``kb run`` (the offline
Proposer and Reviewer, merge, index build), each a ``kb`` process. Then every question of the
file is searched in-process (pages only, k=1) in each mode (hybrid, bm25, dense), and the
first hit's passage is made as ``kb search`` prints it (``kb.retrieval.snippet.passage`` of the
visible text). A question counts as answered when its ``answer`` text (whitespace folded) is
inside that printed passage. ``--reuse`` skips the build when the workdir holds one already.
``--fusions`` also ranks each question under the fusion choices of ``bench/retrieval_tune.py``
(same candidate lists) and counts the first document's passage for each.

The question files hold the site, its commit and licence: fetch the commit's ``folder`` to get
the documents (``git archive``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kb.controls import visible
from kb.repo import Repo
from kb.retrieval.search import Hit, Searcher, make_query, open_searcher
from kb.retrieval.snippet import passage, reader_text

MODES = ("hybrid", "bm25", "dense")


def _kb(repo: Path, *args: str, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    done = subprocess.run([sys.executable, "-m", "kb", "-q", *args], cwd=repo, env=env, capture_output=True, text=True, check=False)
    if done.returncode not in ok:
        raise SystemExit(f"kb {' '.join(args)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return done


def build(docs: Path, name: str, workdir: Path, allow: list[str]) -> Path:
    repo = workdir / "kb"
    repo.mkdir(parents=True)
    _kb(repo, "init")
    if allow:  # example keys of the documentation, reviewed: allowed as a user would after the refusal
        config = repo / "kb.config.yaml"
        config.write_text(config.read_text(encoding="utf-8") + f"\nsecrets:\n  allow: [{', '.join(allow)}]\n", encoding="utf-8")
        subprocess.run(["git", "commit", "-qam", "allow the documentation's example secrets"], cwd=repo, check=True)
    added = _kb(repo, "evidence", "add", str(docs), "--source", name).stdout
    print(f"evidence add: {len(added.splitlines())} line(s) of output", flush=True)
    run = _kb(repo, "run", ok=(0, 1))
    print(run.stdout.strip()[-1500:], flush=True)
    if run.returncode == 1:
        # needs-human: the loop's work is on its branch. Retrieval is measured on its pages all the
        # same (merged here by hand, fast-forward, as a maintainer reading the branch might).
        branch = subprocess.run(
            ["git", "branch", "--list", "kb/*", "--format=%(refname:short)"], cwd=repo, capture_output=True, text=True, check=True
        )
        work = branch.stdout.split()[-1]
        subprocess.run(["git", "merge", "-q", "--ff-only", work], cwd=repo, check=True)
        _kb(repo, "index", "build")
        print(f"loop did not converge: {work} merged by hand (fast-forward) and indexed", flush=True)
    return repo


def fold(text: str) -> str:
    return " ".join(text.split())


def printed(hit: Hit | None, query: str) -> str:
    return passage(visible(hit.text), query).text if hit else ""


def judge(questions: list[dict[str, str]], hits_of: dict[str, list[Hit | None]]) -> dict[str, list[bool]]:
    return {
        mode: [fold(q["answer"]) in fold(printed(hit, q["q"])) for q, hit in zip(questions, hits, strict=True)]
        for mode, hits in hits_of.items()
    }


def on_pages(repo: Repo, questions: list[dict[str, str]]) -> list[bool]:
    """For each question: is its answer anywhere in the pages' reader text (else no search can
    print it: the pages lost it, not the retrieval)?"""
    texts = [fold(reader_text(p.read_text(encoding="utf-8")).text) for p in (repo.root / "knowledge").rglob("*.md")]
    return [any(fold(q["answer"]) in text for text in texts) for q in questions]


def fusion_hits(searcher: Searcher, questions: list[dict[str, str]]) -> dict[str, list[Hit | None]]:
    """The first hit of each question under each fusion choice of bench/retrieval_tune.py that
    the product has (``kb search``'s whole path: fusion, passage widening)."""
    from bench.retrieval_tune import FUSION_CHOICES, settings

    out: dict[str, list[Hit | None]] = {}
    for name, choice in FUSION_CHOICES.items():
        if choice.get("fusion") == "norm-sum":
            continue
        with settings(searcher, choice) as tuned:
            out[name] = [next(iter(tuned.search(make_query(q["q"], k=1))), None) for q in questions]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("questions", type=Path)
    parser.add_argument("--docs", type=Path, required=True, help="the site's documentation folder (its `folder` at `commit`)")
    parser.add_argument("--workdir", type=Path, help="default /tmp/kb-answerability/<file stem>")
    parser.add_argument("--reuse", action="store_true", help="reuse the workdir's repository when it exists")
    parser.add_argument("--fusions", action="store_true", help="also count the fusion choices of bench/retrieval_tune.py")
    parser.add_argument("--show", action="store_true", help="print each miss's printed passage")
    args = parser.parse_args()
    data = json.loads(args.questions.read_text(encoding="utf-8"))
    questions = [q for q in data["questions"] if q.get("answer")]
    workdir = args.workdir or Path("/tmp/kb-answerability") / args.questions.stem
    if args.reuse and (workdir / "kb" / ".git").exists():
        root = workdir / "kb"
    else:
        if workdir.exists():
            raise SystemExit(f"{workdir} exists: remove it or pass --reuse")
        root = build(args.docs, args.questions.stem, workdir, data.get("allow_secrets", []))
    repo = Repo(root)
    searcher = open_searcher(repo)
    hits_of = {mode: [next(iter(searcher.search(make_query(q["q"], k=1, mode=mode))), None) for q in questions] for mode in MODES}
    if args.fusions:
        hits_of |= fusion_hits(searcher, questions)
    verdicts = judge(questions, hits_of)
    present = on_pages(repo, questions)
    for n, q in enumerate(questions):
        marks = " ".join(f"{mode[:3]}:{'y' if verdicts[mode][n] else '-'}" for mode in MODES)
        hit = hits_of["hybrid"][n]
        where = hit.id + "#" + hit.anchor if hit else "no hit"
        print(f"  {marks}  {'' if present[n] else '(not on any page) '}{q['q']}  -> {where}")
        if args.show and not verdicts["hybrid"][n]:
            print("      " + printed(hit, q["q"]).replace("\n", "\n      ")[:700])
    total = len(questions)
    summary = {mode: sum(v) for mode, v in verdicts.items()}
    print(
        json.dumps(
            {"set": args.questions.stem, "questions": total, "answer_on_a_page": sum(present), "answered_in_printed_passage": summary},
            ensure_ascii=False,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
