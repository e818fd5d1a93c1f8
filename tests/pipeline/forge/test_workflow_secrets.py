"""Where the generated workflows' secrets can go (issue 24, item 4), read from the files
`kb github init` writes: a pull request's code or its edited workflow never reaches a secret, and
every job installs exactly the kb of one pinned commit (item 1)."""

from __future__ import annotations

import re
from typing import Any

import yaml

from pipeline.forge.workflows import KbSource, render_workflows

SOURCE = KbSource("https://github.com/acme/kb-source", "0123456789abcdef0123456789abcdef01234567")
# Events whose run uses the workflow file of the default branch (not of a pull request's head),
# with GITHUB_REF on the default branch, which the environments' deployment rule admits.
DEFAULT_BRANCH_EVENTS = {"pull_request_target", "push", "schedule", "workflow_dispatch"}


def _workflows() -> dict[str, dict[str, Any]]:
    out = {}
    for name, text in render_workflows("main", SOURCE).items():
        data = yaml.safe_load(text)
        data["on"] = data.pop(True)
        out[name] = data
    return out


def _uses_secret(job: dict[str, Any]) -> bool:
    return "secrets." in yaml.safe_dump(job)


def test_jobs_that_hold_a_secret_run_only_from_the_default_branch_in_an_environment() -> None:
    holders = []
    for name, data in _workflows().items():
        for job_id, job in data["jobs"].items():
            if not _uses_secret(job):
                continue
            holders.append((name, job_id, job["environment"]))
            assert set(data["on"]) <= DEFAULT_BRANCH_EVENTS, (name, data["on"])  # never pull_request / merge_group
            if "push" in data["on"]:
                assert data["on"]["push"]["branches"] == ["main"]
    assert holders == [
        ("kb-review.yml", "review", "kb-reviewer"),
        ("kb-review.yml", "merge-evidence", "kb-proposer"),
        ("kb-propose.yml", "propose", "kb-proposer"),
        ("kb-consolidate.yml", "consolidate", "kb-consolidate"),
    ]


def test_the_check_a_pull_request_can_edit_holds_nothing_and_refuses_the_edit() -> None:
    check = _workflows()["kb-check.yml"]
    assert set(check["on"]) == {"pull_request", "merge_group"}
    job = check["jobs"]["kb-check"]
    assert not _uses_secret(job) and "environment" not in job and job["permissions"] == {"contents": "read"}
    assert not any("create-github-app-token" in s.get("uses", "") for s in job["steps"])
    assert "--pull-request" in job["steps"][-1]["run"]  # an edit of config, signers or workflows is an error


def test_no_job_with_a_secret_checks_out_or_runs_the_pull_requests_code() -> None:
    for name, data in _workflows().items():
        for job in data["jobs"].values():
            for step in job["steps"]:
                if step.get("uses", "").startswith("actions/checkout@"):
                    assert "ref" not in step["with"] and step["with"]["persist-credentials"] is False, name
                run = step.get("run", "")
                # nothing from the checkout is executed: no script, no build, no install of the tree
                assert not re.search(r"(^|\s)(\./|bash |sh |make|python (?!-m pip install \"\$KB_REQUIREMENT\"))", run), (name, run)
                assert "pip install" not in run or run.startswith('python -m pip install "$KB_REQUIREMENT" &&'), (name, run)


def test_every_job_installs_kb_from_one_pinned_commit_never_an_index_name() -> None:
    installs = []
    for data in _workflows().values():
        for job in data["jobs"].values():
            steps = [s for s in job["steps"] if "pip install" in s.get("run", "")]
            assert len(steps) == 1
            installs.append(steps[0]["env"]["KB_REQUIREMENT"])
    assert installs and set(installs) == {f"kb-git @ git+{SOURCE.url}@{SOURCE.commit}"}
    assert all(re.fullmatch(r"kb-git @ git\+https://\S+@[0-9a-f]{40}", r) for r in installs)
