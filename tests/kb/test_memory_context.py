"""``kb memory context``: placeholders are numbered per context, and a page kb cannot read is
left out of it instead of failing the command."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.builders import write_chat

HOME = "+44 20 7946 0958"
WORK = "+44 20 7946 0321"


def test_two_phones_in_two_snippets_get_two_placeholders_and_one_phone_keeps_its_own(cli, tmp_path: Path) -> None:
    root = tmp_path / "kb"
    assert cli("init", str(root)).code == 0
    chats = [
        [("user", f"My home phone is {HOME}, call it in the evening.")],
        [("user", f"My work phone is {WORK}, call it during office hours.")],
        [("user", f"Again: in the evening the home phone {HOME} is best.")],
    ]
    for n, messages in enumerate(chats):
        chat = write_chat(tmp_path / f"chat-{n}.json", messages, f"2025-03-0{n + 1}T10:00:00")
        assert cli("evidence", "add", str(chat), "--kind", "conversation", "--user", "alice", cwd=root).code == 0
    assert cli("index", "build").code == 0
    result = cli("memory", "context", "which phone should I call alice on?", "--user", "alice", "--variant", "raw", "--json")
    assert result.code == 0, result.err
    data = json.loads(result.out)
    texts = [item["text"] for item in data["items"]]
    assert len(texts) == 3 and "7946" not in data["text"], texts
    home = [t for t in texts if "home phone" in t]
    work = [t for t in texts if "work phone" in t]
    assert len(home) == 2 and len(work) == 1, texts
    home_tags = {tag for t in home for tag in ("[PHONE-1]", "[PHONE-2]") if tag in t}
    work_tags = {tag for tag in ("[PHONE-1]", "[PHONE-2]") if tag in work[0]}
    # two different phones: two placeholders; the same phone in two snippets: the same one
    assert len(home_tags) == 1 and len(work_tags) == 1 and home_tags != work_tags
    assert home_tags | work_tags == {"[PHONE-1]", "[PHONE-2]"}


def test_a_profile_page_kb_cannot_read_is_left_out_of_the_context(cli, tmp_path: Path) -> None:
    root = tmp_path / "kb"
    assert cli("init", str(root)).code == 0
    chat = write_chat(tmp_path / "chat.json", [("user", "I prefer window seats on long flights.")], "2025-03-01T10:00:00")
    assert cli("evidence", "add", str(chat), "--kind", "conversation", "--user", "alice", cwd=root).code == 0
    profile = root / "users" / "alice" / "profile.md"
    profile.parent.mkdir(parents=True, exist_ok=True)
    profile.write_bytes(b"---\ntitle: [unclosed\n---\n\xff\xfe not a page\n")
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", "commit", "-qm", "a profile written by hand, broken"], cwd=root, check=True)
    assert cli("index", "build").code == 0
    result = cli("memory", "context", "which seat should I book?", "--user", "alice", "--json")
    assert result.code == 0, result.err
    items = json.loads(result.out)["items"]
    assert [i["kind"] for i in items if i["kind"] == "profile"] == []
    assert any("window seats" in i["text"] for i in items if i["kind"] == "evidence")
