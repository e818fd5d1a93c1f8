"""``kb evidence add/show/list`` through kb's real entry point."""

from __future__ import annotations

import json
from pathlib import Path


def test_evidence_add_show_list(cli, tmp_path: Path) -> None:
    root = tmp_path / "kb"
    cli("init", str(root))
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "user", "content": "I live in Porto.", "timestamp": "2025-02-01T10:00:00Z"}]))
    added = cli("evidence", "add", str(chat), "--kind", "conversation", "--user", "alice", cwd=root)
    assert added.code == 0 and added.out.startswith("added ev-")
    ev_id = added.out.split()[1]
    assert "skipped" in cli("evidence", "add", str(chat), "--kind", "conversation", "--user", "alice").out
    shown = cli("evidence", "show", f"{ev_id}#L1")
    assert "    1  [2025-02-01T10:00:00Z] user: I live in Porto." in shown.out
    listed = cli("evidence", "list", "--json")
    assert json.loads(listed.out)["scope"] == "user:alice"
    missing_line = cli("evidence", "show", ev_id, "--lines", "5-6")
    assert missing_line.code == 6 and "L5 does not exist" in missing_line.err
