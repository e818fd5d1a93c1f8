"""The GitHub Actions workflows ``kb github init`` writes into ``.github/workflows/`` (docs/github.md).

- ``kb-check.yml``: ``kb check --format github`` on every pull request and on ``merge_group``
  (merge queues); the job has no ``if:``, because a skipped job reports success even as a
  required check;
- ``kb-review.yml``: the Reviewer on pull requests from ``kb/`` branches, as the reviewer App,
  from a checkout of the base branch (never the pull request's code or config);
- ``kb-propose.yml``: the Proposer when evidence lands on the default branch, and on demand;
- ``kb-index.yml``: ``kb sync`` on every push to the default branch;
- ``kb-consolidate.yml``: a scheduled slot (with ``workflow_dispatch``: GitHub disables schedules
  of idle public repositories).

Every job has least-privilege ``permissions:``, a concurrency group, actions pinned by commit SHA,
and no ``${{ github.event.* }}`` inside ``run:`` (values reach scripts through ``env:``).
"""

from __future__ import annotations

from pathlib import Path

from kb.repo import atomic_write

CHECKOUT = "actions/checkout@11bd71901bbe5b1630ceea73d27597364c9af683 # v4.2.2"
SETUP_PYTHON = "actions/setup-python@a26af69be951a213d495a4c3e4e4022e16d87065 # v5.6.0"
APP_TOKEN = "actions/create-github-app-token@d72941d797fd3113feb6b93fd0dec494b13a2547 # v1.12.0"

_SETUP = f"""\
      - uses: {SETUP_PYTHON}
        with:
          python-version: "3.11"
      - name: Install kb
        env:
          KB_PACKAGE: ${{{{ vars.KB_PACKAGE || 'kb' }}}}
        run: python -m pip install "$KB_PACKAGE"
"""


def _token(app: str) -> str:
    upper = app.upper()
    return f"""\
      - uses: {APP_TOKEN}
        id: app-token
        with:
          app-id: ${{{{ vars.KB_{upper}_APP_ID }}}}
          private-key: ${{{{ secrets.KB_{upper}_APP_KEY }}}}
"""


def _checkout(ref: str = "", depth: int = 0, token: bool = False) -> str:
    lines = [f"      - uses: {CHECKOUT}", "        with:", f"          fetch-depth: {depth}", "          persist-credentials: false"]
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
    runs-on: ubuntu-latest
    permissions:
      contents: read
    steps:
{_checkout(depth=1)}{_SETUP}      - name: Checks
        run: kb check --format github
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

PROPOSE = f"""\
# Written by `kb github init` (docs/github.md). Runs as the proposer GitHub App.
name: kb-propose
on:
  push:
    branches: [main]
    paths: ["evidence/**"]
  workflow_dispatch:
permissions: {{}}
concurrency:
  group: kb-propose
  cancel-in-progress: false
jobs:
  propose:
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

INDEX = f"""\
# Written by `kb github init` (docs/github.md). Rebuilds the index from the merged commit.
name: kb-index
on:
  push:
    branches: [main]
permissions: {{}}
concurrency:
  group: kb-index
  cancel-in-progress: true
jobs:
  index:
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
concurrency:
  group: kb-consolidate
  cancel-in-progress: false
jobs:
  consolidate:
    runs-on: ubuntu-latest
    permissions:
      contents: read
    steps:
{_token("proposer")}{_checkout()}{_SETUP}{_IDENTITY}      - name: Propose what is pending
        env:
          KB_PROPOSER_TOKEN: ${{{{ steps.app-token.outputs.token }}}}
        run: |
          kb propose
          for branch in $(git for-each-ref --format='%(refname:short)' 'refs/heads/kb/*'); do
            kb pr open "$branch"
          done
"""

WORKFLOWS = {
    "kb-check.yml": CHECK,
    "kb-review.yml": REVIEW,
    "kb-propose.yml": PROPOSE,
    "kb-index.yml": INDEX,
    "kb-consolidate.yml": CONSOLIDATE,
}


def write_workflows(root: Path, force: bool = False) -> list[tuple[str, str]]:
    """Write each workflow; one that exists with other content is kept unless ``force``."""
    from kb.errors import ConflictError

    folder = root / ".github" / "workflows"
    folder.mkdir(parents=True, exist_ok=True)
    plan = []
    for name, text in WORKFLOWS.items():
        path = folder / name
        if path.exists() and path.read_text(encoding="utf-8") != text and not force:
            raise ConflictError(f"{path} exists with other content", hint="pass --force to overwrite it (`kb github init --force`)")
        plan.append((path, "unchanged" if path.exists() and path.read_text(encoding="utf-8") == text else "wrote"))
    for path, action in plan:
        if action == "wrote":
            atomic_write(path, WORKFLOWS[path.name].encode("utf-8"))
    return [(str(path), action) for path, action in plan]
