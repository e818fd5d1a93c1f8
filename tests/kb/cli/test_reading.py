"""``kb search``, ``kb read`` and ``kb grep`` through the CLI: output, and bad input answered with
one clear error."""

from __future__ import annotations

import json
from pathlib import Path

from kb.errors import FormatError
from kb.retrieval.store import index_store
from tests.builders import commit, make_sample_repo, page_for
from tests.kb.cli.helpers import assert_one_error, repo_with_pages


def test_build_status_search_read_grep(tmp_path: Path, cli) -> None:
    repo = repo_with_pages(tmp_path / "kb")
    r = str(repo.root)
    result = cli("--repo", r, "index", "build", "--json")
    built = json.loads(result.out)
    assert result.code == 0 and built["full"] and built["embedded"] == built["chunks"] == 4
    result = cli("--repo", r, "index", "status")
    assert result.code == 0 and f"serving {built['commit'][:12]}" in result.out and "0 commit(s) behind HEAD" in result.out
    result = cli("--repo", r, "search", "how much did Acme grow", "--json", "--k", "2")
    found = json.loads(result.out)
    assert result.code == 0 and found["commit"] == built["commit"]
    assert found["hits"][0]["id"] == "knowledge/acme" and found["hits"][0]["anchor"] == "finances"
    result = cli("--repo", r, "search", "window seats", "--as", "user:alice", "--mode", "bm25")
    assert result.code == 0 and "users/alice/travel" in result.out and "Alice prefers window seats." in result.out
    result = cli("--repo", r, "read", "knowledge/acme")
    assert result.code == 0 and "L0: Acme Corp makes anvils." in result.out and "#finances" in result.out and "tokens" in result.out
    result = cli("--repo", r, "read", "knowledge/acme", "--section", "finances")
    assert result.code == 0 and "The company grew 3% in 2024." in result.out
    result = cli("--repo", r, "grep", "anvils", "--json")
    hits = json.loads(result.out)["hits"]
    assert result.code == 0 and {(h["anchor"], h["line"]) for h in hits if h["anchor"] == "people"}
    commit(repo, {"knowledge/new.md": page_for("knowledge/new.md", "New", "A new page.", "Fresh text.")})
    result = cli("--repo", r, "index", "status", "--json")
    assert json.loads(result.out)["behind"] == 1


def test_unknown_commit(tmp_path: Path, cli) -> None:
    repo = repo_with_pages(tmp_path / "kb")
    r = str(repo.root)
    assert_one_error(cli("--repo", r, "index", "build", "--commit", "no-such-branch"), 6, "unknown commit or branch `no-such-branch`")
    assert_one_error(cli("--repo", r, "read", "knowledge/acme", "--commit", "deadbeef"), 6, "unknown commit")
    cli("--repo", r, "index", "build")
    assert_one_error(cli("--repo", r, "search", "anvils", "--commit", "deadbeef"), 6, "unknown commit or branch `deadbeef`")
    assert not (index_store(repo).root / "at").exists()


def test_empty_query_bad_principal_bad_date(tmp_path: Path, cli) -> None:
    repo = repo_with_pages(tmp_path / "kb")
    r = str(repo.root)
    cli("--repo", r, "index", "build")
    assert_one_error(cli("--repo", r, "search", "   "), 2, "empty query")
    assert_one_error(cli("--repo", r, "search", "anvils", "--as", "alice"), 2, "invalid principal")
    assert_one_error(cli("--repo", r, "search", "anvils", "--at", "yesterday"), 2, "invalid date")
    assert_one_error(cli("--repo", r, "read", "users/alice/travel", "--as", "user:bob"), 6, "no page")
    assert_one_error(cli("--repo", r, "grep", "(", "--regex"), 2, "invalid regular expression")


def test_reading_a_page_with_malformed_frontmatter_is_a_format_error(cli, tmp_path: Path) -> None:
    repo, _ = make_sample_repo(tmp_path / "r")
    page = repo.root / "knowledge/travel/visas.md"
    page.write_text(page.read_text().replace("title: Schengen visas", "title: [unclosed"))
    repo.commit_worktree_paths(["knowledge/travel/visas.md"], "break a page\n")
    result = cli("read", "knowledge/travel/visas", cwd=repo.root)
    assert_one_error(result, FormatError.exit_code, "knowledge/travel/visas.md:4: malformed YAML frontmatter")


