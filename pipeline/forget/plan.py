"""Step 1 of `kb forget`: what goes, decided from HEAD (pure: writes nothing)."""

from __future__ import annotations

import hashlib
import re
import secrets
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import pygit2

from kb.citations import ANY_REF_RE, DEFINITION_SOURCE_RE, definition_label
from kb.config import CONFIG_FILE
from kb.errors import NotFoundError, UsageError
from kb.evidence import LEDGER_PATH, LedgerEntry, find_entry, ledger_at
from kb.forgotten import MIN_DIGITS, MIN_TEXT, Fingerprints, fingerprint, forgotten_values, normalise, values
from kb.repo import Repo
from kb.scopes import PAGE_FOLDERS, folder_for_scope, user_scope
from pipeline.forget.derived import RECORDS_DIR, SCRUBBED, Holds, clean_index, clean_page, scrub_json

FORGOTTEN_DIR = "forget"  # under .kb/: deny entries, the key, pending and completion records
_FOOTNOTE_RE = DEFINITION_SOURCE_RE
_REF_RE = ANY_REF_RE

_SEPARATED_DIGITS = re.compile(r"(?<=\d)[^\w]+(?=\d)")


@dataclass(frozen=True)
class Target:
    """What to forget: exactly one of a user, an evidence id, a text, or expired items and memory
    pages (retention)."""

    user: str | None = None
    evidence: str | None = None
    match: str | None = None
    expired: tuple[str, ...] = ()  # evidence ids past their retention (pipeline/retention.py)
    expired_pages: tuple[str, ...] = ()  # memory page paths past their retention

    @property
    def kind(self) -> str:
        return "user" if self.user else "evidence" if self.evidence else "match" if self.match else "retention"


@dataclass
class Plan:
    op: str
    kind: str
    base: str  # HEAD when the forgetting started
    items: dict[str, str]  # forgotten evidence id -> the tombstone's fresh id
    redacted: list[str]  # evidence ids whose lines holding the text are redacted (--match)
    deleted_pages: list[str]
    edited_pages: list[str]
    scopes: list[str]
    fingerprints: Fingerprints
    redacted_hashes: dict[str, str] = field(default_factory=dict)  # redacted item id -> its new content hash
    files: dict[str, bytes | None] = field(default_factory=dict)  # the HEAD change: path -> new content (None deletes)
    texts: list[str] = field(default_factory=list)  # the material in the clear: memory only, never written
    target: str = ""  # target_digest of what was asked for (a re-run finds its unfinished forgetting)
    indexed: bool = False  # an index served when the forgetting began (so purging rebuilds one)

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.op,
            "kind": self.kind,
            "base": self.base,
            "evidence": sorted(self.items),
            "redacted": sorted(self.redacted),
            "deleted_pages": sorted(self.deleted_pages),
            "edited_pages": sorted(self.edited_pages),
        }


# ---- planning ------------------------------------------------------------------------------


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", "replace")


def _page_files(repo: Repo, commit: pygit2.Commit) -> dict[str, pygit2.Oid]:
    return {p: o for p, o in repo.tree_files(commit, PAGE_FOLDERS).items() if p.endswith(".md")}


def _cites(m: re.Match[str], forgotten: set[str], redacted: dict[str, set[int]]) -> bool:
    """Whether the footnote ``m`` cites a forgotten item, or a redacted line of an item."""
    ident = m.group(2)
    if ident in forgotten:
        return True
    if ident not in redacted or not m.group(3):
        return False
    first = int(m.group(3))
    return any(first <= n <= int(m.group(4) or first) for n in redacted[ident])


