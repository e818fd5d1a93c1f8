"""The offline Proposer's revision: it cannot rewrite a claim, so it withdraws what the review
flagged (the claim a comment names, with its citation if no other claim uses it) and marks a
page with conflicting current facts as disputed. A model Proposer revises by itself instead.

Nothing is withdrawn silently: the result counts the withdrawn claims per rule, with one note
per rule saying why and where. A rule that fires on most verbatim claims of a change (claims
whose text is their quote) is taken for what it is, a bug in the rule: those claims are kept and
reported, not deleted (issue 13: a negation rule reading a backticked ``None`` as a negation
once removed 46 correct claims with nothing said but "round 2: approve").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agents.backend import WriteBackend
from agents.protocols import Withdrawal
from agents.schemas import Comment
from ci.snapshot import normalise_quote
from kb.citations import ANY_REF_RE, REFS_RUN_RE
from kb.errors import FormatError
from kb.markdown import CODESPAN_RE, FOOTREF_RE, Claim
from kb.page import Page, parse_page, render_page

REF_RE = ANY_REF_RE
RULE_RE = re.compile(r"^\[([a-z0-9_.-]+)\]\s")
BULK_SHARE = 0.5  # a rule flagging more than this share of the verbatim claims is a rule bug
BULK_MIN = 3  # ... when it flags at least this many


@dataclass(frozen=True)
class _Target:
    path: str
    rule: str
    comment: Comment
    claim: Claim | None  # None: a bullet line without a parsed claim (withdrawn as a line)
    line: int
    verbatim: bool


def rule_of(comment: Comment) -> str:
    """The rule a comment reports: a gate rule id (``[grounding.negation] ...``) or its kind."""
    m = RULE_RE.match(comment.message)
    return m.group(1) if m else comment.kind


def _bare(text: str) -> str:
    """Claim or quote text reduced to what both say: references, code, link targets, tags,
    emphasis and quote markers gone, whitespace folded, final punctuation dropped."""
    text = FOOTREF_RE.sub("", text)
    text = CODESPAN_RE.sub(" ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    text = re.sub(r"</?[A-Za-z][^<>]*>", " ", text)
    text = re.sub(r"^\s*>\s?", "", text, flags=re.M)
    text = re.sub(r"[*_\[\]`]", "", text)
    return normalise_quote(text).rstrip(".!?:;,。！？ ")


def is_verbatim(claim: Claim, quote: str) -> bool:
    """Does the claim say its quote word for word (a copied sentence, a kept block)?"""
    bare = _bare(claim.text)
    return bool(bare) and bare == _bare(quote)


def _targets(page: Page, lines: list[str], comments: list[Comment]) -> list[_Target]:
    quotes = {c.label: c.quote for c in page.structure.citations if c.evidence_id}
    out: list[_Target] = []
    for comment in comments:
        if comment.line <= page.header_lines:
            continue
        named = set(REF_RE.findall(comment.message))
        hits = [
            c
            for c in page.structure.claims
            if (c.line == comment.line or (c.block is not None and c.block[0] <= comment.line <= c.block[1]))
            and (not named or named & set(c.labels))
        ]
        for claim in hits:
            verbatim = any(is_verbatim(claim, quotes[label]) for label in claim.labels if label in quotes)
            out.append(_Target(page.path, rule_of(comment), comment, claim, comment.line, verbatim))
        if not hits and lines[comment.line - 1].lstrip().startswith(("-", "*")):
            out.append(_Target(page.path, rule_of(comment), comment, None, comment.line, False))
    return out


def _verbatim_claims(page: Page) -> int:
    quotes = {c.label: c.quote for c in page.structure.citations if c.evidence_id}
    return sum(1 for c in page.structure.claims if any(is_verbatim(c, quotes[label]) for label in c.labels if label in quotes))


def _remove(lines: list[str], target: _Target) -> set[str]:
    """Take one claim out of the page lines (in place: removed lines become None markers);
    returns the labels it carried."""
    claim = target.claim
    if claim is None:
        labels = set(REF_RE.findall(lines[target.line - 1]))
        lines[target.line - 1] = "\0"
        return labels
    if claim.block is not None:
        for n in range(claim.block[0], claim.block[1] + 1):
            lines[n - 1] = "\0"
        return set(claim.labels)
    text = lines[claim.line - 1]
    if text.lstrip().startswith(("-", "*", "+")) and len(REFS_RUN_RE.findall(text)) <= 1:
        lines[claim.line - 1] = "\0"  # a bullet holding one claim goes whole
        return set(claim.labels)
    # a sentence inside a paragraph: from the end of the previous claim to its references
    for label in claim.labels:
        at = text.find(f"[^{label}]")
        if at < 0:
            continue
        run = REFS_RUN_RE.match(text, at)
        end = run.end() if run else at
        prefix = re.match(r"^\s*(?:>\s*)*(?:[-*+]\s+|\d+[.)]\s+)?", text)
        start = max([m.end() for m in REFS_RUN_RE.finditer(text, 0, at)] + [prefix.end() if prefix else 0])
        head, tail = text[:start], text[end:]
        joined = (head.rstrip() + " " + tail.lstrip()).rstrip() if head.strip(" >-*+") else head + tail.lstrip()
        lines[claim.line - 1] = joined if joined.strip(" >-*+0123456789.)") else "\0"
        return set(REF_RE.findall(run.group(0))) if run else set(claim.labels)
    return set()


def withdraw_flagged(backend: WriteBackend, comments: tuple[Comment, ...]) -> Withdrawal:
    """Apply the offline fixes; returns what was withdrawn and kept, per rule."""
    by_path: dict[str, list[Comment]] = {}
    for comment in comments:
        by_path.setdefault(comment.path, []).append(comment)
    pages: dict[str, tuple[str, Page, list[_Target]]] = {}
    verbatim_total = 0
    for path, items in sorted(by_path.items()):
        text = backend.page_text(path)
        if text is None:
            continue
        try:
            page = parse_page(text, path)
        except FormatError:
            continue
        pages[path] = (text, page, _targets(page, text.split("\n"), items))
        verbatim_total += _verbatim_claims(page)
    flagged_verbatim: dict[str, set[tuple[str, int, tuple[str, ...]]]] = {}
    for _, _, targets in pages.values():
        for t in targets:
            if t.verbatim and t.claim is not None:
                flagged_verbatim.setdefault(t.rule, set()).add((t.path, t.claim.line, t.claim.labels))
    bulk = {
        rule
        for rule, claims in flagged_verbatim.items()
        if len(claims) >= BULK_MIN and len(claims) > BULK_SHARE * verbatim_total and rule not in ("over_deletion", "conflict")
    }
    withdrawn: dict[str, int] = {}
    kept: dict[str, int] = {}
    examples: dict[str, str] = {}
    for path, (text, _, targets) in pages.items():
        lines = text.split("\n")
        labels_dropped: set[str] = set()
        done: set[tuple[int, int | None]] = set()
        for t in sorted(targets, key=lambda t: -(t.claim.line if t.claim else t.line)):
            key = (t.claim.line if t.claim else t.line, hash(t.claim.labels) if t.claim else None)
            if key in done:
                continue
            done.add(key)
            examples.setdefault(t.rule, f"{path}:{t.line}: {t.comment.message[:160]}")
            if t.verbatim and t.rule in bulk:
                kept[t.rule] = kept.get(t.rule, 0) + 1
                continue
            labels = _remove(lines, t)
            if labels:
                withdrawn[t.rule] = withdrawn.get(t.rule, 0) + 1
                labels_dropped |= labels
        kept_lines = [line for line in lines if line != "\0"]
        still_used = {label for line in kept_lines if not line.startswith("[^") for label in REF_RE.findall(line)}
        kept_lines = [
            line for line in kept_lines if not (line.startswith("[^") and line[2 : line.index("]")] in labels_dropped - still_used)
        ]
        new_text = re.sub(r"\n{3,}", "\n\n", "\n".join(kept_lines))
        if any(c.kind == "conflict" for c in by_path[path]):
            page2 = parse_page(new_text, path)
            meta = dict(page2.meta)
            meta["status"] = "disputed"
            new_text = render_page(meta, page2.body)
        if new_text != text:
            backend.write_page(path, new_text)
    notes = [f"{rule}: withdrew {n} claim(s), e.g. {examples[rule]}" for rule, n in sorted(withdrawn.items())]
    notes += [
        f"{rule}: kept {n} verbatim claim(s) it flagged: it fired on {len(flagged_verbatim[rule])} of the {verbatim_total} "
        f"verbatim claims of the change, which is a bug in the rule, not a reason to delete them; e.g. {examples[rule]}"
        for rule, n in sorted(kept.items())
    ]
    return Withdrawal(withdrawn, kept, tuple(notes))
