"""The GitHub Actions workflows ``kb github init`` writes into ``.github/workflows/`` (docs/github.md).

- ``kb-check.yml``: ``kb check --gate --pull-request --base BASE --format github`` (every check
  plus the grounding gate of the change, an edit of the config, signers or workflows refused) on
  every pull request and on ``merge_group`` (merge queues), with the full history so the base
  commit is there; the job has no ``if:`` (a skipped job reports success even as a required
  check) and no secret;
- ``kb-review.yml``: on ``pull_request_target`` (the default branch's copy of the file runs, never
  the pull request's), as the reviewer App from a checkout of the default branch: ``kb pr review``
  on kb's own pull requests, ``kb pr gate`` (the ``kb/gate`` status) on everyone else's; a job
  ``kb-merge-evidence`` then merges a person's evidence-only pull request as the proposer App;
- ``kb-propose.yml``: the Proposer when evidence lands on the default branch, and on demand;
- ``kb-index.yml``: ``kb index build`` on every push to the default branch;
- ``kb-consolidate.yml``: ``kb consolidate --if-needed`` weekly and on demand (``workflow_dispatch``:
  GitHub disables schedules of idle public repositories), with the signing key, in a concurrency
  group of its own per event that is never cancelled.

Every job that holds a secret names an ``environment:`` (``kb-reviewer``, ``kb-proposer``,
``kb-consolidate``), whose deployment branch rule admits only the default branch, so a workflow a
pull request edits cannot reach the App keys or the signing key.
Every job has least-privilege ``permissions:``, a concurrency group, actions pinned by commit SHA,
and no ``${{ github.event.* }}`` inside ``run:`` (values reach scripts through ``env:``). The
branch filters name the repository's ``forge.default_branch``.

Each job installs exactly one kb: the distribution built from kb's git repository at a full commit
SHA (``KbSource``: ``kb-git @ git+https://...@<40 hex>``), never a name from an index (``kb`` on
PyPI is another project). ``kb github init`` pins the commit this kb was installed from (its
``direct_url.json``: a git install names it, an editable install is a clone whose HEAD and
``origin`` say it), or the one ``--kb-source``/``--kb-commit`` name.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kb import DISTRIBUTION
from kb.errors import UsageError
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

COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
# An https URL of a git repository with nothing a shell, YAML or a PEP 508 reference would read
# (no quotes, spaces, `@`, `#`, `$`): it is written into every workflow.
SOURCE_RE = re.compile(r"^https://[A-Za-z0-9.-]+(?::[0-9]{1,5})?(?:/[A-Za-z0-9._~-]+)+$")
_SCP_RE = re.compile(r"^(?:ssh://)?git@([A-Za-z0-9.-]+)[:/](.+)$")


@dataclass(frozen=True)
class KbSource:
    """The kb the workflows install: kb's git repository (https) at one full commit SHA."""

    url: str
    commit: str

    @property
    def requirement(self) -> str:
        return f"{DISTRIBUTION} @ git+{self.url}@{self.commit}"


def parse_source(url: str, commit: str) -> KbSource:
    """A source from ``--kb-source`` and ``--kb-commit``; anything that could float or break the
    workflows' text is a UsageError."""
    commit = commit.strip().lower()
    if not COMMIT_RE.match(commit):
        raise UsageError(
            f"--kb-commit {commit!r} is not a full commit SHA: a branch, tag or short id can move",
            hint="give the 40 hex digits of the commit (`git rev-parse HEAD` in kb's repository)",
        )
    url = _https(url.strip()) or url
    if not SOURCE_RE.match(url):
        raise UsageError(
            f"--kb-source {url!r} is not the https URL of a git repository",
            hint="e.g. --kb-source https://github.com/OWNER/kb (no user, quotes, spaces, '@' or '#')",
        )
    return KbSource(url, commit)


def _https(url: str) -> str | None:
    """``url`` as https (an ``git@host:path`` or ``ssh://git@host/path`` remote is read as its https
    twin), or None if it is neither."""
    if url.startswith("https://"):
        return url
    scp = _SCP_RE.match(url)
    return f"https://{scp.group(1)}/{scp.group(2)}" if scp else None


def source_of_install(direct_url: Mapping[str, Any]) -> KbSource | None:
    """Where an installed kb came from, by its PEP 610 ``direct_url.json``: a git install names the
    commit; an install from a folder (editable or not) is pinned to the HEAD of the clone it is,
    with the URL of its ``origin``. None when that does not say (an index, an archive, no remote)."""
    url = str(direct_url.get("url", ""))
    vcs = direct_url.get("vcs_info")
    if isinstance(vcs, dict) and vcs.get("vcs") == "git":
        https = _https(url)
        commit = str(vcs.get("commit_id", ""))
        return KbSource(https, commit) if https and SOURCE_RE.match(https) and COMMIT_RE.match(commit) else None
    if "dir_info" in direct_url and url.startswith("file://"):
        from urllib.parse import unquote, urlparse

        return _source_of_clone(Path(unquote(urlparse(url).path)))
    return None


