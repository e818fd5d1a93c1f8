"""Block claims (docs/format.md): a code block, table, list or quote followed by a paragraph of
only footnote references is one claim whose text is the block's lines."""

from __future__ import annotations

from kb.markdown import parse_structure

BODY = """# Page

```python
x = call(timeout=None)
```

[^1]

> - a quoted
> - list
>
> [^2]

Text after a paragraph.

[^3]

A sentence, e.g. with an abbreviation inside.[^4]
"""


def test_a_paragraph_of_references_after_a_block_claims_the_block() -> None:
    claims = {c.labels: c for c in parse_structure(BODY, line_offset=10).claims}
    code = claims[("1",)]
    assert code.text == "```python\nx = call(timeout=None)\n```" and code.block == (13, 17) and code.line == 13
    quoted = claims[("2",)]  # inside a block quote, the list before it in the same quote
    assert quoted.text == "> - a quoted\n> - list" and quoted.block == (19, 22)
    # after a paragraph, references alone are an ordinary (empty) claim, not a block claim
    assert claims[("3",)].block is None


def test_abbreviations_do_not_end_a_claim() -> None:
    claims = parse_structure(BODY).claims
    assert [c.text for c in claims if c.labels == ("4",)] == ["A sentence, e.g. with an abbreviation inside.[^4]"]
