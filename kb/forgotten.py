"""What is being forgotten: the deny-list every read consults, and the keyed fingerprints of
forgotten text that the scans look for.

``kb forget`` writes a deny entry first, before it changes anything else, so that search, read,
grep, memory context, ``kb evidence show`` and the agents' tools stop returning the material at
once, while the history rewrite and the index rebuild are still to come. The entry lives in the
main repository's ``.kb/forget/denied.json`` (local, git-ignored, shared by the work branches'
worktrees) and is removed when the forgetting completes: by then nothing it names exists.

Text is never stored in the clear: a piece of forgotten text is known by keyed BLAKE2b digests of
its normalised windows (``WINDOW`` characters, or the whole text when shorter), with a random key
kept in ``.kb/forget/key``. Without that key a digest confirms no guess; with it, a scan finds any
copy of at least one window, inside longer text or across a different spacing or case.

Short values are known by the digests of the values themselves (``values``, kept under window
size 0): numbers of at least ``MIN_DIGITS`` digits (compared digits-only, so a phone written with
other separators is the same value), e-mail addresses, identifiers mixing letters and digits, and
capitalised names not opening a sentence (single words and runs of up to ``MAX_RUN`` of them),
minus every value and word (in any case) that retained text holds. A scan digests every number,
address, identifier, word (in any case) and run of words of the text it reads, so a phone number
or an employer's name copied on its own into a note or a summary is found although it fills no
window.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import secrets
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb.repo import STATE_DIR, atomic_write
from kb.scopes import scope_for_path

if TYPE_CHECKING:
    from kb.repo import Repo

FORGET_DIR = "forget"
DENIED_FILE = "denied.json"
KEY_FILE = "key"
WINDOW = 24  # characters of normalised text per fingerprint window
MIN_TEXT = 4  # shorter text cannot be forgotten by content: it would match everywhere
MIN_DIGITS = 5  # a shorter number (a year, a count) is not a value of its own
MAX_RUN = 4  # words in the longest run of capitalised names digested as one value
VALUES = 0  # the window size under which the value digests are kept
_SPACE = re.compile(r"\s+")
_EMAIL_RE = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_NUMBER_RE = re.compile(r"(?<![^\W_])\+?\d+(?:(?:[ .\-/]|\) ?| ?\()\d+)*(?![^\W_])")
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}(?::\d{2})?")
_WORD_RE = re.compile(r"[^\W_](?:[\w'\u2019-]*[^\W_])?")
_OPENING = ".!?\"'\u201c\u2018([{*_>#-"  # what may stand before a word that opens a sentence or item


def _numbers(text: str) -> Iterator[str]:
    """Digit strings of the number runs in ``text`` and of their contiguous parts (a phone's
    local part, a card's groups), each of ``MIN_DIGITS`` digits or more; dates and times are not
    values (every log repeats them)."""
    for m in _NUMBER_RE.finditer(text):
        if _DATE_RE.fullmatch(m.group(0)):
            continue
        groups = re.findall(r"\d+", m.group(0))[:8]
        for i in range(len(groups)):
            for j in range(i + 1, len(groups) + 1):
                digits = "".join(groups[i:j])
                if len(digits) >= MIN_DIGITS:
                    yield digits


def _opens(text: str, start: int) -> bool:
    """Whether the word at ``start`` opens a sentence, a line or a list item."""
    before = text[max(0, start - 40) : start].rstrip(" \t")  # bounded: a long item has many words
    while before and before[-1] in _OPENING and before[-1] not in ".!?":
        before = before[:-1].rstrip(" \t")
    return not before or before[-1] in ".!?\n"


def values(text: str, anywhere: bool = False) -> set[str]:
    """The short values ``text`` holds, in their compared form (module docstring). Forgotten
    text yields names only where capitalised inside a sentence; with ``anywhere`` (a scan, and
    what stays) every word and run of words counts, in any case, and the parts of a word joined
    by ``-`` or ``_``: what is compared against material found that way may hold it in any form,
    and counting more of what stays removes nothing that should stay."""
    out = {"d:" + digits for digits in _numbers(text)}
    out.update("e:" + m.group(0).casefold() for m in _EMAIL_RE.finditer(text))
    run: list[str] = []
    end = -1
    for m in _WORD_RE.finditer(text):
        word = m.group(0)
        if any(c.isdigit() for c in word):
            if len(word) >= 6 and any(c.isalpha() for c in word):
                out.add("i:" + word.casefold())
            run, end = [], -1
            continue
        if anywhere:
            out.update("w:" + part.casefold() for part in re.split(r"[-_'\u2019]", word) if part)
        elif not (word[0].isupper() and len(word) >= 3 and not _opens(text, m.start())):
            run, end = [], -1
            continue
        run = (run if end >= 0 and text[end : m.start()] == " " else [])[-(MAX_RUN - 1) :] + [word.casefold()]
        end = m.end()
        out.update("w:" + " ".join(run[i:]) for i in range(len(run)))
    return out


def normalise(text: str) -> str:
    """The form texts are compared in: NFKC, case-folded, runs of white space as one space."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def main_root(repo: Repo) -> Path:
    """The main repository's folder, also from a work branch's worktree (whose ``.git`` points
    into ``<main>/.git/worktrees/<name>``)."""
    gitdir = Path(repo.git.path.rstrip("/"))
    if gitdir.parent.name == "worktrees" and gitdir.parent.parent.name == ".git":
        return gitdir.parent.parent.parent
    return repo.root


def forget_dir(repo: Repo) -> Path:
    path = main_root(repo) / STATE_DIR / FORGET_DIR
    path.mkdir(parents=True, exist_ok=True)
    return path


def load_key(repo: Repo, create: bool = False) -> bytes | None:
    path = forget_dir(repo) / KEY_FILE
    if path.is_file():
        return path.read_bytes()
    if not create:
        return None
    key = secrets.token_bytes(32)
    atomic_write(path, key)
    os.chmod(path, 0o600)
    return key


@dataclass(frozen=True)
class Fingerprints:
    """Keyed digests of forgotten text, by window length."""

    key: bytes
    digests: dict[int, frozenset[str]] = field(default_factory=dict)

    @functools.cached_property
    def _keyed(self) -> Any:
        return hashlib.blake2b(key=self.key, digest_size=16)

    def digest(self, text: str) -> str:
        hasher = self._keyed.copy()  # the key is set up once, not per window
        hasher.update(text.encode("utf-8"))
        return str(hasher.hexdigest())

    def windows(self, normal: str, size: int) -> list[str]:
        if len(normal) <= size:
            return [normal] if len(normal) == size else []
        return [normal[i : i + size] for i in range(len(normal) - size + 1)]

    def found_in(self, text: str) -> bool:
        """Whether ``text`` holds a window of forgotten text (after normalising) or one of its
        short values."""
        if not self.digests:
            return False
        wanted_values = self.digests.get(VALUES)
        if wanted_values and any(self.digest(v) in wanted_values for v in values(unicodedata.normalize("NFKC", text), True)):
            return True
        normal = normalise(text)
        for size, wanted in self.digests.items():
            if size == VALUES:
                continue
            # each distinct window digested once (a ledger, a log, a template repeats many)
            if any(self.digest(w) in wanted for w in set(self.windows(normal, size))):
                return True
        return False

    def with_whole(self, normal: str) -> Fingerprints:
        """These fingerprints and the digest of the whole normalised text ``normal`` (a window of
        its own length), so that a copy of all of it is found whatever the windows left."""
        digests = dict(self.digests)
        digests[len(normal)] = digests.get(len(normal), frozenset()) | {self.digest(normal)}
        return Fingerprints(self.key, digests)

    def with_values(self, found: set[str]) -> Fingerprints:
        """These fingerprints and the digests of the short values ``found`` (``values``)."""
        digests = dict(self.digests)
        digests[VALUES] = digests.get(VALUES, frozenset()) | {self.digest(v) for v in found}
        return Fingerprints(self.key, {size: d for size, d in digests.items() if d})

    def to_json(self) -> dict[str, list[str]]:
        return {str(size): sorted(d) for size, d in sorted(self.digests.items())}


def fingerprint(key: bytes, texts: Sequence[str], retained: Sequence[str] = ()) -> Fingerprints:
    """Fingerprints of ``texts`` minus every window that ``retained`` text also holds (what stays
    is not forgotten: a date or a template phrase it shares must not count as a copy).

    The windows are compared in the clear, in memory, and only those left are digested: digesting
    every window of every retained page and item (17 million of them in a repository of 10,000
    pages) took minutes."""
    probe = Fingerprints(key)
    by_size: dict[int, set[str]] = {}
    for text in texts:
        normal = normalise(text)
        if len(normal) < MIN_TEXT:
            continue
        size = min(WINDOW, len(normal))
        by_size.setdefault(size, set()).update(probe.windows(normal, size))
    for text in retained:
        normal = normalise(text)
        for size, wanted in by_size.items():
            if wanted and len(normal) >= size:
                wanted.difference_update(normal[i : i + size] for i in range(len(normal) - size + 1))
    return Fingerprints(key, {size: frozenset(probe.digest(w) for w in d) for size, d in by_size.items() if d})


def forgotten_values(texts: Sequence[str], retained: Sequence[str] = ()) -> set[str]:
    """The short values of ``texts`` that no ``retained`` text holds."""
    found: set[str] = set()
    for text in texts:
        found |= values(unicodedata.normalize("NFKC", text))
    for text in retained:
        if not found:
            break
        found -= values(unicodedata.normalize("NFKC", text), True)
    return found


def fingerprints_from_json(key: bytes, data: dict[str, list[str]]) -> Fingerprints:
    return Fingerprints(key, {int(size): frozenset(d) for size, d in data.items()})


@dataclass(frozen=True)
class Denied:
    """What reads must not return while a forgetting is under way (all of it, for every reader)."""

    scopes: frozenset[str] = frozenset()
    evidence: frozenset[str] = frozenset()
    paths: frozenset[str] = frozenset()
    text: Fingerprints | None = None

    def __bool__(self) -> bool:
        return bool(self.scopes or self.evidence or self.paths or (self.text and self.text.digests))

    def hides_path(self, path: str) -> bool:
        return path in self.paths or scope_for_path(path) in self.scopes

    def hides_evidence(self, evidence_id: str, scope: str) -> bool:
        return evidence_id in self.evidence or scope in self.scopes

    def hides_text(self, text: str) -> bool:
        return self.text is not None and self.text.found_in(text)


def _denied_path(repo: Repo) -> Path:
    return forget_dir(repo) / DENIED_FILE


def read_entries(repo: Repo) -> dict[str, dict[str, Any]]:
    """The deny entries by forgetting id."""
    path = main_root(repo) / STATE_DIR / FORGET_DIR / DENIED_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return dict(data) if isinstance(data, dict) else {}


def write_entries(repo: Repo, entries: dict[str, dict[str, Any]]) -> None:
    atomic_write(_denied_path(repo), (json.dumps(entries, sort_keys=True, indent=1) + "\n").encode("utf-8"))


def load_denied(repo: Repo) -> Denied:
    """Everything every pending forgetting hides (empty when none is under way)."""
    entries = read_entries(repo)
    if not entries:
        return Denied()
    scopes: set[str] = set()
    evidence: set[str] = set()
    paths: set[str] = set()
    digests: dict[int, set[str]] = {}
    for entry in entries.values():
        scopes.update(entry.get("scopes", ()))
        evidence.update(entry.get("evidence", ()))
        paths.update(entry.get("paths", ()))
        for size, values in entry.get("text", {}).items():
            digests.setdefault(int(size), set()).update(values)
    key = load_key(repo)
    text = Fingerprints(key, {s: frozenset(d) for s, d in digests.items()}) if key and digests else None
    return Denied(frozenset(scopes), frozenset(evidence), frozenset(paths), text)


def is_hidden(repo: Repo, path: str, data: bytes | str) -> bool:
    """Whether a pending forgetting hides the page (or file) ``path`` with content ``data``."""
    denied = load_denied(repo)
    if not denied:
        return False
    text = data if isinstance(data, str) else data.decode("utf-8", "replace")
    return denied.hides_path(path) or denied.hides_text(text)


def is_evidence_hidden(repo: Repo, evidence_id: str, scope: str, content: str) -> bool:
    """Whether a pending forgetting hides an evidence item (by id, by scope, or by its text)."""
    denied = load_denied(repo)
    return bool(denied) and (denied.hides_evidence(evidence_id, scope) or denied.hides_text(content))