def _source_of_clone(folder: Path) -> KbSource | None:
    import pygit2

    found = pygit2.discover_repository(str(folder))
    if found is None:
        return None
    clone = pygit2.Repository(found)
    remote = next((r for r in clone.remotes if r.name == "origin"), None)
    https = _https(remote.url or "") if remote is not None else None
    if clone.head_is_unborn or https is None or not SOURCE_RE.match(https):
        return None
    return KbSource(https, str(clone.head.target))


def installed_source() -> KbSource | None:
    """``source_of_install`` of the kb that is running."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        text = distribution(DISTRIBUTION).read_text("direct_url.json")
    except PackageNotFoundError:
        return None
    try:
        data = json.loads(text or "")
    except ValueError:
        return None
    return source_of_install(data) if isinstance(data, dict) else None


def choose_source(url: str | None, commit: str | None) -> KbSource:
    """The options where given, else where this kb was installed from."""
    installed = installed_source() if url is None or commit is None else None
    url = url or (installed.url if installed else None)
    commit = commit or (installed.commit if installed else None)
    if url is None or commit is None:
        raise UsageError(
            "cannot tell which commit of kb the workflows should install: this kb was not installed from a git clone with an https origin",
            hint='pass --kb-source https://github.com/OWNER/kb --kb-commit <40 hex digits> (docs/github.md, "Which kb the workflows install")',
        )
    return parse_source(url, commit)


def _setup(source: KbSource) -> str:
    return f"""\
      - uses: {SETUP_PYTHON}
        with:
          python-version: "3.11"
      - name: Install kb (pinned to one commit by kb github init)
        env:
          KB_REQUIREMENT: {json.dumps(source.requirement)}
        run: python -m pip install "$KB_REQUIREMENT" && kb --version
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


def _check(setup: str) -> str:
    return f"""\
# Written by `kb github init` (docs/github.md). Make "kb-check" a required status check. It holds
# no secret and writes nothing; a pull request's edit of this file is refused by the check itself
# (and by kb/gate, which kb-review sets from the default branch's copy of its workflow).
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
{_checkout()}{setup}      - name: The consolidation record (refs/kb/consolidation), which the scope rules read
        env:
          READ_TOKEN: ${{{{ github.token }}}}
        run: |
          GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=http.extraHeader \
            GIT_CONFIG_VALUE_0="Authorization: Basic $(printf 'x-access-token:%s' "$READ_TOKEN" | base64 -w0)" \
            git fetch --no-tags origin "+refs/kb/consolidation:refs/kb/consolidation" || echo "no consolidation record yet"
      - name: Checks and the grounding gate
        env:
          KB_BASE: ${{{{ github.event.pull_request.base.sha || github.event.merge_group.base_sha }}}}
        run: kb check --gate --pull-request --base "$KB_BASE" --format github
"""


def _review(setup: str) -> str:
    return f"""\
# Written by `kb github init` (docs/github.md). On every pull request, as the reviewer GitHub App:
# `pull_request_target` runs this file as it is on the default branch (a pull request's own copy
# is never run) from a checkout of the default branch; kb reads the pull request's head as data
# (refs/pull/N/head) and never runs code from it. The secrets are in the environments, which
# deploy only from the default branch.
name: kb-review
on:
  pull_request_target:  # zizmor: ignore[dangerous-triggers] no code or config of the head is run (docs/github.md)
    types: [opened, synchronize, reopened]
permissions: {{}}
concurrency:
  group: kb-review-${{{{ github.event.pull_request.number }}}}
  cancel-in-progress: true
jobs:
  review:
    name: kb-review
    runs-on: ubuntu-latest
    environment: kb-reviewer
    permissions:
      contents: read
    outputs:
      evidence: ${{{{ steps.gate.outputs.evidence }}}}
    steps:
{_token("reviewer")}{_checkout()}{setup}{_IDENTITY}      - name: Gate every pull request; review kb's own
        id: gate
        shell: bash
        env:
          KB_REVIEWER_TOKEN: ${{{{ steps.app-token.outputs.token }}}}
          KB_PROPOSER_TOKEN: ${{{{ steps.app-token.outputs.token }}}}
          KB_SIGNING_KEY_TEXT: ${{{{ secrets.KB_REVIEW_SIGNING_KEY }}}}
          PR_NUMBER: ${{{{ github.event.pull_request.number }}}}
          HEAD_REF: ${{{{ github.event.pull_request.head.ref }}}}
          HEAD_REPO: ${{{{ github.event.pull_request.head.repo.full_name }}}}
          BASE_REPO: ${{{{ github.repository }}}}
        run: |
          export KB_SIGNING_KEY="$RUNNER_TEMP/review_ed25519"
          umask 077 && printf '%s\\n' "$KB_SIGNING_KEY_TEXT" > "$KB_SIGNING_KEY"
          case "$HEAD_REF" in
            kb/*) if [ "$HEAD_REPO" = "$BASE_REPO" ]; then kb pr review "$PR_NUMBER"; exit 0; fi ;;
          esac
          if [ "$HEAD_REPO" != "$BASE_REPO" ]; then
            kb pr gate "$PR_NUMBER" --no-approve  # a fork's evidence waits for a person
            exit 0
          fi
          kb pr gate "$PR_NUMBER" | tee "$RUNNER_TEMP/gate.txt"
          if grep -q '^  evidence only:' "$RUNNER_TEMP/gate.txt"; then echo "evidence=true" >> "$GITHUB_OUTPUT"; fi
  merge-evidence:
    name: kb-merge-evidence
    needs: review
    if: needs.review.outputs.evidence == 'true'
    runs-on: ubuntu-latest
    environment: kb-proposer
    permissions:
      contents: read
    steps:
{_token("proposer")}{_checkout()}{setup}{_IDENTITY}      - name: Merge the evidence once the required checks passed
        env:
          KB_PROPOSER_TOKEN: ${{{{ steps.app-token.outputs.token }}}}
          KB_REVIEWER_TOKEN: ${{{{ steps.app-token.outputs.token }}}}
          PR_NUMBER: ${{{{ github.event.pull_request.number }}}}
        run: kb pr merge "$PR_NUMBER" --no-index
"""


