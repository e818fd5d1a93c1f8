"""The judgement of what a change touched (ci/rules/scope.py), on hand-made path lists."""

from __future__ import annotations

from ci.rules.scope import MODE_EXECUTABLE, MODE_LINK, ChangeScope, Touched, judge, page_root

ALICE = ChangeScope(True, frozenset({"users/alice/"}))
PERSON = ChangeScope(False, frozenset())
LEDGER = "evidence/ledger.jsonl"
ENTRY = (
    '{"added_at":"2025-01-01T00:00:00Z","hash":"h","id":"ev-0000000000000001","kind":"document","lines":1,'
    '"path":"evidence/2025/01/ev-0000000000000001.md","prev":"p","scope":"%s","seq":2,"sha256":"s"}\n'
)


def rules(touched: list[Touched], scope: ChangeScope, base: bytes | None = None, head: bytes | None = None) -> list[tuple[str, str, str]]:
    return [(f.path, f.rule, f.severity) for f in judge(touched, scope, base, head)]


def test_pages_of_the_change_scope_pass_and_others_do_not() -> None:
    touched = [Touched("users/alice/a.md", "modified", 0o100644), Touched("users/bob/b.md", "added", 0o100644)]
    assert rules(touched, ALICE) == [("users/bob/b.md", "change.scope", "error")]


def test_paths_kb_does_not_own_are_outside_for_a_kb_change_and_a_warning_for_a_person() -> None:
    touched = [Touched(p, "modified", 0o100644) for p in ("kb.config.yaml", "Makefile", "knowledge/logo.png", "users/Alice/x.md")]
    assert {r for _, r, _ in rules(touched, ALICE)} == {"change.outside"}
    assert {(r, s) for _, r, s in rules(touched, PERSON)} == {("change.human", "warning")}


def test_links_and_executables_are_entries_whoever_commits_them() -> None:
    touched = [Touched("users/alice/a.md", "added", MODE_LINK), Touched("knowledge/b.md", "modified", MODE_EXECUTABLE)]
    assert rules(touched, PERSON) == [("users/alice/a.md", "change.entry", "error"), ("knowledge/b.md", "change.entry", "error")]


def test_evidence_appended_in_scope_is_allowed_and_an_edit_is_not() -> None:
    base = b'{"seq":1}\n'
    added = [Touched(LEDGER, "modified", 0o100644), Touched("evidence/2025/01/ev-0000000000000001.md", "added", 0o100644)]
    assert rules(added, ALICE, base, base + (ENTRY % "user:alice").encode()) == []
    assert rules(added, ALICE, base, base + (ENTRY % "user:bob").encode()) == [
        ("evidence/2025/01/ev-0000000000000001.md", "change.scope", "error")
    ]
    rewritten = [Touched(LEDGER, "modified", 0o100644)]
    assert rules(rewritten, ALICE, base, b'{"seq":0}\n') == [(LEDGER, "change.outside", "error")]


def test_page_roots() -> None:
    assert page_root("knowledge/a/b.md") == "knowledge/"
    assert page_root("users/alice/x.md") == "users/alice/"
    assert [page_root(p) for p in ("users/x.md", "users/../kb.md", "knowledge/.hidden.md", "knowledge/a.txt")] == [None] * 4
