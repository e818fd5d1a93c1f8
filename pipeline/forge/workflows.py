"""The GitHub Actions workflows ``kb github init`` writes into ``.github/workflows/`` (docs/github.md).

- ``kb-check.yml``: ``kb check --gate --base BASE --format github`` (every check plus the
  grounding gate of the change) on every pull request and on ``merge_group`` (merge queues),
  with the full history so the base commit is there; the job has no ``if:``, because a skipped
  job reports success even as a required check;
- ``kb-review.yml``: the Reviewer on pull requests from ``kb/`` branches, as the reviewer App,
  from a checkout of the base branch (never the pull request's code or config);
- ``kb-propose.yml``: the Proposer when evidence lands on the default branch, and on demand;
- ``kb-index.yml``: ``kb sync`` on every push to the default branch;
- ``kb-consolidate.yml``: ``kb consolidate --if-needed`` weekly and on demand (``workflow_dispatch``:
  GitHub disables schedules of idle public repositories).

Every job has least-privilege ``permissions:``, a concurrency group, actions pinned by commit SHA,
and no ``${{ github.event.* }}`` inside ``run:`` (values reach scripts through ``env:``). The
branch filters name the repository's ``forge.default_branch``.
"""

from __future__ import annotations

import json
from pathlib import Path

from kb.repo import atomic_write

# Each SHA is the commit its tag names in the action's repository (verified as docs/github.md,
# "Pinned actions", says); all three run on node24.
CHECKOUT = "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1 # v7.0.1"
SETUP_PYTHON = "actions/setup-python@5fda3b95a4ea91299a34e894583c3862153e4b97 # v7.0.0"
APP_TOKEN = "actions/create-github-app-token@1b10c78c7865c340bc4f6099eb2f838309f1e8c3 # v3.1.1"

# What each App's installation token may do, a subset of the App's permissions (docs/github.md):
# the Proposer pushes work branches, opens and labels pull requests and sets the gate's status;
# the Reviewer pushes refs/notes/kb-reviews, reviews and sets the gate's status.
TOKEN_PERMISSIONS = {
    "proposer": {"contents": "write", "pull-requests": "write", "issues": "write", "statuses": "write"},
    "reviewer": {"contents": "write", "pull-requests": "write", "statuses": "write"},
}

_SETUP = f"""\
      - uses: {SETUP_PYTHON}
        with:
          python-version: "3.11"
      - name: Install kb
        env:
          KB_PACKAGE: ${{{{ vars.KB_PACKAGE || 'kb' }}}}
        run: python -m pip install "$KB_PACKAGE"
"""


def _token(app: str, step_id: str = "app-token") -> str:
    upper = app.upper()
    scopes = "".join(f"          permission-{name}: {level}\n" for name, level in TOKEN_PERMISSIONS[app].items())
    return f"""\
      - uses: {APP_TOKEN}
        id: {step_id}
        with:
          client-id: ${{{{ vars.KB_{upper}_APP_CLIENT_ID }}}}
          private-key: ${{{{ secrets.KB_{upper}_APP_KEY }}}}
{scopes}"""


def _checkout(ref: str = "", token: bool = False) -> str:
    """The full history (``fetch-depth: 0``): the check's base and the Reviewer's merge base
    must be there."""
    lines = [f"      - uses: {CHECKOUT}", "        with:", "          fetch-depth: 0", "          persist-credentials: false"]
    if ref:
        lines.append(f"          ref: {ref}")
    if token:
        lines.append("          token: ${{ steps.app-token.outputs.token }}")
    return "\n".join(lines) + "\n"


_IDENTITY = """\
      - name: Git identity
        run: |
          git config user.name "kb"
          git config user.email "kb@users.noreply.github.com"
"""

CHECK = f"""\
# Written by `kb github init` (docs/github.md). Make "kb-check" a required status check.
name: kb-check
on:
  pull_request:
  merge_group:
permissions: {{}}
concurrency:
  group: kb-check-${{{{ github.ref }}}}
  cancel-in-progress: true
jobs:
  kb-check:
    name: kb-check
    runs-on: ubuntu-latest
    permissions:
      contents: read
    steps:
{_checkout()}{_SETUP}      - name: Checks and the grounding gate
        env:
          KB_BASE: ${{{{ github.event.pull_request.base.sha || github.event.merge_group.base_sha }}}}
        run: kb check --gate --base "$KB_BASE" --format github
"""

REVIEW = f"""\
# Written by `kb github init` (docs/github.md). Runs as the reviewer GitHub App, from the base branch.
name: kb-review
on:
  pull_request:
    types: [opened, synchronize, reopened]
permissions: {{}}
concurrency:
  group: kb-review-${{{{ github.event.pull_request.number }}}}
  cancel-in-progress: true
jobs:
  review:
    name: kb-review
    if: startsWith(github.head_ref, 'kb/')
    runs-on: ubuntu-latest
    permissions:
      contents: read
    steps:
{_token("reviewer")}{_checkout(ref="${{ github.event.pull_request.base.ref }}")}{_SETUP}{_IDENTITY}      - name: Review
        env:
          KB_REVIEWER_TOKEN: ${{{{ steps.app-token.outputs.token }}}}
          KB_PROPOSER_TOKEN: ${{{{ steps.app-token.outputs.token }}}}
          KB_SIGNING_KEY_TEXT: ${{{{ secrets.KB_REVIEW_SIGNING_KEY }}}}
          PR_NUMBER: ${{{{ github.event.pull_request.number }}}}
        run: |
          export KB_SIGNING_KEY="$RUNNER_TEMP/review_ed25519"
          umask 077 && printf '%s\\n' "$KB_SIGNING_KEY_TEXT" > "$KB_SIGNING_KEY"
          kb pr review "$PR_NUMBER"
"""


