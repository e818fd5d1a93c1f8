"""A page hit's passage: its best chunk and the chunks next to it in the same section."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.forgotten import Denied, Fingerprints, normalise
from kb.repo import Repo
from kb.retrieval.build import build_index
from kb.retrieval.search import make_query, open_searcher, search
from kb.tokens import count_tokens
from tests.builders import make_repo, page_for, sections

# Three chunks of "Sessions" at the default 200 tokens: the sentence that names the feature, the
# code that does it (too long to join the sentence in one chunk), then a long note.
LEAD = "To keep a signed session cookie, add the zebrafish middleware to the application. " + " ".join(
    f"Sentence {n} explains how the lead paragraph of the sessions section goes on." for n in range(9)
)
CODE = "```python\n" + "\n".join(f"app.add_middleware(ZebrafishMiddleware, secret_key=key_{n}, max_age={n})" for n in range(8)) + "\n```"
NOTE = " ".join(f"Remark {n} on cookie storage limits in the later part of the section." for n in range(11))
OTHER = "The quokka handler answers health checks."
BODY = "# Widget server\n\n" + sections(("Sessions", f"{LEAD}\n\n{CODE}\n\n{NOTE}"), ("Health", OTHER))
PAGES = {
    "knowledge/widgets.md": page_for("knowledge/widgets.md", "Widget server", "How the widget server is configured.", BODY),
    "knowledge/gadgets.md": page_for(
        "knowledge/gadgets.md", "Gadget server", "The gadget server.", "# Gadget server\n\nThe gadget server uses no cookies at all.\n"
    ),
}
QUESTION = "How do I keep a signed session cookie with the zebrafish middleware?"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    repo = make_repo(tmp_path_factory.mktemp("passage") / "kb", PAGES)
    build_index(repo)
    return repo


def test_the_section_splits_into_three_chunks_and_the_question_matches_the_first(served: Repo) -> None:
    searcher = open_searcher(served)
    chunks = sorted(cid for cid in searcher.ids if cid.startswith("knowledge/widgets#sessions~"))
    assert chunks == ["knowledge/widgets#sessions~0", "knowledge/widgets#sessions~1", "knowledge/widgets#sessions~2"]
    hit = search(served, make_query(QUESTION, k=1))[0]
    assert hit.chunk == "knowledge/widgets#sessions~0"


def test_the_passage_holds_the_code_of_the_next_chunk_within_the_budget(served: Repo) -> None:
    hit = search(served, make_query(QUESTION, k=1))[0]
    assert "zebrafish middleware" in hit.text and CODE in hit.text
    assert hit.chunks == ("knowledge/widgets#sessions~0", "knowledge/widgets#sessions~1")
    assert NOTE[:40] not in hit.text  # a third chunk would pass the 400 tokens
    assert count_tokens(hit.text) <= 400
    lines = BODY.splitlines()
    start = lines.index(LEAD) + 1 + PAGES["knowledge/widgets.md"].splitlines().index("# Widget server")
    assert (hit.line_start, hit.line_end) == (start, start + 2 + CODE.count("\n"))


def test_the_passage_never_crosses_into_another_section_or_page(served: Repo) -> None:
    searcher = open_searcher(served)
    searcher.passage_tokens = 5000  # room for everything: the section's end still stops it
    try:
        hits = searcher.search(make_query("cookie storage limits in the later part of the section", k=3))
    finally:
        searcher.passage_tokens = 400
    widgets = next(h for h in hits if h.id == "knowledge/widgets")
    assert widgets.chunks == ("knowledge/widgets#sessions~0", "knowledge/widgets#sessions~1", "knowledge/widgets#sessions~2")
    assert LEAD in widgets.text and CODE in widgets.text and NOTE in widgets.text
    assert OTHER not in widgets.text and "gadget" not in widgets.text.lower() and "Health" not in widgets.text


def test_the_budget_comes_from_the_config_and_zero_keeps_the_chunk_alone(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "kb", PAGES)
    config = repo.root / "kb.config.yaml"
    config.write_text(config.read_text().replace("retrieval:\n", "retrieval:\n  passage_tokens: 0\n", 1))
    repo.__dict__.pop("config", None)
    build_index(repo)
    hit = search(repo, make_query(QUESTION, k=1))[0]
    assert hit.chunks == ("knowledge/widgets#sessions~0",) and CODE not in hit.text and hit.text.startswith("To keep a signed")


def test_a_neighbour_the_query_may_not_see_or_a_forgetting_hides_is_left_out(served: Repo) -> None:
    searcher = open_searcher(served)
    query = make_query(QUESTION, k=1)
    hit = searcher.search(query)[0]
    row = searcher.ids.index("knowledge/widgets#sessions~1")
    allowed = searcher._filter("page", query).mask.copy()
    allowed[row] = False
    assert hit.chunks == ("knowledge/widgets#sessions~0", "knowledge/widgets#sessions~1")
    alone = searcher.widen(hit, allowed)
    assert alone.chunks == ("knowledge/widgets#sessions~0",) and CODE not in alone.text and alone.text.startswith("To keep a signed")
    key = b"k" * 32
    phrase = normalise("secret_key=key_3, max_age=3")
    fingerprints = Fingerprints(key, {len(phrase): frozenset({Fingerprints(key).digest(phrase)})})
    searcher.denied = Denied(text=fingerprints)
    try:
        hidden = searcher.search(query)[0]
    finally:
        searcher.denied = Denied()
    assert hidden.chunks == ("knowledge/widgets#sessions~0",) and "ZebrafishMiddleware" not in hidden.text


def test_chunk_hits_for_the_memory_context_stay_single_chunks(served: Repo) -> None:
    searcher = open_searcher(served)
    query = make_query(QUESTION, k=3)
    hits = searcher.fuse_chunks(searcher.rank(query, "page", searcher.embed_query(query.text)), "page", 3)
    first = hits[0]
    assert first.chunk == "knowledge/widgets#sessions~0" and first.chunks == (first.chunk,)
    assert first.text.startswith("To keep a signed") and CODE not in first.text
