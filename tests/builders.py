"""Builders for small, real knowledge repositories used across the tests: the one place that
writes page text (``page_text``, ``page_for``, ``index_text``), repositories and commits
(``make_repo``, ``commit``, ``make_sample_repo``), evidence (``add_evidence`` and its shorthands)
and input files (``write_chat``, ``write_beir``)."""

from __future__ import annotations

import json
from pathlib import Path

from kb.evidence import add_items
from kb.intake import prepare
from kb.markdown import format_citation
from kb.page import page_id_for_path, render_page
from kb.repo import Repo
from kb.scaffold import init_repository
from kb.scopes import scope_for_path, user_scope

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "kb" / "samples"

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
    """A valid page: the required frontmatter (type ``fact`` and status ``active`` unless given),
    any ``extra`` keys after it, and ``body`` (ending with a newline)."""
    meta: dict[str, object] = {
        "id": page_id,
        "type": extra.pop("type", "fact"),
        "title": title,
        "summary": summary,
        "scope": scope,
        "status": extra.pop("status", "active"),
    }
    meta.update(extra)
    return render_page(meta, body if body.endswith("\n") else body + "\n")


def page_for(path: str, title: str, summary: str, body: str, **extra: object) -> str:
    """``page_text`` for the page at ``path`` (``knowledge/x.md``): id and scope come from the path."""
    return page_text(page_id_for_path(path), title, summary, scope_for_path(path), body, **extra)


def index_text(folder: str, title: str, summary: str, scope: str, children: dict[str, str]) -> str:
    listing = "".join(f"- [[{cid}]]: {l0}\n" for cid, l0 in sorted(children.items()))
    body = f"# {title}\n\n## Pages\n\n{listing}"
    return page_text(f"{folder}/index", title, summary, scope, body, type="index")


def sections(*pairs: tuple[str, str]) -> str:
    """A body with one ``## title`` section per (title, text) pair."""
    return "".join(f"## {title}\n\n{text}\n\n" for title, text in pairs)


def write(repo: Repo, path: str, text: str) -> None:
    target = repo.root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


def commit(repo: Repo, changes: dict[str, str | None], message: str = "change") -> str:
    """Write ``changes`` to the working tree and commit exactly those paths (None deletes)."""
    for path, text in changes.items():
        if text is None:
            (repo.root / path).unlink(missing_ok=True)
        else:
            write(repo, path, text)
    return str(repo.commit_worktree_paths(sorted(changes), message))


def make_repo(root: Path, pages: dict[str, str] | None = None) -> Repo:
    """``kb init`` in ``root``, then one commit with ``pages`` (path -> full page text)."""
    repo = init_repository(root)
    if pages:
        commit(repo, pages, "add pages")
    return repo


def add_evidence(repo: Repo, data: bytes, name: str, kind: str, user: str | None = None) -> str:
    """Add one item to the evidence log (one commit); returns its evidence id."""
    item = prepare(data, name, kind, user_scope(user))
    add_items(repo, [item])
    return item.id


def add_conversation(repo: Repo, messages: list[dict[str, str]], user: str | None = None, name: str = "chat.json") -> str:
    return add_evidence(repo, json.dumps(messages).encode(), name, "conversation", user)


def add_file(repo: Repo, name: str, kind: str, user: str | None = None) -> str:
    """Add the bundled sample ``kb/samples/<name>``."""
    return add_evidence(repo, (SAMPLES / name).read_bytes(), name, kind, user)


def write_chat(path: Path, messages: list[tuple[str, str]], time: str | None) -> Path:
    """A JSON chat file of (role, text) messages, all at ``time`` (or untimed)."""
    data = [{"role": role, "content": text} | ({"timestamp": time} if time else {}) for role, text in messages]
    path.write_text(json.dumps(data))
    return path


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
    commit(repo, pages, "pages: sample\n")
    return repo, ids


# ---- BEIR-format retrieval data ---------------------------------------------------------------

BEIR_DOCS = [
    {"_id": "d1", "title": "Anvils", "text": "Acme makes heavy anvils from iron."},
    {"_id": "d2", "title": "Airships", "text": "Zeppelins are rigid airships filled with hydrogen."},
    {"_id": "d3", "title": "Orchards", "text": "Quince trees grow in the orchard north of the river."},
    {"_id": "d4", "title": "北京大学", "text": "北京大学创建于1898年，初名京师大学堂。"},
    {"_id": "d5", "title": "Tea", "text": "Green tea is brewed at eighty degrees."},
]
BEIR_QUERIES = [
    {"_id": "q1", "text": "what are anvils made of"},
    {"_id": "q2", "text": "京师大学堂"},
    {"_id": "q3", "text": "rigid hydrogen airships"},
    {"_id": "q4", "text": "unjudged"},
]
BEIR_QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td4\t1\nq3\td2\t2\nq3\tmissing\t1\n"


def write_beir(folder: Path) -> tuple[Path, Path, Path]:
    """A tiny BEIR dataset (corpus, queries, qrels) in ``folder``: q4 is unjudged, one qrel names an unknown document."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in BEIR_DOCS), encoding="utf-8")
    (folder / "queries.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in BEIR_QUERIES), encoding="utf-8")
    (folder / "qrels.tsv").write_text(BEIR_QRELS)
    return folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels.tsv"
