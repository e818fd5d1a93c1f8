"""People's pull requests against the GitHub test double with branch protection on (required
``kb-check`` and ``kb/gate``, one required approval, stale approvals dismissed): every pull request
gets the ``kb/gate`` status; a person's evidence-only pull request reaches main through kb's gate,
the reviewer's approval and kb's merge (no bypass, nobody but its author does anything); a pull
request editing the config, the signers or the workflows is refused by ``kb-check`` and by
``kb/gate`` and is never merged."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pygit2
import pytest

from kb.repo import Repo
from pipeline.forge.remote import GitRemote
from pipeline.propose import propose
from pipeline.records import parse_trailers
from tests.builders import add_evidence
from tests.conftest import CliResult
from tests.forge.github_double import Protection
from tests.pipeline.forge.conftest import ForgeSetup

Cli = Callable[..., CliResult]
PREFIX = "/repos/acme/kb"
REQUIRED = ("kb-check", "kb/gate")
NOTE = "# Lyon office\n\nThe Lyon office opened on 2025-05-02 and holds 40 desks.\n"


def _protect(github: ForgeSetup, linear: bool = False) -> Repo:
    github.double.protection = Protection(required_contexts=REQUIRED, linear_history=linear)
    github.double.add_token("tok-person", "alice")
    config = github.repo.root / "kb.config.yaml"
    config.write_text(
        config.read_text(encoding="utf-8") + f"  required_checks: [{', '.join(REQUIRED)}]\n  checks_wait_s: 0\n", encoding="utf-8"
    )
    github.repo.commit_worktree_paths(["kb.config.yaml"], "Require kb-check and kb/gate")
    GitRemote(github.repo.root, "origin", "tok-proposer").push_branch("main")
    return Repo(github.repo.root)


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _persons_pull(github: ForgeSetup, tmp_path: Path, branch: str, change: Callable[[Repo], None]) -> int:
    """A person's clone: a branch with ``change`` committed, pushed with their token, opened as a PR."""
    clone = tmp_path / f"clone-{branch.replace('/', '-')}"
    _git(tmp_path, "clone", "-q", str(github.double.bare_path), str(clone))
    _git(clone, "checkout", "-q", "-b", branch)
    _git(clone, "config", "user.name", "Alice")
    _git(clone, "config", "user.email", "alice@example.invalid")
    change(Repo(clone))
    _git(clone, "remote", "set-url", "origin", github.double.git_url)
    GitRemote(clone, "origin", "tok-person").push_branch(branch)
    answer = github.double.api("POST", f"{PREFIX}/pulls", {}, {"head": branch, "base": "main", "title": "From Alice"}, "tok-person")
    assert answer.status == 201, answer.body
    return int(answer.body["number"])


def _ci_check(github: ForgeSetup, tmp_path: Path, cli: Cli, number: int) -> CliResult:
    """What the kb-check job does on the pull request: a checkout of its head, the check against
    the base commit, the job's conclusion reported as the ``kb-check`` check run."""
    pull = github.double.pulls[number]
    runner = tmp_path / f"runner-{number}"
    _git(tmp_path, "clone", "-q", str(github.double.bare_path), str(runner))
    _git(runner, "fetch", "-q", "origin", f"refs/pull/{number}/head")
    _git(runner, "checkout", "-q", pull.head_sha)
    base = github.double.branch_sha("main") or ""
    result = cli("check", "--gate", "--pull-request", "--base", base, "--format", "github", cwd=runner)
    github.double.add_check_run(pull.head_sha, "kb-check", conclusion="success" if result.code == 0 else "failure")
    return result


def _main_commits(github: ForgeSetup, since: str) -> list[pygit2.Commit]:
    bare = github.double.bare
    tip = bare.references["refs/heads/main"].peel(pygit2.Commit)
    out = []
    for commit in bare.walk(tip.id, pygit2.enums.SortMode.TOPOLOGICAL):
        if str(commit.id) == since:
            break
        out.append(commit)
    return out


@pytest.mark.parametrize("linear", [False, True], ids=["merge-commit", "linear-history"])
def test_a_persons_evidence_pull_request_reaches_main_and_kb_proposes_from_it(
    github: ForgeSetup, tmp_path: Path, cli: Cli, linear: bool
) -> None:
    repo = _protect(github, linear)
    start = github.double.branch_sha("main") or ""
    added: list[str] = []
    number = _persons_pull(github, tmp_path, "alice/lyon", lambda r: added.append(add_evidence(r, NOTE.encode(), "lyon.md", "document")))
    head = github.double.pulls[number].head_sha

    checked = _ci_check(github, tmp_path, cli, number)
    assert checked.code == 0, checked.out
    gated = cli("pr", "gate", str(number), cwd=repo.root)
    assert gated.code == 0, gated.out + gated.err
    assert f"evidence only: {added[0]}; approved by the reviewer" in gated.out
    assert github.double.contexts_on(head) == {"kb/gate": "success", "kb-check": "success"}
    assert [(r["_login"], r["state"], r["commit_id"]) for r in github.double.pulls[number].reviews] == [("kb-reviewer", "APPROVED", head)]
    assert cli("pr", "gate", str(number)).code == 0 and len(github.double.pulls[number].reviews) == 1  # no second approval

    merged = cli("pr", "merge", str(number), "--no-index")
    assert merged.code == 0, merged.out + merged.err
    pull = github.double.pulls[number]
    assert pull.merged
    commits = _main_commits(github, start)
    main = commits[0]
    assert str(main.id) == pull.merge_sha and main.committer.name == "GitHub"  # merged through the API, under its rules
    assert parse_trailers(main.message)["Kb-Evidence"] == added[0] and parse_trailers(main.message)["Kb-Intake"] == f"#{number} by alice"
    # nothing reached main but the pull request: its merge commit and head, or its one squash commit
    assert {str(c.id) for c in commits} == ({pull.merge_sha} if linear else {pull.merge_sha, head})
    assert main.tree.id == github.double.bare[head].peel(pygit2.Commit).tree.id
    assert str(Repo(repo.root).head().id) == pull.merge_sha

    after = Repo(repo.root)
    proposal = propose(after, [added[0]])  # what the propose workflow does on that push
    assert proposal.head is not None
    assert added[0] in parse_trailers(after.git[proposal.head].peel(pygit2.Commit).message)["Kb-Evidence"]


