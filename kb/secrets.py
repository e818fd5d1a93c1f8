"""Secret detection shared by ``evidence add`` (refuses) and ``kb check`` (reports).

Patterns for credentials that must never be stored in a knowledge repository: cloud and
model-provider API keys, tokens, private keys and passwords written in clear.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("private key", re.compile(r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |PGP |ENCRYPTED )?PRIVATE KEY( BLOCK)?-----")),
    ("AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("OpenAI API key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}\b")),
    ("Anthropic API key", re.compile(r"\bsk-ant-[A-Za-z0-9_\-]{20,}\b")),
    ("GitHub token", re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}\b|\bgithub_pat_[A-Za-z0-9_]{40,}\b")),
    ("Google API key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}\b")),
    ("Slack token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b")),
    ("Stripe secret key", re.compile(r"\b[rs]k_live_[A-Za-z0-9]{20,}\b")),
    (
        "password in clear",
        re.compile(
            r"(?i)\b(?:password|passwd|pwd|passphrase|secret[_-]?key|api[_-]?key|access[_-]?token)\b"
            r"[\"']?\s*[:=]\s*[\"']?(?!\*{3,}|<|\$\{|x{3,})([^\s\"',;]{6,})"
        ),
    ),
)


@dataclass(frozen=True)
class SecretHit:
    kind: str
    line: int  # 1-based
    column: int


_ANY = re.compile("|".join(f"(?:{p.pattern.removeprefix('(?i)')})" for _, p in PATTERNS), re.IGNORECASE)


_MARKERS = (
    "private key",
    "akia",
    "asia",
    "sk-",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "aiza",
    "xox",
    "k_live_",
    "pass",
    "pwd",
    "secret",
    "key",
    "token",
)


def find_secrets(text: str) -> list[SecretHit]:
    # Substring markers, then one combined pass, rule out almost every file cheaply; only a
    # file with a candidate is scanned pattern by pattern (case-sensitively where it applies).
    lowered = text.lower()
    if not any(marker in lowered for marker in _MARKERS) or not _ANY.search(text):
        return []
    hits = []
    for kind, pattern in PATTERNS:
        for match in pattern.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            column = match.start() - (text.rfind("\n", 0, match.start()) + 1) + 1
            hits.append(SecretHit(kind, line, column))
    return sorted(hits, key=lambda h: (h.line, h.column, h.kind))