def _propose(branches: str) -> str:
    return f"""\
# Written by `kb github init` (docs/github.md). Runs as the proposer GitHub App.
name: kb-propose
on:
  push:
    branches: [{branches}]
    paths: ["evidence/**"]
  workflow_dispatch:
permissions: {{}}
concurrency:
  group: kb-propose
  cancel-in-progress: false
jobs:
  propose:
    name: kb-propose
    runs-on: ubuntu-latest
    permissions:
      contents: read
    steps:
{_token("proposer")}{_checkout()}{_SETUP}{_IDENTITY}      - name: Propose and open pull requests
        env:
          KB_PROPOSER_TOKEN: ${{{{ steps.app-token.outputs.token }}}}
        run: |
          kb propose
          for branch in $(git for-each-ref --format='%(refname:short)' 'refs/heads/kb/*'); do
            kb pr open "$branch"
          done
"""


def _index(branches: str) -> str:
    return f"""\
# Written by `kb github init` (docs/github.md). Rebuilds the index from the merged commit.
name: kb-index
on:
  push:
    branches: [{branches}]
permissions: {{}}
concurrency:
  group: kb-index
  cancel-in-progress: true
jobs:
  index:
    name: kb-index
    runs-on: ubuntu-latest
    permissions:
      contents: read
    steps:
{_checkout()}{_SETUP}      - name: Rebuild the index
        run: kb index build
"""


CONSOLIDATE = f"""\
# Written by `kb github init` (docs/github.md). The scheduled slot for consolidation jobs.
name: kb-consolidate
on:
  schedule:
    - cron: "17 3 * * 1"
  workflow_dispatch:
permissions: {{}}
# One group with kb-propose: both write kb/ branches and open pull requests; never two at once.
concurrency:
  group: kb-propose
  cancel-in-progress: false
jobs:
  consolidate:
    name: kb-consolidate
    runs-on: ubuntu-latest
    permissions:
      contents: read
    steps:
{_token("proposer")}{_token("reviewer", "reviewer-token")}{_checkout()}{_SETUP}{_IDENTITY}      - name: Consolidate when a threshold is passed
        env:
          KB_PROPOSER_TOKEN: ${{{{ steps.app-token.outputs.token }}}}
          KB_REVIEWER_TOKEN: ${{{{ steps.reviewer-token.outputs.token }}}}
        # each batch is a pull request (forge.kind github), reviewed by the reviewer App from this
        # checkout of the default branch; the coverage record is
        # pushed to the default branch, which the proposer App must be allowed to do (docs/github.md)
        run: kb consolidate --if-needed --no-index
"""

WORKFLOW_NAMES = ("kb-check.yml", "kb-review.yml", "kb-propose.yml", "kb-index.yml", "kb-consolidate.yml")


def branch_filter(branch: str) -> str:
    """``branch`` as one quoted entry of an Actions ``branches:`` filter: the filter's pattern
    characters a git branch name may hold (``+``, ``!``, ``]``) are escaped to match themselves."""
    for char in "+!]":
        branch = branch.replace(char, "\\" + char)
    return json.dumps(branch)


def render_workflows(default_branch: str) -> dict[str, str]:
    """File name -> text of each workflow, with ``default_branch`` in the push filters."""
    branches = branch_filter(default_branch)
    texts = (CHECK, REVIEW, _propose(branches), _index(branches), CONSOLIDATE)
    return dict(zip(WORKFLOW_NAMES, texts, strict=True))


def write_workflows(root: Path, force: bool = False) -> list[tuple[str, str]]:
    """Write each workflow for the repository at ``root`` (its ``forge.default_branch``); one that
    exists with other content is kept unless ``force``."""
    from kb.config import load_config
    from kb.errors import ConflictError

    workflows = render_workflows(load_config(root).forge.default_branch)
    folder = root / ".github" / "workflows"
    folder.mkdir(parents=True, exist_ok=True)
    plan = []
    for name, text in workflows.items():
        path = folder / name
        if path.exists() and path.read_text(encoding="utf-8") != text and not force:
            raise ConflictError(f"{path} exists with other content", hint="pass --force to overwrite it (`kb github init --force`)")
        plan.append((path, "unchanged" if path.exists() and path.read_text(encoding="utf-8") == text else "wrote"))
    for path, action in plan:
        if action == "wrote":
            atomic_write(path, workflows[path.name].encode("utf-8"))
    return [(str(path), action) for path, action in plan]
