"""What a kb pull request says, so that a person can review it from the page alone: the evidence,
each changed page with its summary (L0), a table of the claims added, changed and removed with
what they cite, who proposed it, and the gate's result. Plus its labels (the scope) and a marker
of its inputs (the evidence ids), by which a pull request a person closed is recognised.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import pygit2

from ci.gate import GateReport
from kb.errors import FormatError
from kb.page import parse_page
from kb.repo import Repo, diff_trees
from kb.scopes import PAGE_FOLDERS, scope_for_path
from pipeline.forge.base import KB_LABEL

INPUTS_RE = re.compile(r"<!-- kb-inputs ([0-9a-f]{16}) -->")
MAX_ROWS = 60


@dataclass(frozen=True)
class ClaimRow:
    change: str  # added | changed | removed
    path: str
    line: int
    text: str
    cites: str


def inputs_key(evidence: tuple[str, ...]) -> str:
    return hashlib.sha256(",".join(sorted(evidence)).encode()).hexdigest()[:16]


def inputs_of(body: str) -> str | None:
    found = INPUTS_RE.search(body)
    return found.group(1) if found else None


def _claims(text: str | None, path: str) -> dict[str, tuple[int, str]]:
    """A page's claims: text -> (line, what it cites)."""
    if text is None:
        return {}
    try:
        structure = parse_page(text, path).structure
    except FormatError:
        return {}
    by_label = {c.label: c for c in structure.citations}
    out: dict[str, tuple[int, str]] = {}
    for claim in structure.claims:
        cites = [by_label[label] for label in claim.labels if label in by_label]
        refs = ", ".join(f"{c.evidence_id}#L{c.start}-L{c.end}" if c.evidence_id else f"[^{c.label}] (malformed)" for c in cites)
        out.setdefault(claim.text, (claim.line, refs))
    return out


def claim_rows(repo: Repo, base: pygit2.Commit, head: pygit2.Commit, pages: list[str]) -> list[ClaimRow]:
    rows = []
    for path in pages:
        old, new = repo.read_at(base, path), repo.read_at(head, path)
        before = _claims(old.decode("utf-8", "replace") if old else None, path)
        after = _claims(new.decode("utf-8", "replace") if new else None, path)
        old_by_cites = {cites: text for text, (_, cites) in before.items()}
        for text, (line, cites) in sorted(after.items(), key=lambda item: item[1][0]):
            if text not in before:
                kind = "changed" if cites in old_by_cites and old_by_cites[cites] not in after else "added"
                rows.append(ClaimRow(kind, path, line, text, cites))
        for text, (line, cites) in sorted(before.items(), key=lambda item: item[1][0]):
            if text not in after and cites not in {c for _, c in after.values()}:
                rows.append(ClaimRow("removed", path, line, text, cites))
    return rows


def _cell(text: str, limit: int = 160) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def labels_for(paths: list[str]) -> tuple[str, ...]:
    """``kb`` and one label per scope the change touches (``scope:knowledge``, ``scope:user:alice``)."""
    scopes = sorted({s for p in paths if (s := scope_for_path(p))})
    return (KB_LABEL, *(f"scope:{'knowledge' if s == 'system' else s}" for s in scopes))


def changed_paths(base: pygit2.Commit, head: pygit2.Commit) -> list[str]:
    diff = diff_trees(base.tree, head.tree)
    return sorted({p for d in diff.deltas for p in (d.old_file.path, d.new_file.path) if p})


def title_for(branch: str, evidence: tuple[str, ...], pages: list[str]) -> str:
    what = pages[0] if len(pages) == 1 else f"{len(pages)} pages"
    return f"kb: {what} from {len(evidence)} evidence item(s) ({branch})"


def render_body(repo: Repo, branch: str, base: pygit2.Commit, head: pygit2.Commit, info: dict[str, str], gate: GateReport) -> str:
    evidence = tuple(e.strip() for e in info.get("Kb-Evidence", "").split(",") if e.strip())
    paths = changed_paths(base, head)
    pages = [p for p in paths if p.startswith(PAGE_FOLDERS) and p.endswith(".md")]
    lines = [
        f"Proposed by **{info.get('Kb-Proposer-Model', 'unknown')}** (family {info.get('Kb-Proposer-Family', 'unknown')}) "
        f"on branch `{branch}`, head `{str(head.id)[:10]}`, base `{str(base.id)[:10]}`.",
        "",
        "### Evidence",
        *(f"- `{e}`" for e in evidence),
        "",
        "### Changed pages",
    ]
    for path in pages:
        data = repo.read_at(head, path)
        if data is None:
            lines.append(f"- `{path}` (deleted)")
            continue
        try:
            summary = parse_page(data.decode("utf-8", "replace"), path).summary
        except FormatError:
            summary = "(the page does not parse; see the gate)"
        lines.append(f"- `{path}`: {_cell(summary, 300)}")
    rows = claim_rows(repo, base, head, pages)
    lines += ["", "### Claims", ""]
    if rows:
        lines += ["| change | page:line | claim | cites |", "|---|---|---|---|"]
        lines += [f"| {r.change} | `{r.path}:{r.line}` | {_cell(r.text)} | {_cell(r.cites, 120) or '—'} |" for r in rows[:MAX_ROWS]]
        if len(rows) > MAX_ROWS:
            lines.append(f"\n{len(rows) - MAX_ROWS} more claim(s) not shown.")
    else:
        lines.append("No claim added, changed or removed.")
    lines += ["", "### Gate", ""]
    if gate.ok:
        lines.append(f"passed: {len(gate.changed_pages)} changed page(s) checked, no errors.")
    else:
        lines.append(f"**failed**: {len(gate.errors)} error(s)")
        lines += [f"- `{f.path}:{f.line}` [{f.rule}] {_cell(f.message, 300)}" for f in gate.errors[:20]]
    lines += ["", f"<!-- kb-inputs {inputs_key(evidence)} -->"]
    return "\n".join(lines) + "\n"
