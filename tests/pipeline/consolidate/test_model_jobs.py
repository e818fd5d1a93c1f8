"""The model side of consolidation, with scripted replies through litellm: re-verification
restates a claim the model finds unsupported, near-duplicates are merged only when the model finds
subject, scope, time, condition, negation and number alike (a negation is never even asked
about), a stale L0 is rewritten from the model's draft only when the checks pass it, and invalid
model output changes nothing and is reported. Offline, the jobs say what they skipped."""

from __future__ import annotations

import json
from pathlib import Path

from agents.llm import Budget, LiteLLMClient
from agents.protocols import AgentIdentity
from kb.config import ModelRole
from kb.page import parse_page
from kb.repo import Repo
from pipeline.consolidate.cycle import run_consolidation
from pipeline.consolidate.dedupe import merge_duplicates
from pipeline.consolidate.jobs import regrounding, rewrite_l0
from pipeline.consolidate.model import ModelJobs
from pipeline.consolidate.view import CommitView, Texts
from pipeline.records import parse_trailers
from tests.agents.scripted import Call, scripted_provider
from tests.builders import add_evidence, commit, make_repo, page_for
from tests.pipeline.consolidate.seeded import TODAY

LINES = [
    "Refunds for EU customers are allowed within 7 days.",
    "Refunds for US customers are allowed within 7 days.",
    "EU customers may get refunds within 7 days.",
    "Refunds for EU customers are not allowed within 7 days.",
    "The annual fee is 120 euros.",
    "The car is blue.",
]
MODEL = "scripted/consolidator"


def model_jobs() -> ModelJobs:
    return ModelJobs(LiteLLMClient(ModelRole(model=MODEL, max_retries=0)), AgentIdentity(MODEL, "scripted-a"), Budget())


def page(path: str, claims: list[tuple[str, int]], ev: str, summary: str = "") -> str:
    bullets = "\n".join(f"- {text}[^{n}]" for n, (text, _) in enumerate(claims, 1))
    defs = "\n".join(f'[^{n}]: {ev}#L{line}-L{line} "{LINES[line - 1].rstrip(".")}"' for n, (_, line) in enumerate(claims, 1))
    name = path.rsplit("/", 1)[1].removesuffix(".md")
    return page_for(
        path, name.title(), summary or f"{name.title()}.", f"# {name.title()}\n\n## Statements\n\n{bullets}\n\n{defs}\n", sources=[ev]
    )


def repo_with(root: Path, pages: dict[str, tuple[list[tuple[str, int]], str]]) -> tuple[Repo, Texts]:
    repo = make_repo(root)
    ev = add_evidence(repo, ("\n".join(LINES) + "\n").encode(), "policy.md", "document")
    commit(repo, {f"knowledge/{n}.md": page(f"knowledge/{n}.md", claims, ev, summary) for n, (claims, summary) in pages.items()})
    head = repo.head()
    assert head is not None
    return repo, Texts(CommitView(repo, head))


def support(*checks: dict[str, object]) -> Call:
    return Call("report_support", json.dumps({"checks": list(checks)}))


def test_a_claim_the_model_finds_unsupported_is_restated_from_its_quote(tmp_path: Path) -> None:
    # "Refunds are allowed" passes the gate (no number, date or negation lost) but drops the condition
    _, texts = repo_with(tmp_path / "kb", {"refunds": ([("Refunds are allowed.", 1), ("The car is blue.", 6)], "")})
    with scripted_provider(
        {MODEL: [support({"claim": 1, "supported": False, "lost": ["condition", "number"], "reason": "drops EU and 7 days"})]}
    ) as llm:
        result = regrounding(texts, ["knowledge/refunds.md"], model_jobs())
    asked = llm.requests_for(MODEL)[0].messages[1]["content"]
    assert "1. claim: Refunds are allowed." in asked and "The car is blue" not in asked  # a verbatim claim is not asked about
    text = result.changes["knowledge/refunds.md"]
    assert '- In the source: "Refunds for EU customers are allowed within 7 days".[^1]' in text
    assert (
        result.claims["knowledge/refunds.md#1"][0] == "changed"
        and "lost condition; lost number" in result.claims["knowledge/refunds.md#1"][1]
    )
    assert result.claims["knowledge/refunds.md#2"] == ("verified", "")
    assert [(f.kind, f.fixed) for f in result.found] == [("meaning", True)]