def _propose(branches: str, setup: str) -> str:
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
    environment: kb-proposer
    permissions:
      contents: read
    steps:
{_token("proposer")}{_checkout()}{setup}{_IDENTITY}      - name: Propose and open pull requests
        env:
          KB_PROPOSER_TOKEN: ${{{{ steps.app-token.outputs.token }}}}
        run: |
          kb propose
          for branch in $(git for-each-ref --format='%(refname:short)' 'refs/heads/kb/*'); do
            kb pr open "$branch"
          done
"""


def _index(branches: str, setup: str) -> str:
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
{_checkout()}{setup}      - name: Rebuild the index
        run: kb index build
"""


def _consolidate(setup: str) -> str:
    return f"""\
# Written by `kb github init` (docs/github.md). The scheduled slot for consolidation jobs.
name: kb-consolidate
on:
  schedule:
    - cron: "17 3 * * 1"
  workflow_dispatch:
permissions: {{}}
# Its own group per event, never cancelled: GitHub keeps one pending run per group and cancels
# the older pending one, so sharing a group with kb-propose (a run per evidence push) or with a
# manual dispatch would drop a scheduled run that was waiting.
concurrency:
  group: kb-consolidate-${{{{ github.event_name }}}}
  cancel-in-progress: false
jobs:
  consolidate:
    name: kb-consolidate
    runs-on: ubuntu-latest
    environment: kb-consolidate
    permissions:
      contents: read
    steps:
{_token("proposer")}{_token("reviewer", "reviewer-token")}{_checkout()}{setup}{_IDENTITY}      - name: Consolidate when a threshold is passed
        env:
          KB_PROPOSER_TOKEN: ${{{{ steps.app-token.outputs.token }}}}
          KB_REVIEWER_TOKEN: ${{{{ steps.reviewer-token.outputs.token }}}}
          KB_SIGNING_KEY_TEXT: ${{{{ secrets.KB_REVIEW_SIGNING_KEY }}}}
        # each batch is a pull request, reviewed (a signed note, hence the key) by the reviewer App
        # from this checkout of the default branch, then merged once the required checks passed
        run: |
          export KB_SIGNING_KEY="$RUNNER_TEMP/review_ed25519"
          umask 077 && printf '%s\\n' "$KB_SIGNING_KEY_TEXT" > "$KB_SIGNING_KEY"
          kb consolidate --if-needed --no-index
"""


WORKFLOW_NAMES = ("kb-check.yml", "kb-review.yml", "kb-propose.yml", "kb-index.yml", "kb-consolidate.yml")


def branch_filter(branch: str) -> str:
    """``branch`` as one quoted entry of an Actions ``branches:`` filter: the filter's pattern
    characters a git branch name may hold (``+``, ``!``, ``]``) are escaped to match themselves."""
    for char in "+!]":
        branch = branch.replace(char, "\\" + char)
    return json.dumps(branch)


def render_workflows(default_branch: str, source: KbSource) -> dict[str, str]:
    """File name -> text of each workflow, with ``default_branch`` in the push filters and kb
    installed from ``source``."""
    branches, setup = branch_filter(default_branch), _setup(source)
    texts = (_check(setup), _review(setup), _propose(branches, setup), _index(branches, setup), _consolidate(setup))
    return dict(zip(WORKFLOW_NAMES, texts, strict=True))


def write_workflows(root: Path, source: KbSource, force: bool = False) -> list[tuple[str, str]]:
    """Write each workflow for the repository at ``root`` (its ``forge.default_branch``), installing
    kb from ``source``; one that exists with other content is kept unless ``force``."""
    from kb.config import load_config
    from kb.errors import ConflictError

    workflows = render_workflows(load_config(root).forge.default_branch, source)
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
