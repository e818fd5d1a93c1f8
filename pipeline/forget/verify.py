"""Steps 5 and 6 of `kb forget`: derived state purged, then every git object, git-dir file and
file under ``.kb/`` scanned for the material."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from kb.forgotten import Fingerprints
from kb.repo import STATE_DIR, Repo
from pipeline.forget.plan import FORGOTTEN_DIR, Plan
from pipeline.forget.records import VerifyReport, write_pending


def file_has(path: Path, prints: Fingerprints) -> bool:
    try:
        data = path.read_bytes()
    except OSError:
        return False
    return any(prints.found_in(text) for text in texts_of(data))


def texts_of(data: bytes) -> Iterator[str]:
    """The text a file holds as stored, and inside JSON strings (escaped non-ASCII text)."""
    text = data.decode("utf-8", "replace")
    yield text
    if "\\u" in text:
        for line in text.splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue
            yield json.dumps(value, ensure_ascii=False)


def state_files(repo: Repo) -> Iterator[Path]:
    for path in sorted((repo.root / STATE_DIR).rglob("*")):
        if path.is_file() and FORGOTTEN_DIR not in path.relative_to(repo.root / STATE_DIR).parts[:1]:
            yield path


GIT_SCRATCH = ("COMMIT_EDITMSG", "MERGE_MSG", "SQUASH_MSG", "TAG_EDITMSG", "NOTES_EDITMSG", "description")


def git_files(repo: Repo) -> Iterator[Path]:
    """Every file of the git directory but its object store (which ``git cat-file`` reads):
    refs, logs, the index, config, hooks, messages left by git commands."""
    gitdir = Path(repo.git.path)
    for path in sorted(gitdir.rglob("*")):
        if path.is_file() and path.relative_to(gitdir).parts[0] != "objects":
            yield path


def _purge_git_files(repo: Repo, plan: Plan) -> list[str]:
    """Files git keeps beside its objects holding the material: the messages git commands
    leave, ``*_HEAD`` files and reflogs are deleted (others are left for the scan to report)."""
    gitdir = Path(repo.git.path)
    removed = []
    for path in git_files(repo):
        rel = path.relative_to(gitdir)
        scratch = rel.name in GIT_SCRATCH or rel.name.endswith("_HEAD") or rel.parts[0] == "logs"
        if scratch and file_has(path, plan.fingerprints):
            path.unlink(missing_ok=True)
            removed.append(".git/" + rel.as_posix())
    return removed


def tree_names(body: bytes) -> Iterator[str]:
    """The entry names of a raw tree object (``<mode> <name>\\0<20-byte id>`` each)."""
    pos = 0
    while pos < len(body):
        space = body.index(b" ", pos)
        nul = body.index(b"\0", space)
        yield body[space + 1 : nul].decode("utf-8", "replace")
        pos = nul + 21


def purge_derived(repo: Repo, plan: Plan) -> list[str]:
    """Step 5: every index version and point-in-time index removed and the serving index
    rebuilt from the new HEAD (a text index keeps deleted terms on disk, so only a rebuild
    purges it); every other file under .kb/ holding the material deleted, and the messages and
    reflogs git keeps beside its objects that hold it. Returns those files."""
    from kb.retrieval.build import build_index
    from kb.retrieval.store import index_store

    store = index_store(repo)
    had_index = plan.indexed or store.current() is not None
    with repo.lock("index"):
        shutil.rmtree(store.root, ignore_errors=True)
    if had_index:
        build_index(repo)
    removed = []
    for path in state_files(repo):
        if path.suffix != ".lock" and file_has(path, plan.fingerprints):
            path.unlink(missing_ok=True)
            removed.append(path.relative_to(repo.root).as_posix())
    removed += _purge_git_files(repo, plan)
    write_pending(repo, plan, "purged")
    return removed


def scan(repo: Repo, prints: Fingerprints) -> VerifyReport:
    """Every git object (reachable or not, loose or packed: blobs, trees' entry names, commit,
    tag and note messages), every other file of the git directory (refs, reflogs, the index,
    messages git left), every file under .kb/ (but the forgetting's own records, which hold
    fingerprints only) and every uncommitted file of the working tree."""
    copies: list[str] = []
    objects = 0
    proc = subprocess.run(["git", "-C", str(repo.root), "cat-file", "--batch-all-objects", "--batch"], check=True, capture_output=True)
    data = proc.stdout
    pos = 0
    while pos < len(data):
        end = data.index(b"\n", pos)
        oid, kind, size = data[pos:end].decode().split(" ")
        body = data[end + 1 : end + 1 + int(size)]
        pos = end + 1 + int(size) + 1
        objects += 1
        texts = tree_names(body) if kind == "tree" else texts_of(body)
        if any(prints.found_in(text) for text in texts):
            copies.append(f"{kind} {oid}")
    files = 0
    for path in git_files(repo):
        if file_has(path, prints):
            copies.append(".git/" + path.relative_to(Path(repo.git.path)).as_posix())
    for path in state_files(repo):
        files += 1
        if file_has(path, prints):
            copies.append(path.relative_to(repo.root).as_posix())
    for path in (repo.root / p for p in repo.dirty_paths()):
        if path.is_file() and file_has(path, prints):
            copies.append(path.relative_to(repo.root).as_posix())
    return VerifyReport(objects, files, tuple(copies))