def test_invalid_model_output_changes_nothing_and_is_reported(tmp_path: Path) -> None:
    _, texts = repo_with(tmp_path / "kb", {"refunds": ([("Refunds are allowed.", 1)], "")})
    invalid = [Call("report_support", '{"checks": [oops'), support({"claim": 0, "supported": True, "reason": "x"}), "I think it is fine."]
    with scripted_provider({MODEL: invalid}) as llm:
        jobs = model_jobs()
        result = regrounding(texts, ["knowledge/refunds.md"], jobs)
    assert llm.remaining(MODEL) == 0 and jobs.usage.calls == 3
    assert result.changes == {} and result.claims["knowledge/refunds.md#1"] == ("verified", "")
    [found] = result.found
    assert found.kind == "meaning" and not found.fixed and "model re-verification failed" in found.detail
    # an answer about a claim that is not in the list is ignored and said so; the listed claim unanswered is reported
    with scripted_provider({MODEL: [support({"claim": 9, "supported": False, "reason": "?"})]}):
        result = regrounding(texts, ["knowledge/refunds.md"], model_jobs())
    assert result.changes == {}
    assert [f.detail for f in result.found] == [
        "the model answered about claim 9, not in the list: ignored",
        "line 14: the model gave no answer; kept as the gate left it",
    ]


def test_near_duplicates_merge_only_when_the_model_finds_them_alike_in_every_respect(tmp_path: Path) -> None:
    _, texts = repo_with(
        tmp_path / "kb",
        {
            "eu": ([("Refunds for EU customers are allowed within 7 days.", 1), ("The car is blue.", 6)], ""),
            "faq": ([("EU customers may get refunds within 7 days.", 3)], ""),
            "no-refunds": ([("Refunds for EU customers are not allowed within 7 days.", 4)], ""),
            "us": ([("Refunds for US customers are allowed within 7 days.", 2)], ""),
        },
    )
    answer = {
        "pairs": [
            {"pair": 1, "same_fact": True, "reason": "both: EU refunds within 7 days"},
            {"pair": 2, "same_fact": False, "differs_in": ["scope"], "reason": "EU vs US customers"},
            {"pair": 3, "same_fact": True, "differs_in": ["scope"], "reason": "close, but EU vs US"},
        ]
    }
    with scripted_provider({MODEL: [Call("report_sameness", json.dumps(answer))]}) as llm:
        result = merge_duplicates(texts, sorted(texts.view.files), TODAY, model_jobs())
    asked = llm.requests_for(MODEL)[0].messages[1]["content"]
    assert "1. A: Refunds for EU customers are allowed within 7 days.\n   B: EU customers may get refunds within 7 days." in asked
    assert "not allowed" not in asked  # a negation differs: never asked, never merged
    assert set(result.changes) == {"knowledge/eu.md", "knowledge/faq.md"}
    faq = parse_page(result.changes["knowledge/faq.md"], "knowledge/faq.md")
    assert faq.status == "deprecated" and faq.meta["superseded_by"] == ["knowledge/eu"]
    eu = parse_page(result.changes["knowledge/eu.md"], "knowledge/eu.md")
    assert {c.start for c in eu.structure.citations} == {1, 3, 6}  # the survivor cites the copy's span too
    similar = sorted(f.path for f in result.found if f.kind == "similar-not-same")
    assert (
        similar == ["knowledge/no-refunds.md"] * 2 + ["knowledge/us.md"] * 3
    )  # negation: no-refunds vs eu, faq and us; the model: us vs eu, faq


