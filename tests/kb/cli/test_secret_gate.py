"""The secret gate of ``kb evidence add``, ``kb memory ingest`` and ``kb check`` through the real
CLI (issue 10 item 4, issue 12 item 8): every finding of every file at once, nothing added, the
secret never printed; ordinary documentation passes; a reviewed finding is allowed by its
fingerprint in kb.config.yaml, validated at load."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pygit2

from kb.evidence import load_ledger
from tests.kb.cli.helpers import assert_one_error

DOCS = """\
# Connecting

```python
client = Client(password="secret", api_key=os.environ["API_KEY"])
self.access_token = access_token
```

Set `password = "changeme"` in `settings.py`, then `api_key: <your-key>` and `token: ${TOKEN}`.
"""
LEAKY_NOTES = "Ops notes\n\nmy password is hunter2!Xq\nDATABASE_URL=postgres://app:pa55w0rd@db.internal/app\n"
LEAKY_CONFIG = "[default]\naws_access_key_id = AKIAQ4XMPLR7ZT2KW9NB\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzK8q3Lm2Rp\n"
SECRET_TEXTS = ("hunter2!Xq", "pa55w0rd", "AKIAQ4XMPLR7ZT2KW9NB", "wJalrXUtnFEMI")
FINDING = re.compile(r"^  (\S+?):(?: stored line )?(\d+): (.+) \(fingerprint ([0-9a-f]{16})\)$")


def _findings(err: str) -> list[tuple[str, int, str, str]]:
    return [(Path(m[1]).name, int(m[2]), m[3], m[4]) for line in err.splitlines() if (m := FINDING.match(line))]


def _setup(cli, tmp_path: Path) -> tuple[Path, list[Path]]:
    root = tmp_path / "kb"
    assert cli("init", str(root)).code == 0
    files = []
    for name, text in (("guide.md", DOCS), ("ops.md", LEAKY_NOTES), ("credentials.txt", LEAKY_CONFIG)):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        files.append(path)
    return root, files


def test_add_reports_every_finding_of_every_file_and_adds_nothing(cli, tmp_path: Path) -> None:
    root, files = _setup(cli, tmp_path)
    head = pygit2.Repository(str(root)).head.target
    result = cli("evidence", "add", *map(str, files), cwd=root)
    assert result.code == 5, result.err
    assert result.err.startswith("error: 4 findings that look like a secret in 2 inputs; nothing was added\n")
    assert [f[:3] for f in _findings(result.err)] == [
        ("ops.md", 3, "password in prose"),
        ("ops.md", 4, "password in a URL"),
        ("credentials.txt", 2, "AWS access key id"),
        ("credentials.txt", 3, "AWS secret access key"),
    ]
    assert "hint: evidence is permanent" in result.err and "Traceback" not in result.err
    assert not any(secret in result.out + result.err for secret in SECRET_TEXTS)
    assert load_ledger(root) == [] and pygit2.Repository(str(root)).head.target == head


def test_documentation_with_placeholders_and_code_is_added(cli, tmp_path: Path) -> None:
    root, files = _setup(cli, tmp_path)
    result = cli("evidence", "add", str(files[0]), cwd=root)
    assert result.code == 0, result.err
    assert result.out.startswith("added ev-") and len(load_ledger(root)) == 1


def test_a_reviewed_fingerprint_in_the_config_allows_that_finding_only(cli, tmp_path: Path) -> None:
    root, files = _setup(cli, tmp_path)
    refused = _findings(cli("evidence", "add", str(files[1]), cwd=root).err)
    url_print = next(f[3] for f in refused if f[2] == "password in a URL")
    config = root / "kb.config.yaml"
    config.write_text(config.read_text() + f"secrets:\n  allow:\n    - {url_print}  # the staging URL, reviewed\n")
    still = cli("evidence", "add", str(files[1]))
    assert still.code == 5 and [f[2] for f in _findings(still.err)] == ["password in prose"]
    prose_print = _findings(still.err)[0][3]
    config.write_text(config.read_text() + f"    - {prose_print}\n")
    added = cli("evidence", "add", str(files[1]))
    assert added.code == 0, added.err
    assert len(load_ledger(root)) == 1
    # kb check honours the same allowlist: the stored evidence is not reported
    checked = cli("check")
    assert "secret.found" not in checked.out + checked.err


def test_the_allowlist_holds_fingerprints_only(cli, tmp_path: Path) -> None:
    root, files = _setup(cli, tmp_path)
    config = root / "kb.config.yaml"
    config.write_text(config.read_text() + "secrets:\n  allow: [0123456789abcdef, hunter2!Xq]\n")
    result = cli("evidence", "add", str(files[0]), cwd=root)
    assert_one_error(result, 4, "secrets.allow", "entry 2 is not a finding's fingerprint", "never put the secret itself here")
    assert "hunter2" not in result.err and load_ledger(root) == []


def test_check_reports_a_secret_in_a_page_with_its_fingerprint(cli, tmp_path: Path) -> None:
    root, _ = _setup(cli, tmp_path)
    page = root / "knowledge" / "ops.md"
    page.write_text(
        "---\nid: knowledge/ops\ntype: topic\ntitle: Ops\nsummary: Ops.\nscope: system\n---\n# Ops\n\n"
        "The password for the db is Tr0ub4dor&3.\n",
        encoding="utf-8",
    )
    result = cli("check", cwd=root)
    assert result.code == 1
    line = next(line for line in (result.out + result.err).splitlines() if "secret.found" in line)
    assert "knowledge/ops.md:10" in line and re.search(r"password in prose \(fingerprint [0-9a-f]{16}\)", line)
    assert "Tr0ub4dor" not in result.out + result.err


def test_memory_ingest_reports_every_session_with_a_secret(cli, tmp_path: Path) -> None:
    root, _ = _setup(cli, tmp_path)
    chat = tmp_path / "chats.jsonl"
    turns = [
        {"role": "user", "content": "my password is hunter2!Xq", "timestamp": "2025-01-01T10:00:00Z"},
        {"role": "assistant", "content": "Noted.", "timestamp": "2025-01-01T10:00:05Z"},
        {"role": "user", "content": "and the db is postgres://app:pa55w0rd@db/app", "timestamp": "2025-01-01T10:01:00Z"},
    ]
    chat.write_text("\n".join(json.dumps(t) for t in turns) + "\n", encoding="utf-8")
    result = cli("memory", "ingest", str(chat), "--user", "alice", cwd=root)
    assert result.code == 5, result.err
    assert [(f[1], f[2]) for f in _findings(result.err)] == [(1, "password in prose"), (3, "password in a URL")]
    assert "stored line" in result.err and not any(secret in result.err for secret in SECRET_TEXTS)
    assert load_ledger(root) == []


def test_add_refuses_the_kinds_issue_23_found_stored_each_listed_once(cli, tmp_path: Path) -> None:
    """Issue 23, item 4: every one of these was stored; now one add lists them all, at their lines."""
    from tests.kb.secret_kinds import KINDS, expand

    wanted = [
        "Slack webhook", "Discord bot token", "Discord webhook", "Twilio API key", "Hugging Face token", "PyPI upload token",
        "SendGrid key", "Telegram bot token", "Shopify access token", "DigitalOcean token", "Authorization Basic",
        "Docker config auths", "mysql -p", "wifi passcode in prose", "pw for ...: in prose", "password in prose (Chinese)",
        "database password (Chinese)",
    ]  # fmt: skip
    table = {kind: (n, secret, near) for n, (kind, _, secret, near) in enumerate(KINDS)}
    root = tmp_path / "kb"
    assert cli("init", str(root)).code == 0
    notes = tmp_path / "notes.md"
    notes.write_text("# Notes\n\n" + "\n\n".join(expand(table[k][1], table[k][0]) for k in wanted) + "\n", encoding="utf-8")
    result = cli("evidence", "add", str(notes), cwd=root)
    assert result.code == 5, result.err
    assert [f[1] for f in _findings(result.err)] == [3 + 2 * i for i in range(len(wanted))]  # one finding per credential
    assert load_ledger(root) == []
    near = tmp_path / "near.md"
    near.write_text("# Notes\n\n" + "\n\n".join(expand(table[k][2], table[k][0]) for k in wanted) + "\n", encoding="utf-8")
    added = cli("evidence", "add", str(near), cwd=root)
    assert added.code == 0, added.err
