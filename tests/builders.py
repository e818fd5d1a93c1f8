"""Builders for small, real knowledge repositories used across the tests."""

from __future__ import annotations

import json
from pathlib import Path

from kb.evidence import add_items
from kb.intake import prepare
from kb.markdown import format_citation
from kb.page import render_page
from kb.repo import Repo
from kb.scaffold import init_repository
from kb.scopes import user_scope

ALICE_CHAT = [
    {"role": "user", "content": "Hi, I need to book a flight to Lisbon.", "timestamp": "2025-01-10T09:00:00Z"},
    {"role": "assistant", "content": "Sure. Any seat preference?", "timestamp": "2025-01-10T09:00:05Z"},
    {"role": "user", "content": "I prefer window seats. I'm vegetarian, so I'll need a special meal.", "timestamp": "2025-01-10T09:00:30Z"},
    {"role": "user", "content": "I do not eat fish either.", "timestamp": "2025-01-10T09:01:00Z"},
]

VISA_DOC = """# Schengen visas

Citizens of the United States can stay 90 days in the Schengen area without a visa.
The 90 days are counted within any 180-day period.
"""


def page_text(page_id: str, title: str, summary: str, scope: str, body: str, **extra: object) -> str:
    meta: dict[str, object] = {
        "id": page_id,
        "type": extra.pop("type", "fact"),
        "title": title,
        "summary": summary,
        "scope": scope,
        "status": extra.pop("status", "active"),
    }
    meta.update(extra)
    return render_page(meta, body)


def index_text(folder: str, title: str, summary: str, scope: str, children: dict[str, str]) -> str:
    listing = "".join(f"- [[{cid}]]: {l0}\n" for cid, l0 in sorted(children.items()))
    body = f"# {title}\n\n## Pages\n\n{listing}"
    return page_text(f"{folder}/index", title, summary, scope, body, type="index")


def write(repo: Repo, path: str, text: str) -> None:
    target = repo.root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def make_sample_repo(root: Path) -> tuple[Repo, dict[str, str]]:
    """A clean repository: a system document, alice's chat, and pages that cite both."""
    repo = init_repository(root)
    doc = prepare(VISA_DOC.encode(), "visas.md", "document", "system")
    chat = prepare(json.dumps(ALICE_CHAT).encode(), "alice.json", "conversation", user_scope("alice"))
    add_items(repo, [doc, chat])
    ids = {"doc": doc.id, "chat": chat.id}
    visas_body = (
        "# Schengen visas\n\n## Overview\n\nShort stays in the Schengen area.\n\n## Rules\n\n"
        "US citizens can stay 90 days without a visa.[^1]\n\n"
        + format_citation("1", doc.id, 3, 3, "can stay 90 days in the Schengen area without a visa")
        + "\n"
    )
    pages = {
        "knowledge/travel/visas.md": page_text(
            "knowledge/travel/visas",
            "Schengen visas",
            "US citizens may stay 90 days without a visa.",
            "system",
            visas_body,
            sources=[doc.id],
        ),
        "knowledge/travel/index.md": index_text(
            "knowledge/travel",
            "Travel",
            "Travel rules.",
            "system",
            {"knowledge/travel/visas": "US citizens may stay 90 days without a visa."},
        ),
        "knowledge/index.md": index_text(
            "knowledge", "Knowledge", "Entry page of the shared knowledge.", "system", {"knowledge/travel/index": "Travel rules."}
        ),
        "users/alice/preferences.md": page_text(
            "users/alice/preferences",
            "Alice's travel preferences",
            "Alice prefers window seats and is vegetarian.",
            "user:alice",
            "# Alice's travel preferences\n\n- Prefers window seats.[^1]\n- Vegetarian.[^2] See [[knowledge/travel/visas#rules]].\n\n"
            + format_citation("1", chat.id, 3, 3, "I prefer window seats")
            + "\n"
            + format_citation("2", chat.id, 3, 3, "I'm vegetarian")
            + "\n",
            type="preference",
            sources=[chat.id],
        ),
        "users/alice/index.md": index_text(
            "users/alice",
            "Alice",
            "Memory of alice.",
            "user:alice",
            {"users/alice/preferences": "Alice prefers window seats and is vegetarian."},
        ),
    }
    for path, text in pages.items():
        write(repo, path, text)
    repo.commit_worktree_paths(sorted(pages), "pages: sample\n")
    return repo, ids
