"""``kb init`` and ``kb check`` through kb's real entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kb.repo import Repo
from kb.signing import SIGNERS_FILE, load_key, signer_line
from tests.builders import make_sample_repo


def test_init_creates_a_committed_repository_and_refuses_to_overwrite(cli, tmp_path: Path) -> None:
    result = cli("init", str(tmp_path / "kb"))
    assert result.code == 0, result.err
    root = tmp_path / "kb"
    for rel in ("kb.config.yaml", "evidence/ledger.jsonl", "knowledge/index.md", ".gitignore"):
        assert (root / rel).exists()
    assert ".kb/" in (root / ".gitignore").read_text()
    assert cli("check", cwd=root).code == 0
    again = cli("init", str(root))
    assert again.code == 8 and "never overwrites" in again.err


def test_init_allows_the_local_review_key_and_creates_it_when_absent(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key_file = tmp_path / "home" / ".config" / "kb" / "review_ed25519"
    monkeypatch.setenv("KB_SIGNING_KEY", str(key_file))
    result = cli("init", str(tmp_path / "kb"))
    assert result.code == 0, result.err
    assert f"reviews are signed with {key_file}" in result.out
    repo = Repo(tmp_path / "kb")
    signers = repo.read_at(repo.head(), SIGNERS_FILE).decode()
    assert signers.splitlines()[-1] == signer_line("kb-tests@example.invalid", load_key(key_file)).strip()
    assert repo.dirty_paths() == []
    # a second repository on the same machine lists the same key, which is not made again
    assert cli("init", str(tmp_path / "kb2")).code == 0
    assert Repo(tmp_path / "kb2").read_at(Repo(tmp_path / "kb2").head(), SIGNERS_FILE).decode() == signers


def test_init_with_an_unusable_key_writes_nothing(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "key").write_text("not a key\n")
    monkeypatch.setenv("KB_SIGNING_KEY", str(tmp_path / "key"))
    result = cli("init", str(tmp_path / "kb"))
    assert result.code == 14 and "is not an unencrypted OpenSSH private key" in result.err
    assert not (tmp_path / "kb").exists()


def test_check_reports_malformed_frontmatter_and_missing_citation_line(cli, tmp_path: Path) -> None:
    repo, ids = make_sample_repo(tmp_path / "r")
    page = repo.root / "knowledge/travel/visas.md"
    page.write_text(page.read_text().replace(f"{ids['doc']}#L3", f"{ids['doc']}#L40"))
    result = cli("check", "--format", "json", cwd=repo.root)
    assert result.code == 1
    report = json.loads(result.out)
    assert [(f["rule"], f["path"]) for f in report["findings"]] == [("citation.lines", "knowledge/travel/visas.md")]
    page.write_text(page.read_text().replace("title: Schengen visas", "title: : :"))
    text = cli("check")
    assert text.code == 1 and "knowledge/travel/visas.md:4: error [page.parse] malformed YAML frontmatter" in text.out
    github = cli("check", "--format", "github")
    assert "::error file=knowledge/travel/visas.md,line=4,title=page.parse::" in github.out
