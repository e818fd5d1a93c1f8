"""Injections in a chat never reach a merged page through ``kb evidence add`` and ``kb run``
(issue 23, item 5): plain and hidden, in several languages; the ordinary sentences around them
do. (Documents: the offline Proposer's short-document path does not consult ``kb.injection`` yet;
tests/kb/test_injection.py holds the detector's verdict on every phrasing.)"""

from __future__ import annotations

import json
import subprocess
import unicodedata
from pathlib import Path

from tests.kb.injection_phrasings import PHRASINGS

CHOSEN = [text for _, how, text in PHRASINGS if how in {"note to the reviewer", "homoglyphs", "letter-spacing", "fake tags", "base64"}]


def _merged_text(root: Path) -> str:
    names = subprocess.run(["git", "-C", str(root), "ls-tree", "-r", "--name-only", "main"], capture_output=True, text=True, check=True)
    pages = [n for n in names.stdout.splitlines() if n.endswith(".md") and n.startswith(("knowledge/", "users/"))]
    shown = [
        subprocess.run(["git", "-C", str(root), "show", f"main:{n}"], capture_output=True, text=True, check=True).stdout for n in pages
    ]
    return unicodedata.normalize("NFKC", "\n".join(shown))


def test_injections_from_a_chat_reach_no_merged_page(cli, tmp_path: Path) -> None:
    assert len(CHOSEN) >= 10 and len({lang for lang, how, _ in PHRASINGS if _ in CHOSEN}) >= 3
    root = tmp_path / "kb"
    assert cli("init", str(root)).code == 0
    chat = tmp_path / "chat.json"
    turns = ["I moved to Lisbon in 2021 for work.", *CHOSEN, "I have two cats called Miso and Tofu."]
    chat.write_text(json.dumps([{"role": "user", "content": t} for t in turns]))
    assert cli("evidence", "add", str(chat), "--kind", "conversation", "--user", "pat", cwd=root).code == 0
    ran = cli("run", "--no-index")
    assert ran.code == 0, ran.err
    merged = _merged_text(root)
    assert "Lisbon" in merged and "Miso and Tofu" in merged
    for text in CHOSEN:
        core = unicodedata.normalize("NFKC", text)
        assert all(core[i : i + 16] not in merged for i in range(0, max(1, len(core) - 15), 4)), text
