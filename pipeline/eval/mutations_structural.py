"""Structural faults for the gate benchmark: a citation, footnote, link or header of a merged page broken."""

from __future__ import annotations

from collections.abc import Iterator

from pipeline.eval.mutations_base import WIKI_RE, Corpus, Mutant, PageView, claim_for, fresh_sentences, mutant


def footnote_def_deleted(view: PageView, corpus: Corpus) -> Iterator[Mutant]:  # noqa: ARG001
    for d in view.defs.values():
        yield mutant(view, "footnote_def_deleted", "structural", view.replace(d.index, None), f"deleted the definition of [^{d.label}]")


def citation_ref_deleted(view: PageView, corpus: Corpus) -> Iterator[Mutant]:  # noqa: ARG001
    for b in view.bullets:
        yield mutant(
            view, "citation_ref_deleted", "structural", view.replace(b.index, view.bullet_line(b, refs="")), f"line {b.index + 1}: uncited"
        )


def uncited_bullet_added(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
    after = view.body_bullets(overview=False)
    if not after:
        return
    for line, sentence in fresh_sentences(view, corpus):
        claim = claim_for(view, line, sentence)
        if claim:
            yield mutant(
                view, "uncited_bullet_added", "structural", view.insert(after[-1].index + 1, f"- {claim}"), f"added {claim[:60]!r}"
            )


def link_broken(view: PageView, corpus: Corpus) -> Iterator[Mutant]:  # noqa: ARG001
    for i, line in enumerate(view.lines[view.header_end + 1 :], view.header_end + 1):
        m = WIKI_RE.search(line)
        if m:
            target = m.group(1)
            yield mutant(
                view, "link_broken", "structural", view.replace(i, line.replace(f"[[{target}", f"[[{target}-old", 1)), f"line {i + 1}"
            )
    for b in view.body_bullets(overview=False)[:3]:
        folder = view.path.rsplit("/", 1)[0]
        new = view.bullet_line(b, tail=b.tail + f" See [[{folder}/background]].")
        yield mutant(view, "link_broken", "structural", view.replace(b.index, new), f"line {b.index + 1}: link to a missing page")


def frontmatter_broken(view: PageView, corpus: Corpus) -> Iterator[Mutant]:  # noqa: ARG001
    for i in range(1, view.header_end):
        line = view.lines[i]
        if line.startswith("title:"):
            yield mutant(view, "frontmatter_broken", "structural", view.replace(i, None), "title removed")
        elif line.startswith("status:"):
            yield mutant(view, "frontmatter_broken", "structural", view.replace(i, "status: published"), "unknown status")
        elif line.startswith("summary:"):
            yield mutant(
                view, "frontmatter_broken", "structural", view.replace(i, 'summary: "' + line[9:].strip('"')), "unterminated string"
            )
        elif line.startswith("id:"):
            yield mutant(view, "frontmatter_broken", "structural", view.replace(i, line + "-copy"), "id does not match the path")


def quote_altered(view: PageView, corpus: Corpus) -> Iterator[Mutant]:  # noqa: ARG001
    for d in view.defs.values():
        words = d.quote.split(" ")
        if len(words) >= 4:
            words[1], words[2] = words[2], words[1]
            new = view.lines[d.index].replace(f'"{d.quote}"', f'"{" ".join(words)}"')
            yield mutant(view, "quote_altered", "structural", view.replace(d.index, new), f"[^{d.label}] quote words swapped")


def citation_span_changed(view: PageView, corpus: Corpus) -> Iterator[Mutant]:
    for d in view.defs.values():
        total = len(corpus.evidence.get(d.evidence_id, []))
        line = view.lines[d.index]
        span = f"#L{d.start}" + (f"-L{d.end}" if d.end != d.start else "")
        yield mutant(
            view, "citation_span_changed", "structural", view.replace(d.index, line.replace(span, f"#L{total + 40}", 1)), "past the end"
        )
        other = d.start + 1 if d.start < total else d.start - 1
        if other >= 1 and corpus.line(d.evidence_id, other) and d.quote not in corpus.evidence[d.evidence_id][other - 1]:
            yield mutant(
                view, "citation_span_changed", "structural", view.replace(d.index, line.replace(span, f"#L{other}", 1)), "wrong line"
            )
        fake = d.evidence_id[:-4] + ("0000" if not d.evidence_id.endswith("0000") else "1111")
        yield mutant(view, "citation_span_changed", "structural", view.replace(d.index, line.replace(d.evidence_id, fake, 1)), "unknown id")
