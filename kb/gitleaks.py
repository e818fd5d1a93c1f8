"""gitleaks' published rules, applied to text: the maintained list of credential formats.

The rules are data (``kb/gitleaks.json``, converted from gitleaks' ``config/gitleaks.toml`` by
``bench/gitleaks_rules.py``; its header names the source commit and carries the MIT licence).
They are applied as gitleaks applies them: a rule runs only when one of its keywords occurs in
the lowercased text; the secret is the rule's secret group, else the first non-empty group,
else the whole match; a rule with an entropy threshold needs the secret's Shannon entropy above
it, and a generic rule also needs a digit in it; the rule's own allow-lists (on the secret, the
match or the line) and the global one (regexes, stopwords) drop a candidate.

Go's regular expressions differ from Python's ``re`` (flags switched on mid-pattern, such as
``\\b(p8e-(?i)[a-z0-9]{32})``, POSIX classes such as ``[[:alnum:]]``); the ``regex`` package's
version 1 reads them as Go does, so no pattern is rewritten.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any


@dataclass(frozen=True)
class Allow:
    target: str  # "secret", "match" or "line"
    regexes: tuple[Any, ...]
    stopwords: tuple[str, ...]

    def allows(self, secret: str, match: str, line: str) -> bool:
        text = {"secret": secret, "match": match, "line": line}[self.target]
        if any(r.search(text) for r in self.regexes):
            return True
        lowered = secret.lower()
        return any(word in lowered for word in self.stopwords)


@dataclass(frozen=True)
class PublishedRule:
    id: str
    pattern: Any  # a compiled ``regex`` pattern
    keywords: tuple[str, ...]
    entropy: float
    group: int
    allow: tuple[Allow, ...]
    prefixed: bool  # the pattern began with a lazy name prefix, matched separately (see ``_compile``)

    @property
    def kind(self) -> str:
        return self.id.replace("-", " ")

    @property
    def by_keyword(self) -> bool:
        """The value is found by a keyword next to it (``adafruit ... = VALUE``, the generic
        ``key = VALUE``), not by a format of its own: it may be a name or code."""
        return self.id.startswith("generic") or self.prefixed or "[\\w.-]{0,50}?" in self.pattern.pattern


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[PublishedRule, ...]
    allow: Allow
    commit: str
    # each keyword's first two characters -> the keywords and the rules (by index) they let run
    keywords: dict[str, tuple[tuple[str, tuple[int, ...]], ...]]

    def candidates(self, lowered: str) -> list[PublishedRule]:
        """The rules one of whose keywords occurs in ``lowered``, in their order. A short text
        (a chat turn) is first cut into its pairs of characters, so that only the keywords
        starting with one of them are looked for."""
        heads = {lowered[i : i + 2] for i in range(len(lowered) - 1)} if len(lowered) < 4096 else self.keywords.keys()
        present = {
            i for head in heads & self.keywords.keys() for keyword, indices in self.keywords[head] if keyword in lowered for i in indices
        }
        return [self.rules[i] for i in sorted(present)]


def _keyword_index(rules: list[PublishedRule]) -> dict[str, tuple[tuple[str, tuple[int, ...]], ...]]:
    index: dict[str, list[int]] = {}
    for i, rule in enumerate(rules):
        for keyword in rule.keywords:
            index.setdefault(keyword, []).append(i)
    heads: dict[str, list[tuple[str, tuple[int, ...]]]] = {}
    for keyword, indices in index.items():
        heads.setdefault(keyword[:2], []).append((keyword, tuple(indices)))
    return {head: tuple(entries) for head, entries in heads.items()}


def _allow(entry: dict[str, Any]) -> Allow:
    import regex

    return Allow(
        entry.get("target", "secret"),
        tuple(regex.compile(r, regex.V1) for r in entry.get("regexes", [])),
        tuple(entry.get("stopwords", [])),
    )


# Most keyword rules begin with the name the keyword is part of, matched lazily: ``[\w.-]{0,50}?``
# before ``(?:adafruit)``. A backtracking engine tries those 51 lengths at every position of the
# text (RE2, gitleaks' engine, does not), which made the generic rule alone scan documentation at
# 50 KB/s. Dropping the prefix changes where a match starts, never whether there is one (it is
# lazy and may be empty); the name is put back by ``_name_before`` for the allow-lists that read
# the whole match.
_LAZY_NAME = "(?i)[\\w.-]{0,50}?"
_NAME_CHAR = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def _compile(pattern: str) -> tuple[Any, bool]:
    import regex

    if pattern.startswith(_LAZY_NAME):
        return regex.compile("(?i)" + pattern[len(_LAZY_NAME) :], regex.V1), True
    return regex.compile(pattern, regex.V1), False


def _name_before(text: str, start: int, floor: int) -> int:
    """Where the name ending at ``start`` begins (at most 50 characters back, not before ``floor``)."""
    begin = start
    while begin > max(floor, start - 50) and (text[begin - 1] in _NAME_CHAR or text[begin - 1].isalnum()):
        begin -= 1
    return begin


@cache
def load_rules() -> RuleSet:
    """The rule set shipped with kb, compiled once per process."""
    data = json.loads(resources.files("kb").joinpath("gitleaks.json").read_text(encoding="utf-8"))
    rules = []
    for r in data["rules"]:
        pattern, prefixed = _compile(r["regex"])
        allow = tuple(_allow(a) for a in r.get("allow", []))
        rules.append(
            PublishedRule(r["id"], pattern, tuple(r["keywords"]), float(r.get("entropy", 0.0)), int(r.get("group", 0)), allow, prefixed)
        )
    return RuleSet(tuple(rules), _allow({"target": "secret", **data["allow"]}), data["commit"], _keyword_index(rules))


def shannon(text: str) -> float:
    if not text:
        return 0.0
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _secret(match: Any, group: int) -> tuple[str, int]:
    if group:
        return match.group(group) or "", match.start(group)
    for index in range(1, (match.re.groups or 0) + 1):
        if match.group(index):
            return match.group(index), match.start(index)
    return match.group(0), match.start()


def _line(text: str, start: int, end: int) -> str:
    return text[text.rfind("\n", 0, start) + 1 : (text.find("\n", end) + 1 or len(text) + 1) - 1]


def scan(text: str) -> Iterator[tuple[PublishedRule, int, str]]:
    """``(rule, start, secret)`` for every candidate the published rules find."""
    ruleset = load_rules()
    lowered = text.lower()
    for rule in ruleset.candidates(lowered):
        floor = 0
        for match in rule.pattern.finditer(text):
            begin = _name_before(text, match.start(), floor) if rule.prefixed else match.start()
            floor = match.end()
            secret, start = _secret(match, rule.group)
            if not secret:
                continue
            if rule.entropy and (
                shannon(secret) <= rule.entropy or (rule.id.startswith("generic") and not any(c.isdigit() for c in secret))
            ):
                continue
            line = _line(text, begin, match.end())
            if any(a.allows(secret, text[begin : match.end()], line) for a in rule.allow) or ruleset.allow.allows(secret, secret, line):
                continue
            yield rule, start, secret
