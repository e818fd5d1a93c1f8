"""A repository seeded with one known defect of each kind consolidation repairs (the acceptance
scenario of issue 15; bench/consolidation.py uses it too).

knowledge/policies/ holds: refunds-eu / refunds-us (a contradiction with a distinguishing
condition), office / office-notes (a contradiction without one), support / contact / office (the
same statement on three pages), team (an expired fact stated as current, and so a stale L0),
pricing (an ungrounded claim and a stale L0), contact (a broken link and a link to a moved page),
an index that does not list office-notes, shipping (a page over the page budget, which
``consolidation.page_tokens: 200`` sets low), pricing-students (a tiny page whose subject is
pricing's) and warranty (an Overview outline naming a section that is gone and missing a new one).
"""

from __future__ import annotations

from pathlib import Path

from kb.markdown import format_citation
from kb.repo import Repo
from tests.builders import add_evidence, commit, index_text, make_repo, page_for

HANDBOOK = """# Company handbook
Refunds are allowed within 30 days for EU customers.
Refunds are allowed within 14 days for US customers.
The office opens at 9am.
The office opens at 8am.
Our support line is open on weekdays.
Support is closed on public holidays.
The support phone number is 555-0100.
The annual fee is 120 euros.
Support answers within one business day.
Maria Lopez led the Berlin team until 2024-03-31.
Jonas Weber leads the Berlin team.
Orders ship within two business days.
Express shipping costs 15 euros.
Standard shipping is free above 50 euros.
Returns must be sent in the original packaging.
Refunds for returns are paid within ten days.
Damaged parcels are replaced at no cost.
Customs fees are paid by the customer.
Parcels to Norway may incur customs fees.
Students get a 20% discount on the annual fee.
The warranty covers two years.
Batteries are covered for one year.
"""
CONFIG = "consolidation:\n  page_tokens: 200\n"
LINES = HANDBOOK.splitlines()
FOLDER = "knowledge/policies"
TODAY = "2025-06-01"

REPLAY = """- question: When is the support line open?
  principal: system
  fact: Our support line is open on weekdays
- question: Is support open on public holidays?
  principal: system
  page: knowledge/policies/support
  fact: closed on public holidays
"""


def line_of(text: str) -> int:
    return LINES.index(text) + 1


def cite(label: str, ev: str, text: str) -> str:
    n = line_of(text)
    return format_citation(label, ev, n, n, text.rstrip("."))


def body(title: str, claims: list[str], ev: str, extra: str = "") -> str:
    """A page body: one bullet per claim (each the evidence line itself unless given as (claim,
    line)), then ``extra``, then the citations."""
    bullets = []
    defs = []
    for n, claim in enumerate(claims, 1):
        text, source = claim if isinstance(claim, tuple) else (claim, claim)
        bullets.append(f"- {text.rstrip('.')}.[^{n}]")
        defs.append(cite(str(n), ev, source))
    return f"# {title}\n\n## Statements\n\n" + "\n".join(bullets) + "\n" + (f"\n{extra}\n" if extra else "") + "\n" + "\n".join(defs) + "\n"


