"""No personal data of a protected kind (policy ``mask`` or ``no-copy``) in pages."""

from __future__ import annotations

from ci.findings import Finding
from ci.selection import Selection
from ci.snapshot import Snapshot
from kb.privacy import find_personal_data, fingerprint

HINT = (
    "remove it from the page (pages never carry it; the evidence keeps it); if it is not personal "
    "data, allow its fingerprint under `privacy: {allow: [...]}` in kb.config.yaml"
)


def check(snapshot: Snapshot, selection: Selection) -> list[Finding]:
    policy = snapshot.config.privacy
    protected = policy.kinds("mask", "no-copy")
    out: list[Finding] = []
    if not protected:
        return out
    for path in selection.pages:
        try:
            text = (snapshot.root / path).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # reported as page.parse
        for hit in find_personal_data(text, protected):
            mark = fingerprint(hit.kind, hit.value)
            if mark in policy.allow:
                continue
            line = text.count("\n", 0, hit.start) + 1
            action = getattr(policy, hit.kind)
            message = f"personal data in a page: {hit.kind} (fingerprint {mark}; policy {action})"
            out.append(Finding(path, line, "privacy.found", message, hint=HINT))
    return out
