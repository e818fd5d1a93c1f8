"""One claim read by the gate against one citation given as text (the tests' shorthand)."""

from __future__ import annotations

from ci.rules.grounding import Cited, Evidence, Reader, Ungrounded, check_statement


def check_claim(claim: str, quote: str, span: str, conversation: bool = False) -> list[Ungrounded]:
    """Problems of ``claim`` against one citation: its quote and its cited lines."""
    lines = tuple(span.splitlines()) or ("",)
    return check_statement(claim, Evidence([Cited("1", "", 1, len(lines), quote, lines, conversation)]), Reader())
