"""No secrets (API keys, tokens, private keys, passwords in clear) in pages or evidence."""

from __future__ import annotations

from collections.abc import Collection

from ci.findings import Finding
from ci.selection import Selection
from ci.snapshot import Snapshot
from kb.secrets import find_secrets

HINT = (
    "remove it and rotate the credential if it was ever committed; if it is not a secret, "
    "allow its fingerprint under `secrets: {allow: [...]}` in kb.config.yaml"
)


def _scan(path: str, text: str, allow: Collection[str]) -> list[Finding]:
    return [
        Finding(path, hit.line, "secret.found", f"looks like a secret: {hit.kind} (fingerprint {hit.fingerprint})", hint=HINT)
        for hit in find_secrets(text, allow)
    ]


def check(snapshot: Snapshot, selection: Selection) -> list[Finding]:
    out: list[Finding] = []
    allow = snapshot.config.secrets.allow
    for path in selection.pages:
        try:
            text = (snapshot.root / path).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # reported as page.parse
        out.extend(_scan(path, text, allow))
    paths = (
        [e.path for e in snapshot.ledger]
        if selection.evidence_paths is None
        else [p for p in selection.evidence_paths if p.endswith(".md")]
    )
    for path in paths:
        file = snapshot.root / path
        if file.is_file():
            out.extend(_scan(path, file.read_text(encoding="utf-8", errors="replace"), allow))
    return out
