"""For each rule of `kb check`: the sample repository passes, and one mutation fails it with the
rule id, path and line we expect."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import get_args

import pytest

from ci.findings import RuleId
from ci.run import run_checks
from kb.evidence import LEDGER_PATH
from kb.repo import Repo
from tests.builders import ROOT, make_sample_repo, page_text, write

VISAS = "knowledge/travel/visas.md"
PREFS = "users/alice/preferences.md"


def _replace(repo: Repo, path: str, old: str, new: str) -> None:
    text = (repo.root / path).read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    (repo.root / path).write_text(text.replace(old, new, 1), encoding="utf-8")


def _line_of(repo: Repo, path: str, needle: str) -> int:
    for n, line in enumerate((repo.root / path).read_text(encoding="utf-8").splitlines(), 1):
        if needle in line:
            return n
    raise AssertionError(f"{needle!r} not in {path}")


Mutation = Callable[[Repo, dict[str, str]], tuple[str, int]]


def m_required(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    _replace(repo, VISAS, "summary: US citizens may stay 90 days without a visa.\n", "")
    return VISAS, 1


def m_type(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    _replace(repo, VISAS, "status: active", "status: maybe")
    return VISAS, _line_of(repo, VISAS, "status: maybe")


def m_yaml_trap(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    _replace(repo, VISAS, "title: Schengen visas", "title: no")
    return VISAS, _line_of(repo, VISAS, "title: no")


def m_unknown_key(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    _replace(repo, VISAS, "status: active\n", "status: active\ntitel: typo\n")
    return VISAS, _line_of(repo, VISAS, "titel:")


def m_id_path(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    _replace(repo, VISAS, "id: knowledge/travel/visas", "id: knowledge/travel/visa")
    return VISAS, 2


def m_id_unique(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    path = "knowledge/travel/visas-copy.md"
    text = (repo.root / VISAS).read_text(encoding="utf-8")
    write(repo, path, text)
    _replace(
        repo,
        "knowledge/travel/index.md",
        "## Pages\n\n",
        "## Pages\n\n- [[knowledge/travel/visas-copy]]: US citizens may stay 90 days without a visa.\n",
    )
    return path, 2


def m_scope_path(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    _replace(repo, PREFS, "scope: user:alice", "scope: system")
    return PREFS, _line_of(repo, PREFS, "scope: system")


def m_link_broken(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    _replace(repo, VISAS, "Short stays in the Schengen area.", "Short stays, see [[knowledge/travel/nowhere]].")
    return VISAS, _line_of(repo, VISAS, "nowhere")


def m_link_md_broken(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    _replace(repo, VISAS, "Short stays in the Schengen area.", "Short stays, see [x](missing.md).")
    return VISAS, _line_of(repo, VISAS, "missing.md")


def m_link_anchor(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    _replace(repo, PREFS, "visas#rules", "visas#nope")
    return PREFS, _line_of(repo, PREFS, "visas#nope")


def m_link_scope(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    _replace(repo, VISAS, "Short stays in the Schengen area.", "See [[users/alice/preferences]].")
    return VISAS, _line_of(repo, VISAS, "users/alice/preferences")


def m_orphan(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    path = "knowledge/travel/orphan.md"
    write(repo, path, page_text("knowledge/travel/orphan", "Orphan", "Nobody lists me.", "system", "# Orphan\n"))
    return path, 1


def m_unlisted(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    write(repo, "knowledge/travel/orphan.md", page_text("knowledge/travel/orphan", "Orphan", "Nobody lists me.", "system", "# Orphan\n"))
    return "knowledge/travel/index.md", 1


def m_index_summary(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    _replace(repo, "knowledge/travel/index.md", "]]: US citizens may stay 90 days without a visa.", "]]: Visa rules.")
    return "knowledge/travel/index.md", _line_of(repo, "knowledge/travel/index.md", "Visa rules.")


def m_index_extra(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    _replace(repo, "knowledge/travel/index.md", "## Pages\n\n", "## Pages\n\n- [[knowledge/index]]: Entry page of the shared knowledge.\n")
    return "knowledge/travel/index.md", _line_of(repo, "knowledge/travel/index.md", "[[knowledge/index]]")


def m_index_missing(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    write(repo, "knowledge/food/pasta.md", page_text("knowledge/food/pasta", "Pasta", "Pasta facts.", "system", "# Pasta\n"))
    return "knowledge/food/index.md", 1


def m_budget_l0(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    long = "US citizens may stay 90 days without a visa " + "and also many more words " * 40
    _replace(repo, VISAS, "summary: US citizens may stay 90 days without a visa.", f"summary: {long.strip()}")
    return VISAS, _line_of(repo, VISAS, "summary:")


def m_budget_l1(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    (repo.root / "kb.config.yaml").write_text((repo.root / "kb.config.yaml").read_text().replace("l1_tokens: 2000", "l1_tokens: 20"))
    _replace(repo, VISAS, "Short stays in the Schengen area.", "Short stays in the Schengen area. " * 10)
    return VISAS, _line_of(repo, VISAS, "## Overview")


def m_budget_l1_missing(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    (repo.root / "kb.config.yaml").write_text((repo.root / "kb.config.yaml").read_text().replace("l1_tokens: 2000", "l1_tokens: 20"))
    _replace(repo, PREFS, "- Prefers window seats.[^1]", "- Prefers window seats.[^1] " + "More words here. " * 30)
    return PREFS, _line_of(repo, PREFS, "# Alice's travel preferences")


def m_cite_evidence(repo: Repo, ids: dict[str, str]) -> tuple[str, int]:
    _replace(repo, VISAS, f"[^1]: {ids['doc']}", "[^1]: ev-00000000deadbeef")
    return VISAS, _line_of(repo, VISAS, "[^1]: ev-00000000deadbeef")


def m_cite_lines(repo: Repo, ids: dict[str, str]) -> tuple[str, int]:
    _replace(repo, VISAS, f"[^1]: {ids['doc']}#L3", f"[^1]: {ids['doc']}#L99")
    return VISAS, _line_of(repo, VISAS, "#L99")


def m_cite_quote(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    _replace(
        repo, VISAS, '"can stay 90 days in the Schengen area without a visa"', '"can stay 180 days in the Schengen area without a visa"'
    )
    return VISAS, _line_of(repo, VISAS, "180 days")


def m_cite_scope(repo: Repo, ids: dict[str, str]) -> tuple[str, int]:
    _replace(
        repo,
        VISAS,
        f'[^1]: {ids["doc"]}#L3 "can stay 90 days in the Schengen area without a visa"',
        f'[^1]: {ids["chat"]}#L3 "I prefer window seats"',
    )
    return VISAS, _line_of(repo, VISAS, "[^1]:")


def m_private_text(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    # alice's words, in a shared page, with no footnote to give them away
    _replace(
        repo,
        VISAS,
        "# Schengen visas\n",
        "# Schengen visas\n\nSome travellers write: I prefer window seats; I'm vegetarian, so I will need it.\n",
    )
    return VISAS, _line_of(repo, VISAS, "Some travellers write")


def m_cite_malformed(repo: Repo, ids: dict[str, str]) -> tuple[str, int]:
    _replace(repo, VISAS, f"[^1]: {ids['doc']}#L3 ", "[^1]: see the document ")
    return VISAS, _line_of(repo, VISAS, "[^1]: see")


def m_cite_undefined(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    _replace(repo, VISAS, "without a visa.[^1]", "without a visa.[^1] Extra claim.[^7]")
    return VISAS, _line_of(repo, VISAS, "[^7]")


def m_secret(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    _replace(repo, VISAS, "Short stays in the Schengen area.", "Key: sk-proj-abcdefghijklmnopqrstuvwxyz0123456789")
    return VISAS, _line_of(repo, VISAS, "sk-proj-")


def m_privacy(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    _replace(repo, VISAS, "Short stays in the Schengen area.", "Pay with card 4111 1111 1111 1111.")
    return VISAS, _line_of(repo, VISAS, "4111 1111")


def m_privacy_chinese(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    _replace(repo, PREFS, "- Prefers window seats.", "- 身份证号11010519491231002X。\n- Prefers window seats.")
    return PREFS, _line_of(repo, PREFS, "身份证号")


def m_parse(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    _replace(repo, VISAS, "title: Schengen visas", "title: [unclosed")
    return VISAS, _line_of(repo, VISAS, "title: [unclosed")


def m_not_utf8(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    (repo.root / VISAS).write_bytes((repo.root / VISAS).read_bytes().replace(b"Short stays", b"Short \xff stays"))
    return VISAS, 1


def m_cite_short_id(repo: Repo, ids: dict[str, str]) -> tuple[str, int]:
    _replace(repo, VISAS, f"[^1]: {ids['doc']}", f"[^1]: {ids['doc'][:11]}")  # ev- and 8 hex digits
    return VISAS, _line_of(repo, VISAS, "[^1]:")


def m_sources_short_id(repo: Repo, ids: dict[str, str]) -> tuple[str, int]:
    _replace(repo, VISAS, f"sources: [{ids['doc']}]", f"sources: [{ids['doc'][:11]}]")
    return VISAS, _line_of(repo, VISAS, "sources:")


def m_ledger(repo: Repo, _ids: dict[str, str]) -> tuple[str, int]:
    lines = (repo.root / LEDGER_PATH).read_text(encoding="utf-8").splitlines(keepends=True)
    lines[1] = "{not json\n"
    (repo.root / LEDGER_PATH).write_text("".join(lines), encoding="utf-8")
    return LEDGER_PATH, 2


CASES: list[tuple[str, Mutation]] = [
    ("frontmatter.required", m_required),
    ("frontmatter.type", m_type),
    ("frontmatter.type", m_yaml_trap),
    ("frontmatter.unknown-key", m_unknown_key),
    ("id.path", m_id_path),
    ("id.unique", m_id_unique),
    ("scope.path", m_scope_path),
    ("link.broken", m_link_broken),
    ("link.broken", m_link_md_broken),
    ("link.anchor", m_link_anchor),
    ("link.scope", m_link_scope),
    ("index.orphan", m_orphan),
    ("index.unlisted", m_unlisted),
    ("index.summary", m_index_summary),
    ("index.extra", m_index_extra),
    ("index.missing", m_index_missing),
    ("budget.l0", m_budget_l0),
    ("budget.l1", m_budget_l1),
    ("budget.l1-missing", m_budget_l1_missing),
    ("citation.evidence", m_cite_evidence),
    ("citation.lines", m_cite_lines),
    ("citation.quote", m_cite_quote),
    ("citation.scope", m_cite_scope),
    ("scope.private-text", m_private_text),
    ("citation.malformed", m_cite_malformed),
    ("citation.undefined", m_cite_undefined),
    ("secret.found", m_secret),
    ("privacy.found", m_privacy),
    ("privacy.found", m_privacy_chinese),
    ("page.parse", m_parse),
    ("page.parse", m_not_utf8),
    ("citation.malformed", m_cite_short_id),
    ("frontmatter.type", m_sources_short_id),
    ("evidence.ledger", m_ledger),
]


@pytest.fixture
def sample(tmp_path: Path) -> tuple[Repo, dict[str, str]]:
    return make_sample_repo(tmp_path / "repo")


def test_sample_repository_is_clean(sample: tuple[Repo, dict[str, str]]) -> None:
    repo, _ = sample
    report = run_checks(repo)
    assert report.findings == []
    assert report.checked == 5


@pytest.mark.parametrize("rule,mutate", CASES, ids=[f"{rule}:{m.__name__}" for rule, m in CASES])
def test_rule_fails_with_id_path_and_line(sample: tuple[Repo, dict[str, str]], rule: str, mutate: Mutation) -> None:
    repo, ids = sample
    path, line = mutate(repo, ids)
    report = run_checks(repo)
    hits = [(f.rule, f.path, f.line) for f in report.errors]
    assert (rule, path, line) in hits, hits
    assert not report.ok


@pytest.mark.parametrize("rule,mutate", CASES, ids=[f"{rule}:{m.__name__}" for rule, m in CASES])
def test_changed_only_sees_the_same_failure(sample: tuple[Repo, dict[str, str]], rule: str, mutate: Mutation) -> None:
    repo, ids = sample
    path, line = mutate(repo, ids)
    report = run_checks(repo, changed_only=True)
    assert (rule, path, line) in [(f.rule, f.path, f.line) for f in report.errors]


@pytest.mark.parametrize(
    "mutate,message", [(m_parse, "malformed YAML frontmatter"), (m_not_utf8, "not UTF-8 text"), (m_ledger, "malformed ledger line")]
)
def test_parse_findings_state_the_problem_without_the_location(sample: tuple[Repo, dict[str, str]], mutate: Mutation, message: str) -> None:
    repo, ids = sample
    path, line = mutate(repo, ids)
    found = [f for f in run_checks(repo).errors if (f.path, f.line) == (path, line) and f.rule in ("page.parse", "evidence.ledger")]
    assert [f.message.startswith(message) for f in found] == [True], found


def test_every_rule_id_is_documented() -> None:
    documented = set(re.findall(r"^\| `([a-z0-9.-]+)` \|", (ROOT / "docs" / "checks.md").read_text(encoding="utf-8"), re.M))
    assert documented == set(get_args(RuleId))  # the grounding rules (the gate's) included


def test_shared_text_that_a_user_also_wrote_is_not_private(sample: tuple[Repo, dict[str, str]]) -> None:
    """Only runs of words that are in a user's evidence and in no shared evidence count; short
    common phrases and the other direction (a user's page quoting shared text) are fine."""
    from tests.builders import VISA_DOC, add_evidence

    repo, _ = sample
    add_evidence(repo, ("My friend said: " + VISA_DOC.splitlines()[2]).encode(), "bob.txt", "conversation", "bob")
    _replace(repo, VISAS, "# Schengen visas\n", "# Schengen visas\n\n" + VISA_DOC.splitlines()[2] + " I prefer window seats.\n")
    assert run_checks(repo).findings == []