def seed(root: Path, replay: str | None = REPLAY) -> tuple[Repo, str]:
    repo = make_repo(root)
    ev = add_evidence(repo, HANDBOOK.encode(), "handbook.md", "document")
    L = line_of

    def fact(key: str, value: str, text: str, label: str, **more: str) -> dict[str, str]:
        return {"key": key, "value": value, "source": f"{ev}#L{L(text)}", "label": label, **more}

    pages = {
        "refunds-eu": ("EU refunds", "Refunds for EU customers.", [LINES[1]], {"facts": [fact("refund-window", "30 days", LINES[1], "1")]}),
        "refunds-us": ("US refunds", "Refunds for US customers.", [LINES[2]], {"facts": [fact("refund-window", "14 days", LINES[2], "1")]}),
        "office": ("Office", "When the office opens.", [LINES[3], LINES[5]], {"facts": [fact("opening-time", "9am", LINES[3], "1")]}),
        "office-notes": ("Office notes", "Notes about the office.", [LINES[4]], {"facts": [fact("opening-time", "8am", LINES[4], "1")]}),
        "support": ("Support hours", "When support is open.", [LINES[5], LINES[6]], {}),
        "pricing": ("Pricing", "The annual fee is 100 euros.", [LINES[8], ("Support answers within 2 business days.", LINES[9])], {}),
        "team": (
            "Berlin team",
            "Maria Lopez leads the Berlin team.",
            [LINES[10], LINES[11]],
            {
                "facts": [
                    fact("berlin-lead", "Maria Lopez", LINES[10], "1", valid_to="2024-03-31"),
                    fact("berlin-lead", "Jonas Weber", LINES[11], "2"),
                ]
            },
        ),
    }
    files: dict[str, str] = {}
    summaries: dict[str, str] = {}
    for name, (title, summary, claims, meta) in pages.items():
        path = f"{FOLDER}/{name}.md"
        files[path] = page_for(path, title, summary, body(title, claims, ev), sources=[ev], **meta)
        summaries[f"{FOLDER}/{name}"] = summary
    shipping = f"{FOLDER}/shipping.md"
    parts = {"Delivery": LINES[12:15], "Returns": LINES[15:18], "Customs": LINES[18:20]}
    n = 0
    rows, defs = ["# Shipping", ""], []
    for title, lines in parts.items():
        rows += [f"## {title}", ""]
        for text in lines:
            n += 1
            rows.append(f"- {text.rstrip('.')}.[^{n}]")
            defs.append(cite(str(n), ev, text))
        rows.append("")
    files[shipping] = page_for(shipping, "Shipping", "Orders ship within two business days.", "\n".join(rows + defs) + "\n", sources=[ev])
    summaries[f"{FOLDER}/shipping"] = "Orders ship within two business days."
    students = f"{FOLDER}/pricing-students.md"
    files[students] = page_for(
        students, "Pricing for students", "A student discount.", body("Pricing for students", [LINES[20]], ev), sources=[ev]
    )
    summaries[f"{FOLDER}/pricing-students"] = "A student discount."
    warranty = f"{FOLDER}/warranty.md"
    outline = "## Overview\n\nWhat the warranty covers.\n\nSections of this page:\n\n- [Coverage](#coverage)\n- [Claims](#claims)\n\n"
    w_body = (
        f"# Warranty\n\n{outline}## Coverage\n\n- {LINES[21]}[^1]\n\n## Batteries\n\n- {LINES[22]}[^2]\n\n"
        + cite("1", ev, LINES[21])
        + "\n"
        + cite("2", ev, LINES[22])
        + "\n"
    )
    files[warranty] = page_for(warranty, "Warranty", "The warranty covers two years.", w_body, sources=[ev])
    summaries[f"{FOLDER}/warranty"] = "The warranty covers two years."
    files["kb.config.yaml"] = (repo.root / "kb.config.yaml").read_text(encoding="utf-8") + CONFIG
    contact = f"{FOLDER}/contact.md"
    files[contact] = page_for(
        contact,
        "Contact",
        "How to reach support.",
        body(
            "Contact",
            [LINES[5], LINES[6], LINES[7]],
            ev,
            extra="Refund rules: [[knowledge/refunds-eu]]. Older rules: [[knowledge/policies/old-refunds]].",
        ),
        sources=[ev],
    )
    summaries[f"{FOLDER}/contact"] = "How to reach support."
    listed = {k: v for k, v in summaries.items() if k != f"{FOLDER}/office-notes"}  # a page missing from its index
    files[f"{FOLDER}/index.md"] = index_text(FOLDER, "Policies", "Company policies.", "system", listed)
    files["knowledge/index.md"] = index_text(
        "knowledge", "Knowledge", "Entry page of the shared knowledge.", "system", {f"{FOLDER}/index": "Company policies."}
    )
    if replay is not None:
        files["consolidation/replay.yaml"] = replay
    commit(repo, files, "seed pages with known defects")
    return repo, ev