def drop_claims(text: str, forgotten: set[str], match: str | None = None, redacted: dict[str, set[int]] | None = None) -> str:
    """``text`` without the lines that cite a forgotten item (claims, footnotes, facts), that
    cite a line of an item that ``--match`` redacts (``redacted``: id -> line numbers; its quote
    no longer holds), or that hold ``match``; footnotes left unreferenced go too; ``sources``
    lists lose the ids."""
    lines = text.split("\n")
    labels = {m.group(1) for line in lines if (m := _FOOTNOTE_RE.match(line)) and _cites(m, forgotten, redacted or {})}
    wanted = normalise(match) if match else None
    kept: list[str] = []
    for line in lines:
        refs = set(_REF_RE.findall(line))
        if refs & labels or (wanted and wanted in normalise(line)):
            continue
        if any(ident in line for ident in forgotten):
            if line.startswith("sources:"):
                line = re.sub(r"\s*,?\s*\b(" + "|".join(map(re.escape, sorted(forgotten))) + r")\b\s*,?", ",", line)
                line = (
                    re.sub(r"\[\s*,+\s*", "[", re.sub(r"\s*,+\s*\]", "]", re.sub(r",\s*,+", ",", line)))
                    .replace(",", ", ")
                    .replace(",  ", ", ")
                )
            elif line.startswith("facts:"):
                line = _drop_facts(line, forgotten)
            else:
                continue
        kept.append(line)
    used = {label for line in kept if not _FOOTNOTE_RE.match(line) for label in _REF_RE.findall(line)}
    kept = [line for line in kept if not ((label := definition_label(line)) is not None and label not in used)]
    return "\n".join(kept)


def _drop_facts(line: str, forgotten: set[str]) -> str:
    """The frontmatter ``facts:`` flow list without the facts whose source is forgotten."""
    import yaml

    facts = yaml.safe_load(line.split(":", 1)[1]) or []
    kept = [f for f in facts if not any(ident in str(f.get("source", "")) for ident in forgotten)]
    from kb.page import render_frontmatter

    rendered = render_frontmatter({"facts": kept}).strip().splitlines()
    return next((x for x in rendered if x.startswith("facts:")), "facts: []")


def _redact_lines(text: str, match: str) -> str:
    wanted = normalise(match)
    return "\n".join(_redact_line(line, match) if wanted in normalise(line) else line for line in text.split("\n"))


def _redact_line(line: str, match: str) -> str:
    replaced = re.sub(re.escape(match), SCRUBBED, line, flags=re.IGNORECASE)
    return replaced if replaced != line else SCRUBBED


def _matching_lines(text: str, match: str) -> set[int]:
    wanted = normalise(match)
    return {n for n, line in enumerate(text.split("\n"), 1) if wanted in normalise(line)}


@dataclass
class _Selection:
    items: list[LedgerEntry] = field(default_factory=list)
    redacted: list[str] = field(default_factory=list)
    lines: dict[str, set[int]] = field(default_factory=dict)  # redacted item -> its redacted line numbers
    scopes: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    files: dict[str, bytes | None] = field(default_factory=dict)
    texts: list[str] = field(default_factory=list)


def _select(repo: Repo, head: pygit2.Commit, entries: list[LedgerEntry], pages: dict[str, pygit2.Oid], target: Target) -> _Selection:
    """The items and pages ``target`` names at HEAD (and, for --match, the redacted items)."""
    out = _Selection()
    if target.user:
        scope = user_scope(target.user)
        out.scopes = [scope]
        out.items = [e for e in entries if e.scope == scope]
        out.deleted = sorted(p for p in pages if p.startswith(folder_for_scope(scope)))
        if not out.items and not out.deleted:
            raise NotFoundError(f"no evidence and no pages for user {target.user!r}", hint="check the id with `kb evidence list`")
    elif target.evidence:
        out.items = [find_entry(entries, target.evidence)]
    elif target.expired or target.expired_pages:
        out.items = [find_entry(entries, ident) for ident in target.expired]
        out.deleted = sorted(p for p in target.expired_pages if p in pages)
    else:
        match = target.match or ""
        if len(normalise(match)) < MIN_TEXT:
            raise UsageError(f"--match needs at least {MIN_TEXT} characters", hint="give the exact text to forget")
        out.texts.append(match)
        for e in entries:
            content = _text(repo.read_at(head, e.path))
            if lines := _matching_lines(content, match):
                out.redacted.append(e.id)
                out.lines[e.id] = lines
                out.files[e.path] = _redact_lines(content, match).encode("utf-8")
    for e in out.items:
        out.texts.append(_text(repo.read_at(head, e.path)))
        out.files[e.path] = None
    for path in out.deleted:
        out.texts.append(_text(repo.read_blob(pages[path])))
        out.files[path] = None
    return out