def test_a_stale_l0_is_rewritten_from_the_model_draft_only_when_the_checks_pass_it(tmp_path: Path) -> None:
    stale = "The annual fee is 100 euros."
    _, texts = repo_with(tmp_path / "kb", {"pricing": ([("The annual fee is 120 euros.", 5)], stale)})
    good = Call("write_summary", json.dumps({"summary": "Pricing: the annual fee is 120 euros."}))
    with scripted_provider({MODEL: [good]}):
        result = rewrite_l0(texts, ["knowledge/pricing.md"], model=model_jobs())
    assert parse_page(result.changes["knowledge/pricing.md"], "x.md").summary == "Pricing: the annual fee is 120 euros."
    wrong = Call("write_summary", json.dumps({"summary": "The annual fee is 150 euros for Acme."}))
    with scripted_provider({MODEL: [wrong]}):
        result = rewrite_l0(texts, ["knowledge/pricing.md"], model=model_jobs())
    assert parse_page(result.changes["knowledge/pricing.md"], "x.md").summary == "Pricing: The annual fee is 120 euros."  # offline rewrite
    assert [(f.fixed, f.detail.split(":")[0] if not f.fixed else f.detail) for f in result.found] == [
        (False, "the model's L0 was not used"),
        (True, "L0 named 100, no longer on the page; rewritten"),
    ]


def test_offline_jobs_say_what_they_skip(tmp_path: Path) -> None:
    _, texts = repo_with(
        tmp_path / "kb",
        {
            "refunds": (
                [("Refunds are allowed.", 1), ('The handbook says: "The car is blue."', 6)],
                "",
            ),  # the quote word for word: not counted
            "eu": ([("Refunds for EU customers are allowed within 7 days.", 1)], ""),
            "faq": ([("EU customers may get refunds within 7 days.", 3)], ""),
        },
    )
    assert regrounding(texts, ["knowledge/refunds.md"]).skipped == [
        "1 claim(s) in other words than their quote: meaning not re-checked (needs a model)"
    ]
    dedupe = merge_duplicates(texts, sorted(texts.view.files), TODAY)
    assert dedupe.changes == {} and dedupe.skipped == ["1 near-duplicate pair(s) in other words not compared (needs a model)"]


def test_a_cycle_with_a_configured_model_proposes_as_that_model(tmp_path: Path) -> None:
    repo, _ = repo_with(tmp_path / "kb", {"refunds": ([("Refunds are allowed.", 1), ("The car is blue.", 6)], "")})
    config = repo.root / "kb.config.yaml"
    text = config.read_text(encoding="utf-8")
    config.write_text(
        text.replace("  allow_same_family: false", f"  proposer: {{model: {MODEL}, family: scripted-a}}\n  allow_same_family: false")
    )
    repo.commit_worktree_paths(["kb.config.yaml"], "configure a model")
    repo = Repo(repo.root)
    with scripted_provider(
        {MODEL: [support({"claim": 1, "supported": False, "lost": ["condition"], "reason": "drops the EU condition"})]}
    ) as llm:
        report = run_consolidation(repo, today=TODAY, build_index=False)
    assert llm.remaining(MODEL) == 0 and report.status == "complete" and len(report.merged) == 1
    assert 'In the source: "Refunds for EU customers are allowed within 7 days"' in (repo.root / "knowledge/refunds.md").read_text()
    head = repo.head()
    assert head is not None
    merge = next(c for c in repo.git.walk(head.id) if c.message.startswith("Merge kb/consolidate-pages-"))
    trailers = parse_trailers(merge.message)
    assert trailers["Kb-Proposer-Model"] == MODEL and trailers["Kb-Proposer-Family"] == "scripted-a"
    assert trailers["Kb-Reviewer-Family"] == "kb-deterministic"
