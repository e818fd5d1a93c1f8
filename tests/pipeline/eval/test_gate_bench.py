"""`kb eval gate`: the mutation benchmark on the bundled sample (no shared data needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kb.markdown import FOOTREF_RE
from kb.page import parse_page
from kb.repo import Repo
from pipeline.eval.gate import Material, draw_mutants, load_corpus, run_gate_bench
from pipeline.eval.mutations import OPERATORS, Corpus, PageView, evidence_added_on_branch, negation_removed_quote_trimmed

POLICY = "knowledge/company-travel-policy.md"


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory):
    """One run over the sample: a fault each for two stable rules, two faithful controls."""
    workdir = tmp_path_factory.mktemp("gate-bench")
    operators = ["number_changed", "footnote_def_deleted", "bullets_reordered", "whitespace_changed"]
    report = run_gate_bench(Material(sample=True), seed=3, per_operator=1, workdir=workdir, operators=operators)
    return report, Repo(workdir / "repo")


def test_a_changed_number_is_caught_and_a_reordering_merges(bench) -> None:
    report, _ = bench
    by_operator = {r.operator: r for r in report.results}
    assert set(by_operator) == {"number_changed", "footnote_def_deleted", "bullets_reordered", "whitespace_changed"}
    number = by_operator["number_changed"]
    assert (number.caught, number.stage, number.rule) == (True, "gate", "grounding.number")
    footnote = by_operator["footnote_def_deleted"]
    assert footnote.caught and footnote.rule == "citation.undefined"
    assert not by_operator["bullets_reordered"].caught and by_operator["bullets_reordered"].stage == ""
    assert not by_operator["whitespace_changed"].caught


def test_the_report_counts_per_category_operator_and_rule(bench) -> None:
    data = bench[0].to_dict()
    assert data["summary"] == {
        "mutations": 2,
        "caught": 2,
        "catch_rate": 1.0,
        "controls": 2,
        "rejected_controls": 0,
        "false_positive_rate": 0.0,
    }
    assert data["per_category"]["grounding"] == {"category": "grounding", "n": 1, "caught": 1, "rate": 1.0}
    assert data["per_category"]["control"]["caught"] == 0
    assert data["per_rule"]["grounding.number"]["first_mutation"] == 1
    assert data["per_rule"]["citation.undefined"]["any_control"] == 0
    assert data["missed"] == [] and data["false_positives"] == []
    # 7 pages: the profile, timeline, travel and notes (the assistant's "Munich as your home city") of
    # alice, the policy page and the two indexes
    assert data["material"]["pages"] == 7 and data["material"]["evidence_items"] == 3
    json.dumps(data)  # the --json output is plain data


def test_judging_leaves_main_as_the_material_left_it(bench) -> None:
    """A control merges to be judged, then main is put back; no work branch stays behind."""
    _, repo = bench
    head = repo.head()
    assert head is not None and head.message.startswith("Merge kb/2")  # the material's own merge
    assert [b for b in repo.git.branches.local if b.startswith("kb/")] == []
    assert repo.dirty_paths(("knowledge", "users")) == []


def test_the_draw_is_fixed_by_the_seed(bench) -> None:
    corpus = load_corpus(bench[1])
    first = [(m.operator, m.note) for m in draw_mutants(corpus, 7, 2)]
    assert first == [(m.operator, m.note) for m in draw_mutants(corpus, 7, 2)]
    assert {m.operator for m in draw_mutants(corpus, 7, 2)} <= set(OPERATORS)
    assert first != [(m.operator, m.note) for m in draw_mutants(corpus, 8, 2)]


def test_quote_trimmed_to_a_verbatim_fragment_without_its_negation(bench) -> None:
    corpus: Corpus = load_corpus(bench[1])
    view = PageView.of(POLICY, corpus.pages[POLICY])
    assert view is not None
    mutant = next(iter(negation_removed_quote_trimmed(view, corpus)))
    page = parse_page(mutant.files[POLICY], POLICY)
    cite = next(c for c in page.structure.citations if c.quote == "book flights with more than two connections.")
    assert cite.quote in corpus.evidence[cite.evidence_id or ""][cite.start - 1]  # still verbatim
    claims = [FOOTREF_RE.sub("", c.text).split() for c in page.structure.claims if cite.label in c.labels]
    assert claims and all("not" not in words for words in claims)  # the negation left the claim too


def test_evidence_added_on_the_branch_is_cited_by_the_edit(bench) -> None:
    corpus = load_corpus(bench[1])
    view = PageView.of("users/alice/travel.md", corpus.pages["users/alice/travel.md"])
    assert view is not None
    mutant = next(iter(evidence_added_on_branch(view, corpus)))
    assert mutant.evidence is not None and mutant.evidence.scope == "user:alice"
    page = parse_page(mutant.files[view.path], view.path)
    assert mutant.evidence.id in page.meta["sources"]
    assert any(c.evidence_id == mutant.evidence.id for c in page.structure.citations)


def test_cli_json_and_bad_input(cli, tmp_path: Path) -> None:
    result = cli("eval", "gate", "--sample", "--operator", "number_changed", "--per-operator", "1", "--json")
    assert result.code == 0, result.err
    assert json.loads(result.out)["summary"]["caught"] == 1
    nothing = cli("eval", "gate")
    assert nothing.code == 2 and nothing.err.startswith("error: no material to build pages from")
    unknown = cli("eval", "gate", "--sample", "--operator", "typo")
    assert unknown.code == 2 and "unknown operator 'typo'" in unknown.err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    busy = cli("eval", "gate", "--sample", "--workdir", str(tmp_path / "full"))
    assert busy.code == 2 and "is not empty" in busy.err