def plan_forget(repo: Repo, target: Target, key: bytes) -> Plan:
    """What ``target`` removes at HEAD, and its material (pure: writes nothing)."""
    head = repo.head()
    if head is None:
        raise NotFoundError("the repository has no commits yet", hint="there is nothing to forget in an empty repository")
    entries = [e for e in ledger_at(repo, head) if e.path]
    pages = _page_files(repo, head)
    chosen = _select(repo, head, entries, pages, target)
    files, texts = chosen.files, chosen.texts
    forgotten = {e.id for e in chosen.items}
    unlinked = _link_pattern([p.removesuffix(".md") for p in chosen.deleted])
    edited: list[str] = []
    if target.match:  # an L0, a fact or an index entry holding the text is rewritten, not dropped
        holds = holder(_short_values(repo, head, entries, files, [], target), normalise(target.match))
        edited += _remove_derived(repo, head, pages, files, [], holds)
    for path, oid in sorted(pages.items()):
        if files.get(path, b"") is None:
            continue
        old = _text(repo.read_blob(oid))
        new = drop_claims(_text(files[path]) if path in files else old, forgotten, target.match, chosen.lines)
        if unlinked is not None:  # an index's entry for a deleted page, a line linking to it
            new = "\n".join(line for line in new.split("\n") if not unlinked.search(line))
        if new != old:
            edited += [] if path in edited else [path]
            files[path] = new.encode("utf-8")
            if not target.match:  # with --match only the text itself is the material
                texts.extend(sorted(set(old.split("\n")) - set(new.split("\n"))))
    if not files:
        raise NotFoundError("nothing to forget: no evidence or page holds it", hint="check the id or the text")
    # short values come from the forgotten evidence only: a page's own words (its template, its
    # labels) are no one's data, and what a page says of the evidence the evidence says
    said = [_text(repo.read_at(head, e.path)) for e in chosen.items]
    short = _short_values(repo, head, entries, files, said, target)
    if short and not target.match:
        edited += _remove_derived(repo, head, pages, files, texts, holder(short))
    # What stays says it too, so it is not the forgotten material: a date or a template phrase a
    # user's items share with others, a run of words another sentence shares with --match's text.
    kept = {e.path for e in entries} | set(pages)
    retained = [_text(files[p]) if p in files else _text(repo.read_at(head, p)) for p in sorted(kept) if files.get(p, b"") is not None]
    prints = fingerprint(key, texts, retained)
    if target.match:  # the whole text is always material, even when what stays shares every window of it
        prints = prints.with_whole(normalise(target.match))
    prints = prints.with_values(short)
    renames = {e.id: "ev-" + secrets.token_hex(8) for e in chosen.items}
    hashes = {e.id: hashlib.sha256(files[e.path] or b"").hexdigest() for e in entries if e.id in chosen.redacted}
    op = "fg-" + secrets.token_hex(8)
    return Plan(
        op,
        target.kind,
        str(head.id),
        renames,
        chosen.redacted,
        chosen.deleted,
        edited,
        chosen.scopes,
        prints,
        hashes,
        files,
        texts,
        target_digest(key, target),
        _has_index(repo),
    )


