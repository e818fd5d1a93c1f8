"""``kb init`` and ``kb check`` through kb's real entry point."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kb.markdown import format_citation
from kb.repo import Repo
from kb.signing import SIGNERS_FILE, load_key, signer_line
from tests.builders import add_evidence, commit, make_sample_repo


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


def _visas_with(repo: Repo, claim: str, ev: str, line: int, quote: str, sources: str = "") -> str:
    """The sample's visas.md with one more claim citing ``ev`` (and an Overview the grounding
    rules accept: they read the sample's "Short stays" as a name no claim states)."""
    text = (
        (repo.root / VISAS)
        .read_text(encoding="utf-8")
        .replace("Short stays in the Schengen area.", "US citizens can stay 90 days without a visa.")
    )
    if sources:
        text = text.replace("sources: [", f"sources: [{sources}, ", 1)
    return text.replace("[^1]\n\n", f"[^1]\n{claim}[^2]\n\n", 1) + format_citation("2", ev, line, line, quote) + "\n"


VISAS = "knowledge/travel/visas.md"


def test_check_gate_passes_a_grounded_change_and_annotates_an_ungrounded_claim(cli, tmp_path: Path) -> None:
    repo, ids = make_sample_repo(tmp_path / "r")
    base = str(repo.head().id)
    commit(
        repo, {VISAS: _visas_with(repo, "The 90 days are counted within any 180-day period.", ids["doc"], 4, "within any 180-day period")}
    )
    grounded = cli("check", "--gate", "--base", base, "--format", "github", cwd=repo.root)
    assert grounded.code == 0 and grounded.out == "5 page(s) checked: 0 error(s), 0 warning(s)\n", grounded.out
    commit(repo, {VISAS: repo.read_at(repo.resolve(base), VISAS).decode()})  # back to the sample's page
    text = _visas_with(repo, "The 90 days are counted within any 190-day period.", ids["doc"], 4, "within any 180-day period")
    commit(repo, {VISAS: text})
    line = next(n for n, row in enumerate(text.splitlines(), 1) if "190-day" in row)
    assert cli("check", "--base", base).code == 0  # the plain checks do not read claims against their evidence
    found = cli("check", "--gate", "--base", base, "--format", "github")
    assert found.code == 1
    assert found.out.startswith(f"::error file={VISAS},line={line},title=grounding.number::"), found.out
    assert found.out.endswith("5 page(s) checked: 1 error(s), 0 warning(s)\n")
    report = json.loads(cli("check", "--gate", "--base", base, "--format", "json").out)
    assert [(f["rule"], f["path"], f["line"]) for f in report["findings"]] == [("grounding.number", VISAS, line)]
    # --changed-only narrows the checks to the change; the gate still reads the changed claim
    narrow = cli("check", "--gate", "--changed-only", "--base", base)
    assert narrow.code == 1 and f"{VISAS}:{line}: error [grounding.number]" in narrow.out
    assert narrow.out.splitlines()[-1].startswith("3 page(s) checked")


def test_check_gate_refuses_evidence_the_change_added_or_rewrote(cli, tmp_path: Path) -> None:
    repo, ids = make_sample_repo(tmp_path / "r")
    base = str(repo.head().id)
    ev = add_evidence(repo, b"# Fees\n\nThe visa fee is 80 euros.\n", "fees.md", "document")
    text = _visas_with(repo, "The visa fee is 80 euros.", ev, 3, "The visa fee is 80 euros.", sources=ev)
    commit(repo, {VISAS: text})
    assert cli("check", "--base", base, cwd=repo.root).code == 0
    added = cli("check", "--gate", "--base", base)
    cite_line = next(n for n, row in enumerate(text.splitlines(), 1) if row.startswith("[^2]: "))
    assert added.code == 1 and added.out.splitlines()[:-1] == [
        f"{VISAS}:{cite_line}: error [grounding.branch-evidence] "
        f"[^2] cites {ev}, which this change itself adds (hint: add the evidence first (`kb evidence add` on main), "
        "then propose the change that cites it)"
    ], added.out
    evidence_file = next((repo.root / "evidence").rglob(f"{ids['doc']}.md"))
    commit(repo, {str(evidence_file.relative_to(repo.root)): evidence_file.read_text() + "Edited later.\n"})
    rewrote = cli("check", "--gate", "--base", str(repo.head().parents[0].id))
    assert rewrote.code == 1 and {line.split("[")[1].split("]")[0] for line in rewrote.out.splitlines()[:-1]} == {"evidence.modified"}


def test_check_gate_takes_the_merge_base_when_the_base_branch_moved_on(cli, tmp_path: Path) -> None:
    repo, ids = make_sample_repo(tmp_path / "r")
    fork = repo.head()
    add_evidence(repo, b"# Fees\n\nThe visa fee is 80 euros.\n", "fees.md", "document")  # main moves on
    text = _visas_with(repo, "The 90 days are counted within any 180-day period.", ids["doc"], 4, "within any 180-day period")
    repo.commit_changes({VISAS: text.encode()}, "pages: visas", ref="refs/heads/work", parents=[fork.id])
    subprocess.run(["git", "checkout", "-q", "work"], cwd=repo.root, check=True)
    # against main's tip the ledger of the change looks shortened; the change starts at the fork
    assert cli("check", "--base", "main", cwd=repo.root).code == 1
    result = cli("check", "--gate", "--base", "main")
    assert result.code == 0, result.out


def test_check_gate_base_errors_are_one_line_with_their_exit_code(cli, tmp_path: Path) -> None:
    repo, _ = make_sample_repo(tmp_path / "r")
    unknown = cli("check", "--gate", "--base", "0123abc", "--format", "github", cwd=repo.root)
    assert unknown.code == 6 and unknown.out == ""
    assert unknown.err.splitlines()[0] == "error: unknown base commit or branch `0123abc`"
    assert "fetch-depth: 0" in unknown.err and "Traceback" not in unknown.err
    sig = repo.signature()
    orphan = repo.git.create_commit(None, sig, sig, "unrelated", repo.git.TreeBuilder().write(), [])
    unrelated = cli("check", "--gate", "--base", str(orphan))
    assert unrelated.code == 6 and unrelated.err.splitlines()[0] == f"error: the base `{orphan}` shares no history with HEAD"
    for args, message in [
        ((), "error: --gate needs --base REV, the commit the change started from"),
        (("--base", ""), "error: --gate needs --base REV, the commit the change started from"),
        (("--base", "HEAD", VISAS), "error: --gate checks the whole change, not chosen paths"),
    ]:
        bad = cli("check", "--gate", *args)
        assert bad.code == 2 and bad.out == "" and bad.err.splitlines()[0] == message, bad.err
