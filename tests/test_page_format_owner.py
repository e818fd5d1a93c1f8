"""One owner of the page text format: footnote, span and evidence-id patterns are spelled only in
kb/citations.py (and the id pattern in kb/ids.py); every other module uses their values."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("kb", "ci", "agents", "pipeline")
OWNERS = {"kb/citations.py", "kb/ids.py"}

# What a pattern of the format looks like inside a string literal: an escaped footnote opener,
# an evidence-id character class, or a line span with a capture group.
FORMAT_PATTERN = re.compile(r"\\\[\\\^|ev-\[0-9a-f\]|ev-\\w|#L\(|#L\\d|\bL\(\\d\+\)-L")


def pattern_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string literal in ``source`` that spells a page-format pattern."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and FORMAT_PATTERN.search(node.value):
            found.append((node.lineno, node.value))
    return found


def product_modules() -> list[Path]:
    return sorted(p for top in PRODUCT for p in (ROOT / top).rglob("*.py"))


def test_no_page_format_pattern_outside_its_owner() -> None:
    offenders = []
    for path in product_modules():
        rel = path.relative_to(ROOT).as_posix()
        if rel in OWNERS:
            continue
        offenders += [f"{rel}:{line}: {text[:70]!r}" for line, text in pattern_literals(path.read_text(encoding="utf-8"))]
    assert offenders == [], "use kb.citations instead of spelling the pattern:\n" + "\n".join(offenders)


def test_the_scan_finds_planted_patterns() -> None:
    planted = """
import re
A = re.compile(r"\\[\\^([^\\]\\s]+)\\]")
B = re.compile(r"^(ev-[0-9a-f]{16})$")
C = re.compile(rf"{x}#L(\\d+)")
D = re.compile(r"L(\\d+)-L(\\d+)")
E = f"prefix {y} \\\\[\\\\^tail"
ok = "[^" in body
fine = re.compile(r"\\[[^\\]]*\\]")
"""
    lines = [line for line, _ in pattern_literals(planted)]
    assert sorted(set(lines)) == [3, 4, 5, 6, 7]


def test_the_owner_spells_what_the_others_import() -> None:
    from kb import citations

    assert citations.parse_span("ev-0123456789abcdef#L3-L4") == citations.Span("ev-0123456789abcdef", 3, 4)
    assert str(citations.Span("ev-0123456789abcdef", 5, 5)) == "ev-0123456789abcdef#L5"
    line = citations.format_citation("2", "ev-0123456789abcdef", 3, 3, 'a "quoted" line')
    cite = citations.parse_definition(line, 9)
    assert cite is not None and (cite.label, cite.line, cite.quote, cite.start, cite.end) == ("2", 9, 'a "quoted" line', 3, 3)
    bullet = citations.parse_claim_bullet("  - Alice moved to Lyon.[^1][^b] _(since 2023)_")
    assert bullet is not None and bullet.labels == ("1", "b") and bullet.tail == " _(since 2023)_"
    assert str(bullet) == "  - Alice moved to Lyon.[^1][^b] _(since 2023)_"
    assert citations.FOOTREF_RE.findall('x[^1] y[^2]\n[^3]: ev-0123456789abcdef#L1 "q"') == ["1", "2"]
    assert citations.cited_evidence('[^1]: ev-00000000000000aa#L1 "q"\n[^2]: ev-00000000000000aa#L2 "r"') == ["ev-00000000000000aa"]
