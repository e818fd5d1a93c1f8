"""`kb forget --match` where other text shares part of the forgotten text: a page sentence that
only shares a run of words with it stays (it is not the material), and a claim citing the
redacted line (whose quote is a prefix of the text) goes with it; the scan is then clean."""

from __future__ import annotations

import subprocess
from pathlib import Path

from ci.run import run_checks
from kb.markdown import format_citation
from kb.repo import Repo
from kb.scaffold import init_repository
from tests.builders import add_evidence, commit, index_text, page_for

SECRET = "The quarterly supplier review moved to the Lisbon office this year"
SHARED = "Our quarterly supplier review moved online once, for a week."  # shares 31 characters with it
KEPT = "Meal budgets for the team offsite rose to forty euros a day."


def _repo(tmp: Path) -> tuple[Repo, str]:
    repo = init_repository(tmp / "kb")
    ident = add_evidence(repo, f"# Notes\n\n{SECRET}.\n{KEPT}\n".encode(), "notes.md", "document", None)
    body = (
        "# Notes\n\n## Overview\n\n"
        f"The review moved to Lisbon.[^1]\n\nThe offsite meal budget rose.[^2]\n\n{SHARED}\n\n"
        + format_citation("1", ident, 3, 3, SECRET[:40])
        + "\n"
        + format_citation("2", ident, 4, 4, KEPT[:40])
        + "\n"
    )
    page = page_for("knowledge/notes.md", "Notes", "What changed for the supplier review and the offsite.", body, sources=[ident])
    index = index_text(
        "knowledge",
        "Knowledge",
        "Entry page of the shared knowledge.",
        "system",
        {"knowledge/notes": "What changed for the supplier review and the offsite."},
    )
    commit(repo, {"knowledge/notes.md": page, "knowledge/index.md": index}, "page: notes\n")
    assert run_checks(repo).ok
    return repo, ident


def test_match_keeps_text_that_only_shares_words_and_drops_claims_on_the_redacted_line(tmp_path: Path, cli) -> None:
    repo, _ident = _repo(tmp_path)
    result = cli("--repo", str(repo.root), "forget", "--match", SECRET)
    assert result.code == 0, result.out + result.err
    page = (repo.root / "knowledge/notes.md").read_text(encoding="utf-8")
    assert SHARED in page and "The offsite meal budget rose.[^2]" in page and KEPT[:40] in page
    assert "moved to Lisbon" not in page and SECRET[:40] not in page  # the claim and its quote went
    objects = subprocess.run(["git", "-C", str(repo.root), "cat-file", "--batch-all-objects", "--batch"], capture_output=True, check=True)
    assert SECRET[:40].encode() not in objects.stdout and SHARED.encode() in objects.stdout
    assert run_checks(repo).ok
    verify = cli("--repo", str(repo.root), "forget", "--verify")
    assert verify.code == 0 and "clean" in verify.out


def test_an_unrelated_failing_page_does_not_hold_up_a_forgetting(tmp_path: Path, cli) -> None:
    repo, _ident = _repo(tmp_path)
    broken = page_for("knowledge/broken.md", "Broken", "A page with a broken link.", "# Broken\n\nSee [[knowledge/nowhere]].\n")
    index = (repo.root / "knowledge/index.md").read_text(encoding="utf-8") + "- [[knowledge/broken]]: A page with a broken link.\n"
    commit(repo, {"knowledge/broken.md": broken, "knowledge/index.md": index}, "page: broken\n")
    assert not run_checks(repo).ok
    result = cli("--repo", str(repo.root), "forget", "--match", SECRET)
    assert result.code == 0, result.out + result.err
    assert "verification: clean" in result.out and (repo.root / "knowledge/broken.md").exists()


def test_an_l0_and_index_entry_holding_the_text_are_rewritten_not_dropped(tmp_path: Path, cli) -> None:
    repo, _ident = _repo(tmp_path)
    page = (repo.root / "knowledge/notes.md").read_text(encoding="utf-8")
    text = page.replace("What changed for the supplier review and the offsite.", f"{SECRET}. The offsite budget changed.")
    index = (
        (repo.root / "knowledge/index.md")
        .read_text(encoding="utf-8")
        .replace("What changed for the supplier review and the offsite.", f"{SECRET}. The offsite budget changed.")
    )
    commit(repo, {"knowledge/notes.md": text, "knowledge/index.md": index}, "page: the summary says it\n")
    result = cli("--repo", str(repo.root), "forget", "--match", SECRET)
    assert result.code == 0 and "verification: clean" in result.out, result.out + result.err
    notes = (repo.root / "knowledge/notes.md").read_text(encoding="utf-8")
    assert "summary: The offsite budget changed." in notes and "Lisbon" not in notes
    assert "- [[knowledge/notes]]: The offsite budget changed." in (repo.root / "knowledge/index.md").read_text(encoding="utf-8")
    assert run_checks(repo).ok


def test_a_forgetting_whose_own_change_fails_the_checks_is_refused_and_stays_hidden(tmp_path: Path, cli) -> None:
    repo, _ident = _repo(tmp_path)
    text = (repo.root / "knowledge/notes.md").read_text(encoding="utf-8").replace("title: Notes", f"title: {SECRET}")
    commit(repo, {"knowledge/notes.md": text}, "page: the title says it\n")
    head = repo.head().id
    assert "Lisbon office" in cli("--repo", str(repo.root), "grep", "Lisbon office").out
    result = cli("--repo", str(repo.root), "forget", "--match", SECRET)
    # removing the line holding it removes the page's title: the checks fail
    assert result.code == 11 and "the forgetting change fails the checks" in result.err, result.err
    assert repo.head().id == head and (repo.root / "knowledge/notes.md").read_text(encoding="utf-8") == text
    found = cli("--repo", str(repo.root), "grep", "Lisbon office")
    assert found.code in (0, 1) and "Lisbon office" not in found.out  # hidden meanwhile


def test_the_whole_text_is_material_even_when_what_stays_shares_every_window_of_it(tmp_path: Path, cli) -> None:
    repo, _ident = _repo(tmp_path)
    page = (repo.root / "knowledge/notes.md").read_text(encoding="utf-8")
    commit(repo, {"knowledge/notes.md": page.replace(SHARED, f"Once: {SECRET}.")}, "page: says it\n")
    # what stays says its first 45 and its last characters: every 24-character window of it
    head, tail = SECRET[:45], SECRET[21:]
    commit(repo, {"knowledge/notes.md": page.replace(SHARED, f"First: {head}.\n\nThen: {tail}.")}, "page: says it in two\n")
    result = cli("--repo", str(repo.root), "forget", "--match", SECRET)
    assert result.code == 0 and "verification: clean" in result.out, result.out + result.err
    objects = subprocess.run(["git", "-C", str(repo.root), "cat-file", "--batch-all-objects", "--batch"], capture_output=True, check=True)
    assert SECRET.encode() not in objects.stdout  # the older version of the page said all of it
    assert head.encode() in objects.stdout and tail.encode() in objects.stdout