def test_a_persons_pull_request_with_pages_gets_the_gate_but_kb_does_not_merge_it(github: ForgeSetup, tmp_path: Path, cli: Cli) -> None:
    repo = _protect(github)

    def page(r: Repo) -> None:
        (r.root / "knowledge" / "lyon.md").write_text(NOTE, encoding="utf-8")
        r.commit_worktree_paths(["knowledge/lyon.md"], "A page by hand")

    number = _persons_pull(github, tmp_path, "alice/page", page)
    gated = cli("pr", "gate", str(number), cwd=repo.root)
    head = github.double.pulls[number].head_sha
    assert "kb/gate" in github.double.contexts_on(head)  # a person's pull request gets the status too
    assert not github.double.pulls[number].reviews  # kb does not approve a person's pages
    assert gated.code in (0, 1)
    refused = cli("pr", "merge", str(number), "--no-index")
    assert refused.code == 18 and "does not only add evidence" in refused.err
    assert not github.double.pulls[number].merged


def test_evidence_from_a_fork_is_gated_but_waits_for_a_person(github: ForgeSetup, tmp_path: Path, cli: Cli) -> None:
    repo = _protect(github)
    number = _persons_pull(github, tmp_path, "alice/fork", lambda r: add_evidence(r, NOTE.encode(), "lyon.md", "document") and None)
    head = github.double.pulls[number].head_sha
    assert _ci_check(github, tmp_path, cli, number).code == 0
    gated = cli("pr", "gate", str(number), "--no-approve", cwd=repo.root)  # what kb-review runs for a fork's pull request
    assert gated.code == 0 and "evidence only:" in gated.out and "approved" not in gated.out
    assert github.double.contexts_on(head)["kb/gate"] == "success" and not github.double.pulls[number].reviews
    refused = cli("pr", "merge", str(number), "--no-index")
    assert refused.code == 11 and "has no approval by kb-reviewer" in refused.err
    assert not github.double.pulls[number].merged


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("kb.config.yaml", None),  # allow-lists the secret it adds
        (".github/workflows/kb-check.yml", "name: kb-check\non: pull_request\njobs: {}\n"),
        ("reviewers/allowed_signers", "mallory@ci ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEvil\n"),
    ],
)
def test_a_pull_request_editing_what_judges_it_is_refused(
    github: ForgeSetup, tmp_path: Path, cli: Cli, path: str, text: str | None
) -> None:
    repo = _protect(github)
    secret = "AKIA" + "QWERTYUIOPASDFGH"

    def edit(r: Repo) -> None:
        target = r.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if text is None:  # a page with a key, and the config allow-listing it
            index = r.root / "knowledge" / "index.md"
            index.write_text(index.read_text(encoding="utf-8") + f"\n<!-- The deploy key is {secret}. -->\n", encoding="utf-8")
            fingerprints = re.findall(r"fingerprint ([0-9a-f]{16})", cli("check", cwd=r.root).out)
            assert fingerprints
            config = target.read_text(encoding="utf-8") + "secrets:\n  allow: [" + ", ".join(fingerprints) + "]\n"
            target.write_text(config, encoding="utf-8")
            assert cli("check", cwd=r.root).code == 0  # the PR's own config would pass it
            r.commit_worktree_paths([path, "knowledge/index.md"], "Allow my key")
        else:
            target.write_text(text, encoding="utf-8")
            r.commit_worktree_paths([path], "Edit the rules")

    number = _persons_pull(github, tmp_path, "alice/rules", edit)
    head = github.double.pulls[number].head_sha
    checked = _ci_check(github, tmp_path, cli, number)
    assert checked.code == 1 and f"file={path},line=1,title=change.governance::" in checked.out, checked.out
    if text is None:
        assert "secret.found" in checked.out  # judged by the base's allow-list, not the PR's
    gated = cli("pr", "gate", str(number), cwd=repo.root)
    assert gated.code == 1 and "kb/gate" in gated.out
    assert github.double.contexts_on(head) == {"kb-check": "failure", "kb/gate": "failure"}
    assert not github.double.pulls[number].reviews
    assert github.double.press_merge(number, "alice").status == 405  # the protection refuses it
    assert cli("pr", "merge", str(number), "--no-index").code != 0 and not github.double.pulls[number].merged
