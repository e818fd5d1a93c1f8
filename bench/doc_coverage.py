"""Documents to pages (issue 13): how much of a documentation folder the offline agents keep.

    python bench/doc_coverage.py DOCS_FOLDER --set NAME [--questions FILE.json] [--keep DIR]

A fresh repository in a temporary folder (or ``--keep DIR``) gets every Markdown file of
DOCS_FOLDER as a document, with ``NAME/<relative path>`` as its source; ``kb run`` (offline
Proposer and Reviewer) turns them into pages, merges, and builds the index. Then, on the merged
pages (their bodies without the citation lines, so that quotes do not count as kept text):

- coverage: the share of the evidence's fenced code blocks, identifiers in backticks, headings and
  prose sentences found in the pages (whitespace folded; link targets, HTML tags and emphasis
  markers ignored on both sides);
- claims that are fragments (start in lower case, end on a comma, hyphen or a word like "and",
  fewer than two words) or markup (an HTML tag, a directive);
- pages per file (each evidence item should be cited by exactly one document page);
- answerability (with ``--questions``): for each question, is the expected answer text inside
  the passage of the first search result (hybrid search, pages only)?

The evidence is read with a small line scanner written for this benchmark, not with the
Proposer's parser, so that what the parser misses is counted as missed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ci.run import run_checks
from kb.errors import KbError
from kb.evidence import add_items, load_ledger
from kb.intake import PreparedItem, prepare
from kb.page import Page, parse_page
from kb.repo import Repo
from kb.retrieval.search import search
from kb.scaffold import init_repository
from pipeline.loop import run_loop

DOC_SUFFIXES = (".md", ".markdown")
FENCE_RE = re.compile(r"^\s*(`{3,}|~{3,})")
HEADING_RE = re.compile(r"^\s{0,3}(#{1,6})\s+(.+?)\s*#*\s*$")
SKIP_LINE_RE = re.compile(r"^\s*(?:\||<|:::|!!!|\?\?\?|===|\{%|\[[^\]]+\]:\s|\.\. |-{3,}\s*$|\*{3,}\s*$|={3,}\s*$)")
LIST_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`*_\[(\"])")
TAG_RE = re.compile(r"</?[A-Za-z][^<>]*>")
LINK_RE = re.compile(r"!?\[([^\]]*)\](?:\([^)]*\)|\[[^\]]*\])")
FRAGMENT_END_WORDS = {"and", "or", "of", "the", "a", "an", "to", "with", "for", "in", "by", "that"}


def fold(text: str) -> str:
    """Text as compared: link targets, tags and emphasis markers gone, whitespace folded."""
    codes: list[str] = []  # code spans are compared as they are

    def hide(m: re.Match[str]) -> str:
        codes.append(m.group(0))
        return f"\x00{len(codes) - 1}\x00"

    text = re.sub(r"`[^`\n]+`", hide, text)
    text = LINK_RE.sub(r"\1", text)
    text = TAG_RE.sub(" ", text)
    text = re.sub(r"(?<!\w)[*_]+|[*_]+(?!\w)", "", text)
    text = re.sub(r"\x00(\d+)\x00", lambda m: codes[int(m.group(1))], text)
    return " ".join(text.split())


def body_lines(text: str) -> list[str]:
    """The lines of a document after its front matter, if any."""
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":
        return lines[next((n + 1 for n in range(1, len(lines)) if lines[n].strip() == "---"), 0) :]
    return lines


def sentences_of(paragraph: str) -> list[str]:
    """Sentences of three words or more, folded."""
    return [f for f in (fold(s) for s in SENTENCE_SPLIT_RE.split(paragraph)) if len(f.split()) >= 3]


def scan(text: str) -> dict[str, list[str]]:
    """Code blocks, backticked identifiers, headings and prose sentences of one document."""
    out: dict[str, list[str]] = {"code blocks": [], "identifiers": [], "headings": [], "sentences": []}
    fence: str | None = None
    code: list[str] = []
    paragraph: list[str] = []

    def flush() -> None:
        out["sentences"] += sentences_of(" ".join(paragraph))
        paragraph.clear()

    directive = -1  # indentation of the ::: directive whose options are being skipped
    prose: list[str] = []
    for line in body_lines(text):
        indent = len(line) - len(line.lstrip())
        if directive >= 0 and (not line.strip() or indent > directive):
            continue  # the options of a ::: directive
        directive = indent if line.strip().startswith(":::") else -1
        line = re.sub(r"<!--.*?-->", "", line)  # comments are not shown to readers
        m = FENCE_RE.match(line)
        if fence is not None:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip().strip(fence[0]):
                if any(c.strip() for c in code):
                    out["code blocks"].append(" ".join(" ".join(code).split()))
                fence, code = None, []
            else:
                code.append(line)
            continue
        if m:
            flush()
            fence = m.group(1)
            continue
        stripped = re.sub(r"^(\s*>\s?)+", "", line).strip()
        heading = HEADING_RE.match(stripped)
        if heading:
            flush()
            out["headings"].append(fold(re.sub(r"\s*\{[#.][^}]*\}\s*$", "", heading.group(2))))
            continue
        prose.append(stripped)
        if not stripped or SKIP_LINE_RE.match(stripped):
            flush()
            continue
        if LIST_RE.match(stripped):
            flush()
            stripped = LIST_RE.sub("", stripped)
        paragraph.append(stripped)
    flush()
    spans = re.findall(r"`([^`]+?)`", "\n".join(prose))
    out["identifiers"] = sorted({" ".join(s.split()) for s in spans if s.strip() and "\n\n" not in s})
    return out


def page_text(page_body: str) -> str:
    """A page body as a reader sees its content: no citation lines, no removed section, no quote
    markers."""
    kept = []
    removed = False
    for line in page_body.splitlines():
        if line.startswith("## "):
            removed = line[3:].strip() == "Removed in later versions"
        if removed or re.match(r"^\[\^[^\]\s]+\]:", line):
            continue
        kept.append(re.sub(r"^(\s*>\s?)+", "", line))
    return "\n".join(kept)


def is_fragment(quote: str) -> bool:
    words = quote.split()
    if len(words) < 2:
        return True
    if re.match(r"^[a-z]", quote):
        return True
    last = words[-1].lower().strip("\"'")
    return quote.rstrip()[-1] in ",-" or last in FRAGMENT_END_WORDS


def is_markup(text: str) -> bool:
    return bool(TAG_RE.search(text)) or text.lstrip().startswith((":::", "!!!", "???", "{%", "[TOC]", "<"))


def allow_secrets(repo: Repo, fingerprints: list[str]) -> Repo:
    """Reviewed secret-scanner findings (an example key in the docs) allowed in kb.config.yaml,
    committed, as a user would after reading the refusal."""
    if not fingerprints:
        return repo
    config = repo.root / "kb.config.yaml"
    config.write_text(config.read_text(encoding="utf-8") + f"secrets:\n  allow: [{', '.join(fingerprints)}]\n", encoding="utf-8")
    repo.commit_worktree_paths(["kb.config.yaml"], "kb: allow reviewed example secrets of the documentation\n")
    return Repo(repo.root)


def add_documents(repo: Repo, docs: Path, doc_set: str) -> list[tuple[str, PreparedItem]]:
    """Every Markdown file of ``docs`` as a document whose source is ``<doc_set>/<relative path>``."""
    files = sorted(p for p in docs.rglob("*") if p.is_file() and p.suffix.lower() in DOC_SUFFIXES)
    prepared, refused = [], []
    allow = repo.config.secrets.allow
    for path in files:
        rel = path.relative_to(docs).as_posix()
        try:
            prepared.append((rel, prepare(path.read_bytes(), path.name, "document", "system", source=f"{doc_set}/{rel}", allow=allow)))
        except KbError as exc:
            refused.append(f"{rel}: {exc.message} {'; '.join(getattr(exc, 'findings', ()))}")
    add_items(repo, [item for _, item in prepared])
    print(f"{len(files)} files, {len(prepared)} added as evidence, {len(refused)} refused")
    for line in refused:
        print(f"  refused {line}")
    return prepared


def document_pages(repo: Repo) -> dict[str, Page]:
    pages = {}
    for path in sorted((repo.root / "knowledge").rglob("*.md")):
        rel = path.relative_to(repo.root).as_posix()
        page = parse_page(path.read_text(encoding="utf-8"), rel)
        if "document" in (page.meta.get("tags") or []):
            pages[rel] = page
    return pages


def coverage(pages: dict[str, Page], prepared: list[tuple[str, PreparedItem]], examples: int) -> None:
    """The share of each measure of the evidence found in the pages, with a few misses."""
    joined = "\n".join(page_text(p.body) for p in pages.values())
    raw_text = " ".join(joined.split())
    text = fold(joined)  # by lines: a code span never crosses one
    found: dict[str, list[int]] = {}
    misses: dict[str, list[str]] = {}
    for rel, item in prepared:
        for measure, values in scan(item.content).items():
            hits = found.setdefault(measure, [0, 0])
            for value in values:
                hits[1] += 1
                if value in (raw_text if measure in ("code blocks", "identifiers") else text):
                    hits[0] += 1
                else:
                    misses.setdefault(measure, []).append(f"{rel}: {value[:100]}")
    for measure, (hit, total) in found.items():
        share = 100.0 * hit / total if total else 100.0
        print(f"{measure:>12}: {hit}/{total} = {share:.1f}%")
        for miss in misses.get(measure, [])[:examples]:
            print(f"      missed {miss}")


def claim_quality(pages: dict[str, Page], examples: int) -> None:
    """Sentence claims that are fragments or markup (block claims are whole blocks)."""
    claims = fragments = markup = blocks = 0
    bad: list[str] = []
    for path, page in pages.items():
        cites = {c.label: c for c in page.structure.citations}
        for claim in page.structure.claims:
            if claim.block is not None:
                blocks += 1
                continue
            claims += 1
            quote = cites[claim.labels[0]].quote if claim.labels and claim.labels[0] in cites else claim.text
            if is_markup(claim.text):  # what the page shows (code spans blanked: code is not markup)
                markup += 1
                bad.append(f"markup {path}:{claim.line}: {quote[:80]}")
            elif is_fragment(quote):
                fragments += 1
                bad.append(f"fragment {path}:{claim.line}: {quote[:80]}")
    print(f"claims: {claims} sentences + {blocks} blocks; fragments {fragments}, markup {markup}")
    for line in bad[: examples * 2]:
        print(f"      {line}")


def answerability(repo: Repo, questions: Path) -> None:
    data = json.loads(questions.read_text(encoding="utf-8"))
    answered = 0
    for q in data["questions"]:
        hits = search(repo, q["q"], k=1)
        passage = " ".join(hits[0].text.split()) if hits else ""
        ok = " ".join(q["answer"].split()) in passage
        answered += ok
        where = f"{hits[0].id}#{hits[0].anchor}" if hits else "no hit"
        print(f"  {'yes' if ok else 'NO '} {q['q']}  -> {where}")
    print(f"answerability: {answered}/{len(data['questions'])} answers inside the first result's passage")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("docs", type=Path, help="the documentation folder")
    parser.add_argument("--set", dest="doc_set", default="", help="source prefix (default: the folder's parent's name)")
    parser.add_argument("--questions", type=Path, help="JSON with questions and expected answer text")
    parser.add_argument("--keep", type=Path, help="build the repository here instead of a temporary folder")
    parser.add_argument(
        "--allow-secret", action="append", default=[], metavar="FINGERPRINT", help="a reviewed secret finding to allow (repeatable)"
    )
    parser.add_argument("--examples", type=int, default=5, help="misses and bad claims to print per measure")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="kb-docs-"))
    repo = allow_secrets(init_repository(root / "kb"), args.allow_secret)
    prepared = add_documents(repo, args.docs, args.doc_set or args.docs.resolve().parent.name)
    started = time.perf_counter()
    result = run_loop(repo, build_index=True)
    seconds = time.perf_counter() - started
    rounds = [f"r{r.record.round}:{r.verdict}" for r in result.reviews]
    print(f"kb run: {result.status.value} in {seconds:.1f} s, index build included ({', '.join(rounds)}) {result.reason}")
    for n, review in enumerate(result.reviews):
        for c in review.comments[: args.examples]:
            print(f"  {c.path}:{c.line}: {c.message}")
        withdrawal = result.revisions[n] if n < len(result.revisions) else None
        for note in withdrawal.notes if withdrawal else ():
            print(f"  revision {n + 1}: {note}")
    repo = Repo(repo.root)
    report = run_checks(repo)
    print(f"kb check on main: {'clean' if report.ok else 'errors'} ({len(report.findings)} finding(s))")
    pages = document_pages(repo)
    ids = {e.id for e in load_ledger(repo.root)}
    once = sum(1 for i in ids if sum(1 for p in pages.values() if i in (p.meta.get("sources") or [])) == 1)
    print(f"\n{len(pages)} document pages for {len(prepared)} files; items cited by exactly one page: {once}/{len(ids)}")
    coverage(pages, prepared, args.examples)
    claim_quality(pages, args.examples)
    if args.questions:
        answerability(repo, args.questions)
    print(f"repository: {repo.root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
