"""Contracts of the redesign through the real CLI: a bad model option is a config error at load
(exit 4, before any model call), and `kb run`, `kb merge` and `kb index build` report an index
build with the same one line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kb.repo import Repo
from tests.builders import make_sample_repo

SUMMARY_RE = re.compile(
    r"built \S+ from [0-9a-f]{12}: \d+ pages, \d+ evidence items, \d+ chunks; (incremental|full rebuild \(.*\)): embedded \d+, reused \d+, removed \d+, added \d+ in [\d.]+s"
)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ("{model: openai/gpt-5-mini, options: {api_key: sk-123}}", "looks like a credential"),
        ("{model: openai/gpt-5-mini, options: {temperature: 0.2}}", "is set by kb itself"),
        ("{model: openai/gpt-5-mini, max_tokens: 0}", "greater than 0"),
        ("{model: ''}", "at least 1 character"),
    ],
)
def test_a_bad_model_option_exits_4_at_config_load(cli, tmp_path: Path, options: str, message: str) -> None:
    repo, _ = make_sample_repo(tmp_path / "kb")
    config = repo.root / "kb.config.yaml"
    config.write_text(config.read_text().replace("  allow_same_family: false", f"  proposer: {options}\n  allow_same_family: false"))
    result = cli("--repo", str(repo.root), "check")
    assert result.code == 4, result.err
    assert message in result.err and "kb.config.yaml" in result.err
    assert result.err.count("\n") == 2 and result.err.startswith("error: ") and "\nhint: " in result.err


def test_run_merge_and_index_build_print_the_same_index_line(cli, tmp_path: Path) -> None:
    repo, _ = make_sample_repo(tmp_path / "kb")
    root = str(repo.root)
    built = cli("--repo", root, "index", "build")
    assert built.code == 0 and SUMMARY_RE.fullmatch(built.out.strip()), built.out
    (tmp_path / "note.md").write_text("# Meals\n\nThe canteen serves lunch from noon until two.\n")
    assert cli("--repo", root, "evidence", "add", str(tmp_path / "note.md")).code == 0
    ran = cli("--repo", root, "run")
    assert ran.code == 0, ran.out + ran.err
    [line] = [x for x in ran.out.splitlines() if x.startswith("index: ")]
    assert SUMMARY_RE.fullmatch(line.removeprefix("index: ")), line
    assert "BuildResult(" not in ran.out
    (tmp_path / "note2.md").write_text("# Parking\n\nVisitors park on level two of the garage.\n")
    assert cli("--repo", root, "evidence", "add", str(tmp_path / "note2.md")).code == 0
    proposed = cli("--repo", root, "propose")
    branch = re.search(r"branch (kb/\S+)", proposed.out).group(1)
    assert cli("--repo", root, "review", branch).code == 0
    merged = cli("--repo", root, "merge", branch)
    assert merged.code == 0, merged.err
    [line] = [x for x in merged.out.splitlines() if x.startswith("index: ")]
    assert SUMMARY_RE.fullmatch(line.removeprefix("index: ")) and "incremental" in line
    assert Repo(repo.root).head() is not None
