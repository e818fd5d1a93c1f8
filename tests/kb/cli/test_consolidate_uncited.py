"""A complete cycle records the evidence no page cites: per item, the lines that state a name, a
number or a date outside every citation span, shown by ``kb consolidate status`` (and --json)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.builders import add_evidence, make_sample_repo


def test_status_names_the_fact_lines_no_page_cites(cli, tmp_path: Path) -> None:
    repo, ids = make_sample_repo(tmp_path / "kb")
    note = "# Office\n\nThe Porto office opens on 3 May.\nwe like it there.\n\n```\nport = 8080\n```\n"
    ev = add_evidence(repo, note.encode(), "office.md", "document")
    run = cli("consolidate", "--no-index", cwd=repo.root)
    assert run.code == 0 and ": complete," in run.out, run.out + run.err

    status = cli("consolidate", "status", cwd=repo.root)
    assert status.code == 0, status.err
    lines = status.out.splitlines()
    # the note's one fact line (not its heading, not the plain sentence, not the code) is uncited
    assert f"  {ev}: 1 of 1 fact line(s) uncited: L3: 3, Porto, May" in lines, status.out
    summary = next(line for line in lines if line.startswith("uncited evidence: "))
    assert "in 3 of 3 evidence item(s) no page cites" in summary, summary

    data = json.loads(cli("consolidate", "status", "--json", cwd=repo.root).out)["uncited"]
    by_item = {item["evidence"]: item for item in data["listed"]}
    assert by_item[ev] == {"evidence": ev, "fact_lines": 1, "lines": 1, "examples": ["L3: 3, Porto, May"]}
    # the document's cited line 3 is not counted, its line 4 is; so for the chat (line 3 cited, line 1 not)
    assert by_item[ids["doc"]] == {"evidence": ids["doc"], "fact_lines": 2, "lines": 1, "examples": ["L4: 90, 180"]}
    chat = by_item[ids["chat"]]
    assert chat["examples"][0].startswith("L1: ") and "Lisbon" in chat["examples"][0]
    assert all(not e.startswith("L3:") for e in chat["examples"]), chat


def test_speakers_and_their_short_names_are_not_facts(cli, tmp_path: Path) -> None:
    repo, _ = make_sample_repo(tmp_path / "kb")
    talk = "[2023-08-25T13:33:00] Caroline (D1:1): Hey, Mel! How are you?\n[2023-08-25T13:34:00] Melanie (D1:2): Fine, Caroline. I moved to Porto.\n"
    ev = add_evidence(repo, talk.encode(), "talk.txt", "document")
    assert cli("consolidate", "--no-index", cwd=repo.root).code == 0
    data = json.loads(cli("consolidate", "status", "--json", cwd=repo.root).out)["uncited"]
    item = next(i for i in data["listed"] if i["evidence"] == ev)
    assert item == {"evidence": ev, "fact_lines": 1, "lines": 1, "examples": ["L2: Porto"]}, item
