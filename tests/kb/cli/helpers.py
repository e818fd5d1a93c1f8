"""What the CLI tests share: the one-error assertion and a small repository with pages."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tests.builders import make_repo, page_for, sections

if TYPE_CHECKING:
    from kb.repo import Repo
    from tests.conftest import CliResult


def assert_one_error(result: CliResult, code: int, *needles: str) -> None:
    """``result`` failed with ``code`` and one ``error:`` line (and at most a ``hint:``), no traceback."""
    assert result.code == code, (result.code, result.err)
    lines = result.err.strip().splitlines()
    assert lines and lines[0].startswith("error: "), result.err
    assert len(lines) <= 2 and all(line.startswith(("error: ", "hint: ")) for line in lines), result.err
    assert "Traceback" not in result.err
    for needle in needles:
        assert needle in result.err, result.err


def repo_with_pages(root: Path) -> Repo:
    """A company page with two sections and one of alice's preferences, committed."""
    return make_repo(
        root,
        {
            "knowledge/acme.md": page_for(
                "knowledge/acme.md",
                "Acme Corp",
                "Acme Corp makes anvils.",
                "# Acme Corp\n\n" + sections(("Finances", "The company grew 3% in 2024."), ("People", "Coyotes buy anvils.")),
            ),
            "users/alice/travel.md": page_for(
                "users/alice/travel.md", "Alice's travel", "Alice prefers window seats.", "Alice prefers window seats.", type="preference"
            ),
        },
    )
