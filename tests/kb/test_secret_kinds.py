"""Every credential kind of the table (``tests/kb/secret_kinds.py``: vendor tokens, headers,
config files, command lines, passwords in English, German, Chinese, French and Spanish prose)
is found, and its harmless near-miss (a placeholder, code, a sentence about the credential) is
not (issue 23, item 4). Plus what the published rules add: they load from the shipped data
file with their source commit, read Go's syntax, and match as gitleaks matches."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from kb.gitleaks import load_rules, scan
from kb.secrets import find_secrets
from tests.kb.secret_kinds import KINDS, expand

CASES = [(kind, expand(secret, n), expand(near, n)) for n, (kind, _, secret, near) in enumerate(KINDS)]


def test_the_table_covers_fifty_kinds_in_five_languages() -> None:
    assert len(KINDS) >= 50 and {lang for _, lang, _, _ in KINDS} >= {"en", "de", "zh", "fr", "es"}


@pytest.mark.parametrize(("kind", "secret", "near"), CASES, ids=[c[0] for c in CASES])
def test_a_credential_is_found_and_its_near_miss_is_not(kind: str, secret: str, near: str) -> None:
    assert find_secrets(secret), (kind, secret)
    assert find_secrets(near) == [], (kind, near)


def test_the_published_rules_ship_with_their_source_and_licence() -> None:
    data = json.loads(resources.files("kb").joinpath("gitleaks.json").read_text(encoding="utf-8"))
    assert data["licence"] == "MIT" and "Permission is hereby granted" in data["licence_text"]
    assert len(data["commit"]) == 40 and data["commit"] in data["source"]
    assert len(load_rules().rules) == len(data["rules"]) >= 200


def test_go_syntax_reads_as_go_reads_it() -> None:
    # a flag switched on mid-pattern (`p8e-(?i)[a-z0-9]{32}`) and a POSIX class (`[[:alnum:]]`)
    found = {rule.id for rule, _, _ in scan("adobe p8e-" + "Qz8x" * 8 + " and airtable pat" + "Ab3d" * 3 + "Q9." + "3f" * 32 + " ")}
    assert {"adobe-client-secret", "airtable-personnal-access-token"} <= found


def test_a_keyword_rule_matches_without_its_lazy_name_prefix_as_with_it() -> None:
    # the allow-list of the generic rule reads the whole match, name included: `public_key` is allowed
    assert [r.id for r, _, _ in scan("public_key = 'q8Zr7Xw2LpN4tK9m'\n")] == []
    assert [r.id for r, _, _ in scan("deploy_key = 'q8Zr7Xw2LpN4tK9m'\n")] == ["generic-api-key"]


def test_published_findings_are_judged_by_kb_too() -> None:
    # gitleaks' Terraform password rule takes `"changeme"`; kb knows the placeholder
    assert any(r.id == "hashicorp-tf-password" for r, _, _ in scan('password = "changeme"'))
    assert find_secrets('password = "changeme"') == []


def test_one_credential_is_one_finding_with_the_first_rules_kind() -> None:
    text = expand("GITHUB_TOKEN=ghp_{a:36}\n", 7)
    assert [h.kind for h in find_secrets(text)] == ["GitHub token"]  # kb's rule; gitleaks' github-pat and generic overlap it
