"""The optional model detector of personal data in prose (``privacy.detector``), through litellm
with scripted replies: off by default; what it finds is masked at ingest; it is shown the text
with every pattern finding already masked (no card, phone or e-mail reaches it); invalid replies
are answered once, then refused with exit 10 and nothing added; made-up values are dropped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agents.privacy_detector import ModelDetector, chunks, detector_for, parse_findings
from kb.config import ModelRole, Privacy, parse_config
from kb.errors import ModelError
from kb.evidence import load_ledger
from kb.intake import Message, prepare, prepare_messages
from kb.scaffold import init_repository
from tests.agents.scripted import scripted_provider
from tests.builders import commit

TEXT = "Ana Souza rang from +44 20 7946 0958 about her type 2 diabetes; card 4111 1111 1111 1111, mail ana.souza@gmail.com.\n"
POLICY = Privacy(person="mask", health="mask", detector=ModelRole(model="scripted/pii"))


def _reply(*findings: tuple[str, str]) -> str:
    return json.dumps({"findings": [{"kind": k, "text": t} for k, t in findings]})


def test_off_by_default_and_only_for_masked_prose_kinds() -> None:
    assert detector_for(Privacy()) is None  # no model configured
    assert detector_for(Privacy(detector=ModelRole(model="scripted/pii"))) is None  # address and dob are no-copy, person/health keep
    assert isinstance(detector_for(POLICY), ModelDetector)
    config = parse_config(
        "version: 1\nprivacy:\n  person: mask\n  detector: {model: ollama/llama3.1, api_base: 'http://localhost:11434'}\n"
    )
    assert config.privacy.detector is not None and config.privacy.detector.api_base == "http://localhost:11434"


def test_findings_are_masked_and_no_pattern_value_reaches_the_model() -> None:
    reply = _reply(("person", "Ana Souza"), ("health", "type 2 diabetes"), ("person", "Bruno Lima"), ("ssn", "Ana"))
    with scripted_provider({"pii": [reply]}) as model:
        item = prepare(TEXT.encode(), "call.md", "document", "user:ana", privacy=POLICY, detector=detector_for(POLICY))
    assert item.content == "[PERSON-1] rang from +44 20 7946 0958 about her [HEALTH-1]; card [CARD-1], mail ana.souza@gmail.com.\n"
    assert item.meta["masked"] == {"card": 1, "health": 1, "person": 1}  # Bruno Lima is not in the text; ssn was not asked
    (request,) = model.requests
    sent = "\n".join(str(m["content"]) for m in request.messages)
    for value in ("4111", "7946 0958", "ana.souza@gmail.com"):  # phone and e-mail are kept in evidence, never shown
        assert value not in sent
    assert "Ana Souza" in sent and "[PHONE-1]" in sent and "- person:" in sent and "- health:" in sent and "- address:" not in sent


def test_a_conversation_is_masked_the_same_way() -> None:
    with scripted_provider({"pii": [_reply(("person", "Ana Souza"))]}):
        item = prepare_messages(
            [Message("user", "I am Ana Souza, call me.")], "s1", "user:ana", privacy=POLICY, detector=detector_for(POLICY)
        )
    assert "Ana Souza" not in item.content and "[PERSON-1]" in item.content


def test_an_invalid_reply_is_answered_once_then_accepted() -> None:
    with scripted_provider({"pii": ["Sure! The name is Ana Souza.", "```json\n" + _reply(("person", "Ana Souza")) + "\n```"]}) as model:
        item = prepare(TEXT.encode(), "call.md", "document", "user:ana", privacy=POLICY, detector=detector_for(POLICY))
    assert item.content.startswith("[PERSON-1] rang")
    second = model.requests[1].messages
    assert second[-2] == {"role": "assistant", "content": "Sure! The name is Ana Souza."}
    assert "not JSON" in second[-1]["content"]


def test_two_invalid_replies_refuse_the_add_and_nothing_is_stored(tmp_path: Path, cli) -> None:
    repo = init_repository(tmp_path / "kb")
    config = (
        (repo.root / "kb.config.yaml")
        .read_text(encoding="utf-8")
        .replace("privacy:", "privacy:\n  person: mask\n  detector: {model: scripted/pii}", 1)
    )
    commit(repo, {"kb.config.yaml": config}, "config: privacy detector\n")
    note = tmp_path / "call.md"
    note.write_text(TEXT, encoding="utf-8")
    before = load_ledger(repo.root)
    with scripted_provider({"pii": ['{"names": ["Ana Souza"]}', '{"findings": [{"kind": "person"}]}']}):
        result = cli("--repo", str(repo.root), "evidence", "add", str(note), "--user", "ana")
    assert result.code == 10, result.err
    assert 'its reply is finding 1 is not an object with a "kind" and a "text" string, twice; nothing was added' in result.err
    assert "Traceback" not in result.err and load_ledger(repo.root) == before


def test_parse_findings_rules() -> None:
    shown = "Ana met [PERSON-1] in Porto."
    assert parse_findings(
        _reply(("person", "Ana"), ("person", "[PERSON-1]"), ("person", "Zoe"), ("place", "Porto")), shown, {"person"}
    ) == [("person", "Ana")]
    for bad, message in [("[]", '"findings" list'), ('{"findings": "Ana"}', '"findings" list'), ("Ana", "not JSON")]:
        with pytest.raises(ValueError, match=message):
            parse_findings(bad, shown, {"person"})


def test_long_text_is_sent_in_pieces_split_at_line_ends() -> None:
    text = "".join(f"line {n} " + "x" * 90 + "\n" for n in range(200))
    pieces = list(chunks(text, 6000))
    assert "".join(pieces) == text and len(pieces) == 4 and all(len(p) <= 6000 and p.endswith("\n") for p in pieces)
    with scripted_provider({"pii": [_reply()] * 4}) as model:
        assert ModelDetector(ModelRole(model="scripted/pii"))(text, {"person"}) == []
    assert len(model.requests) == 4


def test_a_failing_model_stops_the_ingest() -> None:
    with scripted_provider({"pii": []}), pytest.raises(ModelError):
        prepare(TEXT.encode(), "call.md", "document", "user:ana", privacy=POLICY, detector=detector_for(POLICY))