def test_search_shows_the_matching_passage_its_section_and_says_when_behind(tmp_path: Path, cli) -> None:
    repo = repo_with_pages(tmp_path / "kb")
    r = str(repo.root)
    cli("--repo", r, "index", "build")
    result = cli("--repo", r, "search", "how much did Acme grow", "--k", "1")
    lines = result.out.splitlines()
    assert result.code == 0 and result.err == ""
    assert lines[0].startswith(" 1. [page] knowledge/acme › Finances  L")
    assert lines[1] == "    The company grew 3% in 2024."  # the passage that matched, not the L0
    assert lines[2] == "    Acme Corp: Acme Corp makes anvils."  # then the L0
    commit(repo, {"knowledge/new.md": page_for("knowledge/new.md", "New", "A new page.", "Fresh text.")})
    result = cli("--repo", r, "search", "how much did Acme grow", "--k", "1")
    assert result.code == 0
    assert result.err.startswith("note: the index serves ") and "1 commit(s) behind HEAD; run `kb index build`" in result.err


def test_folder_index_pages_need_a_word_match_in_hybrid_search(tmp_path: Path, cli) -> None:
    repo = repo_with_pages(tmp_path / "kb")
    r = str(repo.root)
    cli("--repo", r, "index", "build")
    query = "quantum chromodynamics on a lattice"
    dense = json.loads(cli("--repo", r, "search", query, "--mode", "dense", "--json").out)["hits"]
    assert "knowledge/index" in [h["id"] for h in dense]  # meaning alone finds the index page
    hybrid = json.loads(cli("--repo", r, "search", query, "--json").out)["hits"]
    assert "knowledge/index" not in [h["id"] for h in hybrid]
    assert [h["id"] for h in hybrid] == [h["id"] for h in dense if h["id"] != "knowledge/index"]
    listed = json.loads(cli("--repo", r, "search", "shared knowledge entry page", "--json").out)["hits"]
    assert "knowledge/index" in [h["id"] for h in listed]  # its words match: it ranks


def test_grep_says_when_user_pages_are_not_searched_and_top_points_to_k(tmp_path: Path, cli) -> None:
    repo = repo_with_pages(tmp_path / "kb")
    r = str(repo.root)
    result = cli("--repo", r, "grep", "window")
    assert result.code == 0 and "no matches" in result.out
    assert "pages of 1 user(s) under users/ were not searched as system" in result.err and "--as user:ID" in result.err
    result = cli("--repo", r, "grep", "window", "--as", "user:alice")
    assert result.code == 0 and "users/alice/travel" in result.out and result.err == ""
    cli("--repo", r, "index", "build")
    assert_one_error(cli("--repo", r, "search", "anvils", "--top", "5"), 2, "no --top option", "--k 5")


def test_search_json_passage_is_the_readers_text_with_citations_apart(tmp_path: Path, cli) -> None:
    repo = repo_with_pages(tmp_path / "kb")
    body = (
        "## Typing\n\n/// tip | Note\n\nThe company sells anvils to roadrunner hunters.[^1]\n\n///\n\n"
        '--8<-- "snippets/anvil.md"\n\nAcme ships anvils by rail，每周一次。[^2]\n\n'
        '[^1]: ev-0123456789abcdef#L1 "sells anvils"\n[^2]: ev-0123456789abcdef#L2 "ships"\n'
    )
    commit(repo, {"knowledge/shipping.md": page_for("knowledge/shipping.md", "Shipping", "How Acme ships.", body)})
    r = str(repo.root)
    cli("--repo", r, "index", "build")
    found = json.loads(cli("--repo", r, "search", "how does acme ship anvils by rail", "--json", "--k", "3").out)["hits"]
    hit = next(h for h in found if h["id"] == "knowledge/shipping")
    assert "[^" not in hit["text"] and "///" not in hit["text"] and "--8<--" not in hit["text"]
    assert "rail，每周一次。" in hit["text"]  # the full-width comma stays one
    assert hit["answer"] == "Acme ships anvils by rail，每周一次。"
    sources = {c["label"]: c["source"] for c in hit["citations"]}
    assert sources.get("2") == 'ev-0123456789abcdef#L2 "ships"'
    printed = cli("--repo", r, "search", "how does acme ship anvils by rail", "--k", "3").out
    assert "Acme ships anvils by rail，每周一次。" in printed and "[^2]" in printed.split("Acme ships")[1].split("\n", 2)[1]
