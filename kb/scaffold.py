"""``kb init``: create a knowledge repository (a real git repository with a first commit).

The first commit lists this machine's review signing key in ``reviewers/allowed_signers``
(the key is created outside the repository when absent, ``kb.signing``), so the change loop
signs and verifies reviews from the start with no manual step.
"""

from __future__ import annotations

from pathlib import Path

import pygit2

from kb.config import CONFIG_FILE, DEFAULT_CONFIG_TEXT
from kb.errors import ConflictError, PathError
from kb.evidence import LEDGER_PATH
from kb.page import page_id_for_path, render_page
from kb.repo import Repo
from kb.scopes import KNOWLEDGE_DIR, SYSTEM, USERS_DIR
from kb.signing import SIGNERS_FILE, SIGNERS_HEADER, load_or_create_key, signer_line

GITIGNORE = ".kb/\n"
KNOWLEDGE_INDEX_BODY = """\
# Knowledge

## Overview

Shared knowledge of this repository. Every page is listed below with its one-line summary.

## Pages

"""


def index_page(page_id: str, title: str, summary: str, scope: str, body: str) -> str:
    meta = {"id": page_id, "type": "index", "title": title, "summary": summary, "scope": scope, "status": "active"}
    return render_page(meta, body)


def planned_files(name: str) -> dict[str, str]:
    knowledge_index = KNOWLEDGE_DIR + "index.md"
    return {
        CONFIG_FILE: DEFAULT_CONFIG_TEXT.format(name=name),
        ".gitignore": GITIGNORE,
        LEDGER_PATH: "",
        knowledge_index: index_page(
            page_id_for_path(knowledge_index), "Knowledge", "Entry page of the shared knowledge.", SYSTEM, KNOWLEDGE_INDEX_BODY
        ),
        USERS_DIR + ".gitkeep": "",
        SIGNERS_FILE: SIGNERS_HEADER,
    }


def init_repository(path: Path, name: str | None = None) -> Repo:
    """Create the files and the first commit; refuse to overwrite anything that exists."""
    root = path.expanduser().resolve()
    if root.exists() and not root.is_dir():
        raise PathError(f"{root} exists and is not a folder", hint="choose a new folder name, or an existing empty folder")
    files = planned_files(name or root.name or "kb")
    existing = [rel for rel in files if (root / rel).exists()]
    if existing:
        raise ConflictError(
            f"{root} already has {existing[0]}; kb init never overwrites files",
            hint="use an empty folder, or work in the existing repository",
        )
    key, _ = load_or_create_key()  # before anything is written: an unusable key leaves no half repository
    root.mkdir(parents=True, exist_ok=True)
    if (root / ".git").exists():
        git = pygit2.Repository(str(root))
    else:
        git = pygit2.init_repository(str(root), initial_head="main")
    try:
        principal = git.default_signature.email or "kb-reviewer"
    except (KeyError, pygit2.GitError):
        principal = "kb-reviewer"
    files[SIGNERS_FILE] += signer_line(principal.replace(" ", "") or "kb-reviewer", key)
    for rel, text in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    repo = Repo(root)
    repo.__dict__["git"] = git
    repo.commit_worktree_paths(sorted(files), "kb: initialise knowledge repository\n")
    return repo
