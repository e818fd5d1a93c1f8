"""``kb consolidate`` on memory made by ``kb memory ingest``: re-verification reads a claim as the
gate read it when it merged, so a correct claim is never rewritten, and a claim it does restate
keeps who said it."""

from __future__ import annotations

import re
from pathlib import Path

from kb.page import parse_page
from kb.repo import Repo
from pipeline.consolidate.record import current_cycle
from tests.builders import commit, page_for, write_chat


def _memory(root: Path, user: str) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text(encoding="utf-8") for p in sorted((root / "users" / user).rglob("*.md"))}


def _ingest(cli, tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    assert cli("init", str(root)).code == 0
    chat = write_chat(
        tmp_path / "chat.json",
        [
            ("Deborah", "I started a pottery class last month and I go every Tuesday."),
            ("Jolene", "You're doing a wonderful job keeping up with your classes!"),
            ("Deborah", "The workshop I joined last year taught me to keep trying."),
            ("Jolene", "Your patience with your students is so inspiring."),
        ],
        "2024-03-12T18:00:00",
    )
    result = cli("memory", "ingest", "--user", "deborah", "--speaker", "Deborah", str(chat), "--no-index", cwd=root)
    assert result.code == 0, result.err
    return root


def test_claims_the_gate_merged_are_verified_not_restated(cli, tmp_path: Path) -> None:
    root = _ingest(cli, tmp_path)
    before = _memory(root, "deborah")
    attributed = [line for text in before.values() for line in text.splitlines() if re.match(r"- Jolene told Deborah: ", line)]
    assert attributed, before  # the other speaker's words addressed to the user, attributed
    run = cli("consolidate", "--no-index", cwd=root)
    assert run.code == 0, run.err
    after = _memory(root, "deborah")
    text = "\n".join(after.values())
    assert "In the source:" not in text
    for line in attributed:
        assert line in text  # kept word for word: the addressee is the user, whom the page is about
    record = current_cycle(Repo(root))
    assert record is not None and record.status == "complete"
    changed = {key: c.reason for key, c in record.claims.items() if c.action != "verified"}
    assert changed == {}, changed


def test_a_restated_conversation_claim_keeps_its_speaker(cli, tmp_path: Path) -> None:
    root = _ingest(cli, tmp_path)
    page = next(p for p, text in _memory(root, "deborah").items() if "Jolene told Deborah: " in text)
    path = root / page
    text = path.read_text(encoding="utf-8")
    wrong = re.sub(r"- Jolene told Deborah: (\"Your patience[^\n]*)", r"- Jolene told Deborah in 2019: \1", text, count=1)
    assert wrong != text
    commit(Repo(root), {page: wrong}, "a person's edit: a year the chat does not say")
    run = cli("consolidate", "--no-index", cwd=root)
    assert run.code == 0, run.err
    after = path.read_text(encoding="utf-8")
    assert "in 2019" not in after
    assert re.search(r'- Jolene said: "Your patience with your students is so inspiring\."\.\[\^[^\]]+\]', after), after
    assert "In the source:" not in after


PORTO = "The Porto office opens at 9am.\nVisitors sign in at the front desk.\nNever share your badge with anyone.\n"
BRAGA = "The Braga office opens at 8am.\nVisitors sign in at the front desk.\nNever share your badge with anyone.\n"


def _office(path: str, title: str, ev: str, hours: str) -> str:
    body = (
        f"# {title}\n\n## Visiting\n\n- {hours}[^1]\n- Visitors sign in at the front desk.[^2]\n\n"
        "> **Warning**\n>\n> - Never share your badge with anyone.[^3]\n\n"
        f'[^1]: {ev}#L1-L1 "{hours.rstrip(".")}"\n'
        f'[^2]: {ev}#L2-L2 "Visitors sign in at the front desk"\n'
        f'[^3]: {ev}#L3-L3 "Never share your badge with anyone"\n'
    )
    return page_for(path, title, f"Visiting the {title.split()[0]} office.", body, sources=[ev])


def test_dedupe_keeps_warnings_and_never_merges_across_sources(cli, tmp_path: Path) -> None:
    from tests.builders import add_evidence, make_repo

    repo = make_repo(tmp_path / "kb")
    porto = add_evidence(repo, PORTO.encode(), "porto-handbook.md", "document")
    braga = add_evidence(repo, BRAGA.encode(), "braga-handbook.md", "document")
    files = {
        "knowledge/offices/porto.md": _office("knowledge/offices/porto.md", "Porto office", porto, "The Porto office opens at 9am."),
        "knowledge/offices/braga.md": _office("knowledge/offices/braga.md", "Braga office", braga, "The Braga office opens at 8am."),
    }
    commit(repo, files, "two offices, each from its own handbook")
    run = cli("consolidate", "--no-index", cwd=repo.root)
    assert run.code == 0, run.err
    for path in files:
        text = (repo.root / path).read_text(encoding="utf-8")
        # the same words from two handbooks are two offices' facts: both stay, each citing its own
        assert "- Visitors sign in at the front desk.[^2]" in text, text
        assert "> - Never share your badge with anyone.[^3]" in text, text  # the warning stays whole
        assert "status: deprecated" not in text
    repo = Repo(repo.root)
    record = current_cycle(repo)
    assert record is not None
    assert [c for c in record.claims.values() if c.action == "merged"] == []
    assert [f for b in record.batches for f in b.found if f.kind == "duplicate"] == []  # not even proposed
    head = repo.head()
    assert head is not None and not any(c.message.startswith("Consolidate (dedupe)") for c in repo.git.walk(head.id))


SAID = [
    "The workshop I joined taught me to keep trying.",
    "My neighbour painted her fence bright green.",
    "The bakery on my street closed for renovations.",
    "Our team finally shipped the new booking system.",
    "The train was late again this morning.",
    "My landlord promised to fix the heating soon.",
    "The library extended its opening hours.",
    "A storm knocked over the old oak in the park.",
    "My cousin is moving back from abroad.",
    "The museum opened a new wing about ships.",
    "Our book club picked a very long novel.",
    "The market now sells fresh bread on Sundays.",
    "My brother fixed the squeaky door for me.",
]


def test_the_memory_writers_l0_is_not_rewritten_back_and_forth(cli, tmp_path: Path) -> None:
    root = tmp_path / "kb"
    assert cli("init", str(root)).code == 0
    said = [("Deborah", line) for line in SAID]
    chat = write_chat(tmp_path / "chat.json", said, "2024-03-12T18:00:00")
    result = cli("memory", "ingest", "--user", "deborah", "--speaker", "Deborah", str(chat), "--no-index", cwd=root)
    assert result.code == 0, result.err
    summaries = {p: parse_page(t, p).summary for p, t in _memory(root, "deborah").items()}
    assert any("statements)." in s for s in summaries.values()), summaries
    run = cli("consolidate", "--no-index", cwd=root)
    assert run.code == 0, run.err
    after = {p: parse_page(t, p).summary for p, t in _memory(root, "deborah").items()}
    assert after == summaries  # the writer's own L0 (with its count of the page's entries) is left as written
