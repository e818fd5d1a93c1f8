"""The workflows `kb github init` writes (parsed: triggers, permissions, pins, no event text in
scripts), the `forge:` config's validation, and the same jobs on the local forge."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kb.config import parse_config
from kb.errors import ConfigError
from kb.repo import Repo
from pipeline.forge.changes import list_changes, merge_change, open_change, review_change
from pipeline.forge.local import LocalForge
from pipeline.forge.workflows import TOKEN_PERMISSIONS, WORKFLOW_NAMES, KbSource, branch_filter, render_workflows
from pipeline.propose import propose
from pipeline.records import parse_trailers
from tests.conftest import CliResult

Cli = Callable[..., CliResult]
SOURCE = KbSource("https://github.com/acme/kb-source", "0123456789abcdef0123456789abcdef01234567")
PIN = ("--kb-source", SOURCE.url, "--kb-commit", SOURCE.commit)


def _load(root: Path, name: str) -> dict[str, Any]:
    data = yaml.safe_load((root / ".github" / "workflows" / name).read_text(encoding="utf-8"))
    data["on"] = data.pop(True)  # PyYAML reads the key `on:` as True
    return data


def test_github_init_writes_least_privilege_pinned_workflows(sample_repo: tuple[Repo, dict[str, str]], cli: Cli) -> None:
    repo, _ = sample_repo
    result = cli("github", "init", *PIN, cwd=repo.root)
    assert result.code == 0 and result.out.count("wrote .github/workflows/") == len(WORKFLOW_NAMES)
    check, review = _load(repo.root, "kb-check.yml"), _load(repo.root, "kb-review.yml")
    # The required check runs on every pull request and merge-queue entry, unfiltered, and can be
    # neither skipped (a skipped job reports success) nor allowed to fail.
    assert check["on"] == {"pull_request": None, "merge_group": None}
    job = check["jobs"]["kb-check"]
    assert "if" not in job and "continue-on-error" not in job and job["name"] == "kb-check"
    assert not any("if" in step or "continue-on-error" in step for step in job["steps"])
    # every check plus the grounding gate of the change against the PR's or merge group's base,
    # which reaches the script through env:, with the full history so the base commit exists
    gate = job["steps"][-1]
    assert gate["run"] == 'kb check --gate --pull-request --base "$KB_BASE" --format github'
    assert gate["env"] == {"KB_BASE": "${{ github.event.pull_request.base.sha || github.event.merge_group.base_sha }}"}
    checkout = next(s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 0
    # every pull request is gated (no if:), from the default branch's copy of the workflow and a
    # checkout of the default branch (no ref: pull_request_target checks out the base)
    assert review["on"] == {"pull_request_target": {"types": ["opened", "synchronize", "reopened"]}}
    assert "if" not in review["jobs"]["review"]
    checkout = next(s for s in review["jobs"]["review"]["steps"] if s.get("uses", "").startswith("actions/checkout@"))
    assert "ref" not in checkout["with"]
    assert review["jobs"]["merge-evidence"]["if"] == "needs.review.outputs.evidence == 'true'"
    propose = _load(repo.root, "kb-propose.yml")["on"]
    assert propose == {"push": {"branches": ["main"], "paths": ["evidence/**"]}, "workflow_dispatch": None}
    consolidate = _load(repo.root, "kb-consolidate.yml")["on"]
    assert set(consolidate) == {"schedule", "workflow_dispatch"} and len(consolidate["schedule"][0]["cron"].split()) == 5
    assert _load(repo.root, "kb-index.yml")["on"] == {"push": {"branches": ["main"]}}
    groups = {name: _load(repo.root, name)["concurrency"]["group"] for name in WORKFLOW_NAMES}
    assert groups["kb-propose.yml"] == "kb-propose"
    assert groups["kb-consolidate.yml"] == "kb-consolidate-${{ github.event_name }}"  # a pending scheduled run is never dropped
    assert all(_load(repo.root, n)["concurrency"]["cancel-in-progress"] is False for n in ("kb-propose.yml", "kb-consolidate.yml"))
    assert (
        groups["kb-check.yml"] == "kb-check-${{ github.ref }}"
        and groups["kb-review.yml"] == "kb-review-${{ github.event.pull_request.number }}"
    )
    for name in WORKFLOW_NAMES:
        data = _load(repo.root, name)
        assert data["permissions"] == {}
        for job in data["jobs"].values():
            assert job["permissions"] == {"contents": "read"}
            for step in job["steps"]:
                if "uses" in step:
                    assert re.fullmatch(r"[\w-]+/[\w-]+@[0-9a-f]{40}", step["uses"]), step["uses"]
                if step.get("uses", "").startswith("actions/create-github-app-token@"):
                    app = "reviewer" if "REVIEWER" in step["with"]["client-id"] else "proposer"
                    scopes = {k.removeprefix("permission-"): v for k, v in step["with"].items() if k.startswith("permission-")}
                    assert scopes == TOKEN_PERMISSIONS[app], name  # the App token is narrowed too
                assert "${{" not in step.get("run", "")  # values reach scripts through env:, never expanded
    consolidate = _load(repo.root, "kb-consolidate.yml")["jobs"]["consolidate"]["steps"]
    minted = [s["with"]["client-id"] for s in consolidate if s.get("uses", "").startswith("actions/create-github-app-token@")]
    assert minted == [
        "${{ vars.KB_PROPOSER_APP_CLIENT_ID }}",
        "${{ vars.KB_REVIEWER_APP_CLIENT_ID }}",
    ]  # batches are PRs reviewed by the other App
    assert consolidate[-1]["run"].strip().endswith("kb consolidate --if-needed --no-index")
    assert consolidate[-1]["env"]["KB_SIGNING_KEY_TEXT"] == "${{ secrets.KB_REVIEW_SIGNING_KEY }}"  # batches are signed
    text = "".join(render_workflows("main", SOURCE).values())
    assert re.findall(r"@[0-9a-f]{40} # v\d+\.\d+\.\d+\n", text) and not re.search(r"uses: \S+@(?![0-9a-f]{40} # v)", text)
    again = cli("github", "init", *PIN)
    assert again.code == 0 and again.out.count("unchanged") == len(WORKFLOW_NAMES)
    (repo.root / ".github/workflows/kb-check.yml").write_text("name: mine\n")
    assert cli("github", "init", *PIN).code == 8
    assert (repo.root / ".github/workflows/kb-check.yml").read_text() == "name: mine\n"


def test_the_workflows_filter_on_the_configured_default_branch(sample_repo: tuple[Repo, dict[str, str]], cli: Cli) -> None:
    repo, _ = sample_repo
    config = repo.root / "kb.config.yaml"
    config.write_text(config.read_text(encoding="utf-8") + "forge:\n  default_branch: trunk\n", encoding="utf-8")
    assert cli("github", "init", *PIN, cwd=repo.root).code == 0
    assert _load(repo.root, "kb-propose.yml")["on"]["push"] == {"branches": ["trunk"], "paths": ["evidence/**"]}
    assert _load(repo.root, "kb-index.yml")["on"] == {"push": {"branches": ["trunk"]}}
    assert "main" not in "".join(p.read_text() for p in (repo.root / ".github/workflows").iterdir())
    # the pull-request workflows follow whatever base the PR targets: no branch filter to keep in step
    assert _load(repo.root, "kb-check.yml")["on"] == {"pull_request": None, "merge_group": None}
    # a later change of the default branch is a change of the files, kept unless --force
    config.write_text(config.read_text(encoding="utf-8").replace("trunk", "release"), encoding="utf-8")
    assert cli("github", "init", *PIN).code == 8
    assert cli("github", "init", *PIN, "--force").out.count("wrote") == 2
    assert _load(repo.root, "kb-index.yml")["on"] == {"push": {"branches": ["release"]}}
    # filter pattern characters a branch name may hold match themselves
    assert yaml.safe_load(f"[{branch_filter('c++!')}]") == ["c\\+\\+\\!"]


@pytest.mark.parametrize(
    ("forge", "message"),
    [
        ("{kind: github}", "kind github needs `repository: owner/name`"),
        ("{kind: github, repository: acme}", "expected owner/name"),
        ("{kind: github, repository: a/b, proposer_token_env: ghp_secret123}", "tokens never go in the config"),
        ("{kind: gitlab}", "forge.kind"),
        ("{token: x}", "unknown key `forge.token`"),
        ("{default_branch: 'a..b'}", "'a..b' is not a valid git branch name"),
    ],
)
def test_the_forge_config_is_validated(forge: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        parse_config(f"version: 1\nforge: {forge}\n")
    assert "ghp_secret123" not in caught.value.message


def test_the_local_forge_runs_the_same_jobs_with_notes_and_a_local_merge(sample_repo: tuple[Repo, dict[str, str]]) -> None:
    repo, _ = sample_repo
    branch = propose(repo).branch
    forge = LocalForge(repo)
    opened = open_change(repo, branch, forge)
    assert opened.change.branch == branch and opened.gate_ok and forge.checks(opened.change.head).states == {"kb/gate": "success"}
    assert [s.change.branch for s in list_changes(repo, forge)] == [branch]
    assert review_change(repo, branch, forge).review.verdict == "approve"
    merged = merge_change(repo, branch, forge, build_index=False)
    head = Repo(repo.root).head()
    assert str(head.id) == merged.commit and parse_trailers(head.message)["Kb-Head"] == opened.change.head
    assert branch not in Repo(repo.root).git.branches.local
