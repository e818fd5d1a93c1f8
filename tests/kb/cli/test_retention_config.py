"""The ``retention:`` section's scope keys are validated by ``kb.scopes`` (issue 22): a rule for a
user id that cannot exist (``user:Alice``; ids are lower case) is a config error, exit 4, with a
hint, instead of a rule that validates and never expires anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.scaffold import init_repository


def _with_rules(tmp_path: Path, rules: str) -> Path:
    root = init_repository(tmp_path / "kb").root
    config = root / "kb.config.yaml"
    config.write_text(config.read_text(encoding="utf-8") + rules, encoding="utf-8")
    return root


@pytest.mark.parametrize(
    ("key", "hint"),
    [
        ("user:Alice", "hint: write `user:alice`: user ids are lower case"),
        ("user:al/ice", "hint: a user id is lower-case letters, digits, '.', '_' or '-'"),
        ("user:", "hint: a user id is lower-case letters"),
    ],
)
def test_a_retention_rule_for_an_impossible_user_is_a_config_error(cli, tmp_path: Path, key: str, hint: str) -> None:
    root = _with_rules(tmp_path, f"retention:\n  {key!r}: 30d\n")
    for command in (("retention", "apply", "--dry-run"), ("check",)):
        result = cli(*command, cwd=root)
        assert result.code == 4, result.err
        assert f"error: {root / 'kb.config.yaml'}: `retention`: {key!r} is not a scope" in result.err
        assert hint in result.err and "Traceback" not in result.err


def test_a_retention_rule_for_a_real_user_id_is_accepted(cli, tmp_path: Path) -> None:
    root = _with_rules(tmp_path, "retention:\n  user:alice: 30d\n  system: 400d\n  memory: 90d\n")
    result = cli("retention", "apply", "--dry-run", cwd=root)
    assert result.code == 0 and "nothing has expired" in result.out