def _short_values(
    repo: Repo, head: pygit2.Commit, entries: list[LedgerEntry], files: dict[str, bytes | None], texts: list[str], target: Target
) -> set[str]:
    """The short values that are material (kb.forgotten.values): those of the forgotten text that
    no retained source holds (evidence that stays, the ledger, the configuration; a page, a
    record or any other file holding one copies it); for --match, the digits of a text that is
    a number."""
    if target.match:
        digits = re.sub(r"\D", "", target.match)
        shaped = re.fullmatch(r"[+\d\s().\-/]+", target.match) and len(digits) >= MIN_DIGITS
        return {"d:" + digits} if shaped else set()
    sources = [
        _text(files[e.path]) if e.path in files else _text(repo.read_at(head, e.path))
        for e in entries
        if files.get(e.path, b"") is not None
    ]
    sources += [_text(repo.read_at(head, path)) for path in (LEDGER_PATH, CONFIG_FILE)]
    return forgotten_values(texts, sources)


def holder(short: set[str], whole: str = "") -> Holds:
    """Whether a text holds one of the short values ``short`` or the normalised text ``whole``:
    compared in the clear, in memory (planning reads every page; no digest is needed), after a
    plain substring test that rules out most lines at once."""
    literals = [v.split(":", 1)[1] for v in short]

    def holds(text: str) -> bool:
        if whole and whole in normalise(text):
            return True
        folded = unicodedata.normalize("NFKC", text).casefold()
        joined = _SEPARATED_DIGITS.sub("", folded)
        if not any(lit in folded or lit in joined for lit in literals):
            return False
        return bool(values(unicodedata.normalize("NFKC", text), True) & short)

    return holds


def _remove_derived(
    repo: Repo, head: pygit2.Commit, pages: dict[str, pygit2.Oid], files: dict[str, bytes | None], texts: list[str], holds: Holds
) -> list[str]:
    """Derived text holding a forgotten value rewritten (derived.py): pages first, then their
    folder indexes (an entry shows its page's new L0), then consolidation records. Changes
    ``files`` and ``texts``; returns the paths it changed that nothing else had."""
    changed: list[str] = []
    summaries: dict[str, str] = {}

    def current(path: str, oid: pygit2.Oid) -> str:
        return _text(files[path]) if path in files else _text(repo.read_blob(oid))

    def put(path: str, old: str, new: str) -> None:
        if new == old:
            return
        if path not in files:
            changed.append(path)
        files[path] = new.encode("utf-8")
        texts.extend(sorted(set(old.split("\n")) - set(new.split("\n"))))

    for path, oid in sorted(pages.items(), key=lambda item: item[0].endswith("/index.md")):
        if files.get(path, b"") is None:
            continue
        old = current(path, oid)
        new, summary = clean_page(old, holds)
        if summary is not None:
            summaries[path.removesuffix(".md")] = summary
        if path.endswith("/index.md"):
            new = clean_index(new, summaries, holds)
        put(path, old, new)
    for path, oid in sorted(repo.tree_files(head, (RECORDS_DIR,)).items()):
        if path.endswith(".json") and files.get(path, b"") is not None:
            old = current(path, oid)
            scrubbed = scrub_json(old, holds)
            put(path, old, scrubbed if scrubbed is not None else old)
    return changed


def _link_pattern(page_ids: list[str]) -> re.Pattern[str] | None:
    """A wikilink to one of ``page_ids`` (``[[id]]``, ``[[id#section]]``, ``[[id|label]]``)."""
    if not page_ids:
        return None
    return re.compile(r"\[\[(?:" + "|".join(map(re.escape, sorted(page_ids))) + r")(?:\.md)?(?:[#|][^\]]*)?\]\]")


def _has_index(repo: Repo) -> bool:
    from kb.retrieval.store import index_store

    return index_store(repo).current() is not None


def target_digest(key: bytes, target: Target) -> str:
    """The target as a keyed digest: a record names what it forgot without saying it."""
    expired = ",".join(sorted(target.expired) + sorted(target.expired_pages))
    value = f"{target.kind}\0{target.user or target.evidence or normalise(target.match or '') or expired}"
    return hashlib.blake2b(value.encode("utf-8"), key=key, digest_size=16).hexdigest()
