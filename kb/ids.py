"""Evidence ids: ``ev-`` plus the first 16 hex digits of a SHA-256 over kind, scope and content.

The one definition of their pattern: the ledger, citations, page headers, the checks and the
agents' tool schemas all use it.
"""

from __future__ import annotations

import hashlib
import re

EVIDENCE_ID_PATTERN = r"ev-[0-9a-f]{16}"
EVIDENCE_ID_RE = re.compile(rf"^{EVIDENCE_ID_PATTERN}\Z")


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def evidence_id(kind: str, scope: str, content: str) -> str:
    return "ev-" + sha256_hex(f"{kind}\0{scope}\0{content}")[:16]


def is_evidence_id(text: str) -> bool:
    return EVIDENCE_ID_RE.match(text) is not None
