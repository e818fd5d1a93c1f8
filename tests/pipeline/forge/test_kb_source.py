"""Which kb the generated workflows install (issue 24): exactly the distribution built from kb's git
repository at one full commit SHA, never a name from an index (``kb`` on PyPI is another project).
The pin comes from ``--kb-source``/``--kb-commit`` or from how this kb was installed (PEP 610's
``direct_url.json``); anything that could float is refused before a file is written."""

from __future__ import annotations

import re
import subprocess
import tomllib
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml

import kb
from kb import DISTRIBUTION
from kb.scaffold import init_repository
from pipeline.forge.workflows import WORKFLOW_NAMES, KbSource, choose_source, source_of_install
from tests.conftest import CliResult

Cli = Callable[..., CliResult]
ROOT = Path(__file__).resolve().parents[3]
SHA = "0123456789abcdef0123456789abcdef01234567"


def test_the_distribution_is_kb_git_and_the_command_still_reports_its_version(cli: Cli) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == DISTRIBUTION == "kb-git" and project["scripts"] == {"kb": "kb.cli.app:main"}
    assert version(DISTRIBUTION) == kb.__version__ == project["version"]
    assert cli("--version").out.strip() == f"kb {kb.__version__}"


def test_every_workflow_installs_the_pinned_commit_and_nothing_else(cli: Cli, tmp_path: Path) -> None:
    root = init_repository(tmp_path / "kb").root
    result = cli("github", "init", "--kb-source", "git@github.com:acme/kb.git", "--kb-commit", SHA.upper(), cwd=root)
    assert result.code == 0, result.err
    assert f"kb installed from https://github.com/acme/kb.git at {SHA}" in result.out
    for name in WORKFLOW_NAMES:
        text = (root / ".github" / "workflows" / name).read_text(encoding="utf-8")
        assert "KB_PACKAGE" not in text  # no repository variable can swap the package
        for job in yaml.safe_load(text)["jobs"].values():
            installs = [s for s in job["steps"] if "pip" in s.get("run", "")]
            assert len(installs) == 1, name
            assert installs[0]["run"] == 'python -m pip install "$KB_REQUIREMENT" && kb --version'
            assert installs[0]["env"] == {"KB_REQUIREMENT": f"kb-git @ git+https://github.com/acme/kb.git@{SHA}"}
            assert job["steps"].index(installs[0]) < len(job["steps"]) - 1  # installed before the step that runs kb


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--kb-commit", "main", "--kb-commit 'main' is not a full commit SHA: a branch, tag or short id can move"),
        ("--kb-commit", SHA[:12], "is not a full commit SHA"),
        ("--kb-commit", SHA[:-1] + "g", "is not a full commit SHA"),
        ("--kb-source", "http://github.com/acme/kb", "is not the https URL of a git repository"),
        ("--kb-source", "https://github.com/acme/kb@main", "is not the https URL of a git repository"),
        ("--kb-source", 'https://github.com/acme/kb"; curl evil', "is not the https URL of a git repository"),
        ("--kb-source", "https://user:token@github.com/acme/kb", "is not the https URL of a git repository"),
    ],
)
def test_a_pin_that_could_float_or_break_the_workflow_is_refused(cli: Cli, tmp_path: Path, option: str, value: str, message: str) -> None:
    root = init_repository(tmp_path / "kb").root
    pin = {"--kb-source": "https://github.com/acme/kb", "--kb-commit": SHA} | {option: value}
    result = cli("github", "init", *[part for item in pin.items() for part in item], cwd=root)
    assert result.code == 2 and message in result.err and "hint: " in result.err
    assert not (root / ".github").exists()  # nothing half-written


def _clone(tmp_path: Path, origin: str | None) -> tuple[Path, str]:
    folder = tmp_path / "kb-source"
    folder.mkdir()
    (folder / "pyproject.toml").write_text('[project]\nname = "kb-git"\n', encoding="utf-8")
    git = ["git", "-C", str(folder)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "kb"], check=True)
    if origin is not None:
        subprocess.run([*git, "remote", "add", "origin", origin], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    return folder, head


def test_the_pin_defaults_to_where_this_kb_was_installed_from(tmp_path: Path) -> None:
    # pip install "kb-git @ git+https://github.com/acme/kb@main": pip records the commit it resolved
    vcs = {"url": "https://github.com/acme/kb", "vcs_info": {"vcs": "git", "requested_revision": "main", "commit_id": SHA}}
    assert source_of_install(vcs) == KbSource("https://github.com/acme/kb", SHA)
    ssh = vcs | {"url": "ssh://git@github.com/acme/kb.git"}
    assert source_of_install(ssh) == KbSource("https://github.com/acme/kb.git", SHA)
    # a wheel from an index or an archive says no commit; nor does another VCS
    assert source_of_install({"url": "https://files.example/kb_git-0.1.0-py3-none-any.whl", "archive_info": {}}) is None
    assert source_of_install({"url": "https://hg.example/kb", "vcs_info": {"vcs": "hg", "commit_id": SHA}}) is None
    # pip install -e CLONE: the clone's HEAD, at the https URL of its origin
    folder, head = _clone(tmp_path, "git@github.com:acme/kb.git")
    editable = {"url": folder.as_uri(), "dir_info": {"editable": True}}
    assert source_of_install(editable) == KbSource("https://github.com/acme/kb.git", head)
    assert re.fullmatch(r"[0-9a-f]{40}", head)


@pytest.mark.parametrize("origin", [None, "/srv/git/kb.git", "file:///srv/git/kb.git"])
def test_a_clone_without_an_https_origin_names_no_pin(tmp_path: Path, origin: str | None) -> None:
    folder, _ = _clone(tmp_path, origin)
    assert source_of_install({"url": folder.as_uri(), "dir_info": {}}) is None
    assert source_of_install({"url": (tmp_path / "not-a-clone").as_uri(), "dir_info": {}}) is None


def test_options_given_are_the_pin() -> None:
    assert choose_source("https://github.com/acme/kb", SHA.upper()) == KbSource("https://github.com/acme/kb", SHA)
