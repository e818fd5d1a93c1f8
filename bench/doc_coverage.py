"""Documents to pages (issue 13): how much of a documentation folder the offline agents keep.

    python bench/doc_coverage.py DOCS_FOLDER --set NAME [--questions FILE.json] [--keep DIR]
                                 [--allow-secret FINGERPRINT ...]

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
  the passage of the first search result (hybrid search, pages only; the passage is the hit's
  ``text``: its chunk and neighbours in the section, ``retrieval.passage_tokens``)?

The evidence is read with a small line scanner written for this benchmark, not with the
Proposer's parser, so that what the parser misses is counted as missed. MyST and Sphinx
directives are counted by what they hold ({code-block} and click:example bodies are code,
{note} and {eval-rst} paragraphs prose, {contents} and (label)= nothing). Without
``--questions`` no index is built. ``--allow-secret`` lists reviewed findings of the secret
scanner (an example key in the docs) in the repository's kb.config.yaml, as a user would.
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
from kb.retrieval.search import make_query, search
from kb.scaffold import init_repository
from pipeline.loop import run_loop

DOC_SUFFIXES = (".md", ".markdown")
FENCE_RE = re.compile(r"^\s*(`{3,}|~{3,})")
HEADING_RE = re.compile(r"^\s{0,3}(#{1,6})\s+(.+?)\s*#*\s*$")
SKIP_LINE_RE = re.compile(r"^\s*(?:\||<|:::|!!!|\?\?\?|===|\{%|\[[^\]]+\]:\s|\.\. |-{3,}\s*$|\*{3,}\s*$|={3,}\s*$)")
LIST_RE = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`*_\[(\"])")
TAG_RE = re.compile(r"</?[A-Za-z][^<>]*>")
# the HTML that may interrupt a paragraph (CommonMark's block tags); any other <x> line continues it
BLOCK_TAG_RE = re.compile(
    r"^<(?:!--|/?(?:div|p|pre|table|details|summary|center|section|h[1-6]|ul|ol|li|hr|br|img|a|script|style)\b)", re.I
)
LINK_RE = re.compile(r"!?\[([^\]]*)\](?:\([^)]*\)|\[[^\]]*\])")
FRAGMENT_END_WORDS = {"and", "or", "of", "the", "a", "an", "to", "with", "for", "in", "by", "that"}


MYST_FENCE_RE = re.compile(r"^\s*(`{3,}|~{3,})\{([\w:-]+)\}\s*(.*)$")
MYST_TARGET_RE = re.compile(r"^\s*\([^()\s]+\)=\s*$")
ATTRIBUTES_RE = re.compile(r"^\s*\{[.#][^{}]*\}\s*$")
RST_DIRECTIVE_RE = re.compile(r"^(\s*)\.\.\s+([\w:-]+)::\s*(.*)$")
OPTION_RE = re.compile(r"^\s*:[\w-]+:")
# what MyST/Sphinx directives hold, read from their documentation (not from the Proposer's parser)
CODE_DIRECTIVES = {"code-block", "code", "sourcecode", "code-cell", "click:example", "click:run", "doctest", "testcode", "ipython"}
PROSE_DIRECTIVES = {
    "note", "tip", "hint", "important", "warning", "caution", "danger", "error", "attention", "seealso", "admonition",
    "versionadded", "versionchanged", "deprecated", "tabs", "tab", "group-tab", "tab-set", "tab-item", "container", "topic",
}  # fmt: skip


def roles(text: str) -> str:
    """MyST ({func}`x`) and reStructuredText (:func:`x`, ``x``, `text <url>`_) inline markup
    as a reader sees it: code roles are code, {ref}/{doc} show their text."""
    text = re.sub(r"``([^`]+)``", r"`\1`", text)

    def role(name: str, content: str) -> str:
        name = name.split(":")[-1]
        titled = re.match(r"^(.*?)\s*<[^<>]+>$", content)
        if name in ("ref", "doc", "term"):
            return titled.group(1) if titled else content
        if name in ("pep", "rfc"):
            return f"{name.upper()} {content}"
        content = titled.group(1) if titled else content.lstrip("!")
        return f"`{content[1:].rsplit('.', 1)[-1] if content.startswith('~') else content}`"

    # a role, or a code span left as it is (`--{on}/--{off}` holds braces, not a role)
    text = re.sub(
        r"(?:\{([\w.:+-]+)\}|:([\w.:+-]+):)`([^`]+)`|`[^`\n]+`",  # a role may span lines, a code span not
        lambda m: role(m.group(1) or m.group(2), " ".join(m.group(3).split())) if m.group(3) else m.group(0),
        text,
    )
    return re.sub(r"`([^`<]+?)\s*<[^`>]+>`__?", r"\1", text)


def fold(text: str) -> str:
    """Text as compared: roles read, link targets, tags and emphasis markers gone, whitespace folded."""
    codes: list[str] = []  # code spans are compared as they are

    def hide(m: re.Match[str]) -> str:
        codes.append(m.group(0))
        return f"\x00{len(codes) - 1}\x00"

    text = re.sub(r"`[^`\n]+`", hide, roles(text))
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
    return [f for f in (fold(s) for s in SENTENCE_SPLIT_RE.split(roles(paragraph))) if len(f.split()) >= 3]


def code_of(lines: list[str]) -> str:
    return " ".join(" ".join(lines).split())


def scan(text: str) -> dict[str, list[str]]:
    """Code blocks, backticked identifiers, headings and prose sentences of one document."""
    out: dict[str, list[str]] = {"code blocks": [], "identifiers": [], "headings": [], "sentences": []}
    prose: list[str] = []
    scan_markdown(body_lines(text), out, prose)
    spans = re.findall(r"`([^`]+?)`", roles("\n".join(prose)))
    out["identifiers"] = sorted({" ".join(s.split()) for s in spans if s.strip() and "\n\n" not in s})
    return out


def scan_markdown(lines: list[str], out: dict[str, list[str]], prose: list[str]) -> None:
    fence: str | None = None
    directive_fence: tuple[str, str, str] | None = None  # (fence, name, argument) of a MyST directive
    code: list[str] = []
    paragraph: list[str] = []

    def flush() -> None:
        out["sentences"] += sentences_of(" ".join(paragraph))
        paragraph.clear()

    directive = -1  # indentation of the ::: directive whose options are being skipped
    in_quote = False
    for line in lines:
        indent = len(line) - len(line.lstrip())
        if fence is None and directive >= 0 and (not line.strip() or indent > directive):
            continue  # the options of a ::: directive
        directive = indent if fence is None and line.strip().startswith(":::") else -1
        line = re.sub(r"<!--.*?-->", "", line)  # comments are not shown to readers
        m = FENCE_RE.match(line)
        if fence is not None:
            if closes(line, fence):
                fenced(code, directive_fence[1] if directive_fence else None, out, prose)
                fence, code, directive_fence = None, [], None
            else:
                code.append(line)
            continue
        if m:
            flush()
            fence = m.group(1)
            d = MYST_FENCE_RE.match(line)
            directive_fence = (fence, d.group(2).lower(), d.group(3)) if d else None
            continue
        quoted, shows_nothing = bool(re.match(r"^\s*>", line)), bool(MYST_TARGET_RE.match(line) or ATTRIBUTES_RE.match(line))
        if shows_nothing or quoted != in_quote:
            flush()  # (label)= and {.attributes} lines show nothing; a block quote starts (or ends) a paragraph
            in_quote = quoted
            if shows_nothing:
                continue
        stripped = re.sub(r"^(\s*>\s?)+", "", line).strip()
        heading = HEADING_RE.match(stripped)
        if heading:
            flush()
            out["headings"].append(fold(re.sub(r"\s*\{[#.][^}]*\}\s*$", "", heading.group(2))))
            continue
        prose.append(stripped)
        continuation = paragraph and stripped.startswith("<") and not BLOCK_TAG_RE.match(stripped)  # no HTML block
        if not stripped or (SKIP_LINE_RE.match(stripped) and not continuation):
            flush()
            continue
        if LIST_RE.match(stripped):
            flush()
            stripped = LIST_RE.sub("", stripped)
        paragraph.append(stripped)
    flush()


def closes(line: str, fence: str) -> bool:
    m = FENCE_RE.match(line)
    return bool(m) and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip().strip(fence[0])


def fenced(code: list[str], directive: str | None, out: dict[str, list[str]], prose: list[str]) -> None:
    """What a closed fence held: code, or (a MyST directive) what the directive holds."""
    if directive is not None:
        myst_directive(directive, code, out, prose)
    elif any(c.strip() for c in code):
        out["code blocks"].append(code_of(code))


def myst_directive(name: str, body: list[str], out: dict[str, list[str]], prose: list[str]) -> None:
    """A MyST directive fence: code directives are code, admonitions prose, {eval-rst}
    reStructuredText; the rest ({contents}, {toctree}, {currentmodule}, {image}) shows no text."""
    content = [t for t in body if not OPTION_RE.match(t)]
    if name in CODE_DIRECTIVES:
        if any(t.strip() for t in content):
            out["code blocks"].append(code_of(content))
    elif name in PROSE_DIRECTIVES:
        scan_markdown(content, out, prose)
    elif name == "eval-rst":
        scan_rst(body, out, prose)


def scan_rst(lines: list[str], out: dict[str, list[str]], prose: list[str]) -> None:
    """reStructuredText: code directive bodies and literal blocks (after ``::``) are code,
    paragraphs are prose, admonition and tab bodies are read again; tables and API directives
    are not counted."""
    i = 0
    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        end = i + 1
        while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent):
            end += 1
        d = RST_DIRECTIVE_RE.match(line)
        if d:
            name = d.group(2).lower()
            body = [t for t in lines[i + 1 : end] if not OPTION_RE.match(t)]
            if name in CODE_DIRECTIVES and any(t.strip() for t in body):
                out["code blocks"].append(code_of(body))
            elif name in PROSE_DIRECTIVES:
                width = min((len(t) - len(t.lstrip()) for t in body if t.strip()), default=0)
                scan_rst(
                    ([d.group(3)] if d.group(3).strip() and name not in ("group-tab", "tab") else []) + [t[width:] for t in body],
                    out,
                    prose,
                )
            i = end
            continue
        if not line.strip() or line.strip().startswith(".."):
            i = end if line.strip() else i + 1
            continue
        j = i
        while j < len(lines) and lines[j].strip() and not RST_DIRECTIVE_RE.match(lines[j]):
            j += 1
        paragraph = " ".join(t.strip() for t in lines[i:j])
        prose.extend(t.strip() for t in lines[i:j])
        literal = paragraph.endswith("::")
        out["sentences"] += sentences_of(re.sub(r"\s*::$", ":", paragraph))
        i = j
        if literal:
            k = j
            while k < len(lines) and (not lines[k].strip() or len(lines[k]) - len(lines[k].lstrip()) > indent):
                k += 1
            if any(t.strip() for t in lines[j:k]):
                out["code blocks"].append(code_of(lines[j:k]))
            i = k


def page_text(page_body: str) -> str:
    """A page body as a reader sees its content: no citation lines, no removed section, no quote
    markers."""
    kept = []
    removed = False
    fence: tuple[str, int] | None = None  # the open fence and the quote depth it sits at
    for line in page_body.splitlines():
        if line.startswith("## "):
            removed = line[3:].strip() == "Removed in later versions"
        if removed or re.match(r"^\[\^[^\]\s]+\]:", line):
            continue
        if fence is not None:  # inside code only the quote markers of the block holding it go
            for _ in range(fence[1]):
                line = re.sub(r"^\s*> ?", "", line)
            m = FENCE_RE.match(line)
            if m and m.group(1)[0] == fence[0][0] and not line.strip().strip(fence[0][0]):
                fence = None
            kept.append(line)
            continue
        marks = re.match(r"^(\s*>\s?)+", line)
        depth = marks.group(0).count(">") if marks else 0
        line = line[marks.end() :] if marks else line
        m = FENCE_RE.match(line)
        if m:
            fence = (m.group(1), depth)
        kept.append(line)
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
    """An HTML tag, a directive, a MyST role or (label)= target, a Sphinx role: markup a reader
    would see as is."""
    return bool(TAG_RE.search(text) or re.search(r"\{[\w.:+-]+\}`|:[\w.:+-]+:`|^\([^()\s]+\)=", text.strip())) or text.lstrip().startswith(
        (":::", "!!!", "???", "{%", "[TOC]", "<", ".. ")
    )


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
        hits = search(repo, make_query(q["q"], k=1))
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
    result = run_loop(repo, build_index=bool(args.questions))  # the index serves the questions only
    seconds = time.perf_counter() - started
    rounds = [f"r{r.record.round}:{r.verdict}" for r in result.reviews]
    print(
        f"kb run: {result.status.value} in {seconds:.1f} s, {'index build included' if args.questions else 'no index build'} ({', '.join(rounds)}) {result.reason}"
    )
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
    origins = [str(p.meta.get("origin")) for p in pages.values()]
    per_file = sum(1 for _, item in prepared if origins.count(item.source) == 1)
    print(
        f"\n{len(pages)} document pages for {len(prepared)} files; files with exactly one page: {per_file}/{len(prepared)};"
        f" items cited by exactly one page: {once}/{len(ids)}"
    )
    coverage(pages, prepared, args.examples)
    claim_quality(pages, args.examples)
    if args.questions and result.status.value != "merged":
        print(f"answerability: 0/{len(json.loads(args.questions.read_text(encoding='utf-8'))['questions'])} (nothing merged, no index)")
    elif args.questions:
        answerability(repo, args.questions)
    print(f"repository: {repo.root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
