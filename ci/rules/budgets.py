"""L0 and L1 within their token budgets (tiktoken cl100k_base; see kb.tokens)."""

from __future__ import annotations

from ci.findings import Finding
from ci.rules import selected_pages
from ci.selection import Selection
from ci.snapshot import Snapshot
from kb.page import Page
from kb.tokens import count_tokens


def check_page(page: Page, l0_budget: int, l1_budget: int) -> list[Finding]:
    out = []
    l0 = count_tokens(page.summary)
    if l0 > l0_budget:
        out.append(
            Finding(
                page.path,
                page.meta_lines.get("summary", 1),
                "budget.l0",
                f"summary (L0) is {l0} tokens; the budget is {l0_budget}",
                hint="one sentence: move detail into ## Overview",
            )
        )
    overview = page.overview()
    if overview:
        l1 = count_tokens(overview)
        if l1 > l1_budget:
            section = page.structure.section("overview")
            out.append(
                Finding(
                    page.path,
                    section.line if section else 1,
                    "budget.l1",
                    f"## Overview (L1) is {l1} tokens; the budget is {l1_budget}",
                    hint="shorten it; details belong in later sections",
                )
            )
    elif len(page.body) > l1_budget * 2 and count_tokens(page.body) > l1_budget:
        out.append(
            Finding(
                page.path,
                page.header_lines + 1,
                "budget.l1-missing",
                f"the page body exceeds {l1_budget} tokens but has no `## Overview` section",
                hint="add ## Overview with the gist of the page",
            )
        )
    return out


def check(snapshot: Snapshot, selection: Selection) -> list[Finding]:
    budgets = snapshot.config.budgets
    out: list[Finding] = []
    for page in selected_pages(snapshot, selection):
        out.extend(check_page(page, budgets.l0_tokens, budgets.l1_tokens))
    return out
