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

POLICY = "knowledge/travel-policy.md"


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
    mutants = [
        m
        for path, text in sorted(corpus.pages.items())
        if (view := PageView.of(path, text)) is not None
        for m in negation_removed_quote_trimmed(view, corpus)
    ]
    assert mutants, "the sample has a cited negation to trim"
    mutant = mutants[0]
    before = {c.label: c for c in parse_page(corpus.pages[mutant.path], mutant.path).structure.citations}
    page = parse_page(mutant.files[mutant.path], mutant.path)
    trimmed = [c for c in page.structure.citations if c.label in before and c.quote != before[c.label].quote]
    assert len(trimmed) == 1
    cite = trimmed[0]
    assert cite.quote in before[cite.label].quote and cite.quote in corpus.evidence[cite.evidence_id or ""][cite.start - 1]  # verbatim
    claims = [FOOTREF_RE.sub("", c.text).lower().split() for c in page.structure.claims if cite.label in c.labels]
    assert any(not {"not", "never", "no", "don't", "doesn't"} & set(words) for words in claims)  # the edited claim lost it


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


def test_a_cited_control_on_a_timeline_goes_under_its_own_date() -> None:
    """A faithful claim added to a timeline is filed under the heading of its line's date; a
    line of a date the page has no heading for gives no control (filing it under another date
    is a fault: the gate's grounding.timeline rightly rejected such "controls")."""
    from pipeline.eval.mutations import cited_claim_added

    ev = "ev-00000000000000aa"
    lines = [
        "[2023-05-01T10:00:00] Jon (D1:1): I opened my dance studio today.",
        "[2023-06-02T10:00:00] Jon (D2:1): I taught my very first class to twelve kids.",
        "[2023-07-03T10:00:00] Jon (D3:1): I went to a dance festival in the city.",
    ]
    cite = lambda label, n, quote: f'[^{label}]: {ev}#L{n} "{quote}"'  # noqa: E731
    text = "\n".join(
        [
            "---",
            "id: users/jon/timeline",
            "type: timeline",
            "title: Jon's timeline",
            "summary: Dated events.",
            "scope: user:jon",
            "status: active",
            f"sources: [{ev}]",
            "---",
            "# Jon's timeline",
            "",
            "## 2023-06-02",
            "",
            '- Jon said: "I taught my first class."[^b]',
            "",
            "## 2023-05-01",
            "",
            '- Jon said: "I opened my dance studio today."[^a]',
            "",
            cite("a", 1, "I opened my dance studio today."),
            cite("b", 2, "I taught my first class."),
            "",
        ]
    )
    view = PageView.of("users/jon/timeline.md", text)
    assert view is not None
    added = list(cited_claim_added(view, Corpus({ev: lines}, {})))
    assert [m.note for m in added] == [f"{ev}#L2"]  # L3 (2023-07-03) has no heading; L1 is quoted already
    new_lines = added[0].files[view.path].split("\n")
    at = next(i for i, line in enumerate(new_lines) if "twelve kids" in line and line.startswith("- "))
    assert new_lines.index("## 2023-06-02") < at < new_lines.index("## 2023-05-01")
