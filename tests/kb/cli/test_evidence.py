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


def _pdf(text: str) -> bytes:
    """A one-page PDF whose text layer is ``text`` (Helvetica), with a correct xref table."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = b"%PDF-1.4\n"
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    return out + b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)


def _sources(cli) -> dict[str, str]:
    return {json.loads(line)["source"]: json.loads(line)["id"] for line in cli("evidence", "list", "--json").out.splitlines()}


def test_a_folder_is_added_recursively_with_relative_sources(cli, tmp_path: Path) -> None:
    root = tmp_path / "kb"
    cli("init", str(root))
    docs = tmp_path / "docs"
    (docs / "guide" / "deep").mkdir(parents=True)
    (docs / ".git").mkdir()
    (docs / "README.md").write_text("# Project\n\nThe project ships weekly.\n")
    (docs / "guide" / "install.md").write_text("# Install\n\nRun make install.\n")
    (docs / "guide" / "deep" / "notes.txt").write_text("Deep notes about caching.\n")
    (docs / "guide" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")  # not matched by the default globs
    (docs / ".git" / "config.md").write_text("# hidden\n\nnot evidence\n")
    added = cli("evidence", "add", str(docs), cwd=root)
    assert added.code == 0, added.err
    assert sorted(_sources(cli)) == ["README.md", "guide/deep/notes.txt", "guide/install.md"]
    # --glob chooses the files; --source labels them without replacing their names
    other = tmp_path / "other"
    (other / "a").mkdir(parents=True)
    (other / "a" / "one.md").write_text("# One\n\nFirst other page.\n")
    (other / "a" / "two.txt").write_text("Second other page.\n")
    added = cli("evidence", "add", str(other), "--glob", "*.md", "--source", "wiki")
    assert added.code == 0, added.err
    assert "wiki/a/one.md" in _sources(cli) and not any(s.endswith("two.txt") for s in _sources(cli))
    # one file: --source is its source, as before
    single = tmp_path / "single.md"
    single.write_text("# Single\n\nA single page.\n")
    assert cli("evidence", "add", str(single), "--source", "https://example.org/single").code == 0
    assert "https://example.org/single" in _sources(cli)
    empty = tmp_path / "empty"
    empty.mkdir()
    refused = cli("evidence", "add", str(empty))
    assert refused.code == 2 and "no files matching" in refused.err and "--glob" in refused.err


def test_pdf_and_html_are_converted_and_binary_is_refused(cli, tmp_path: Path) -> None:
    root = tmp_path / "kb"
    cli("init", str(root))
    pdf = tmp_path / "policy.pdf"
    pdf.write_bytes(_pdf("Hotel limit is 180 euros per night."))
    html = tmp_path / "page.html"
    html.write_text(
        "<html><head><style>p{color:red}</style><script>alert(1)</script></head><body><h1>Travel</h1><p>Book <b>economy</b> flights.</p></body></html>"
    )
    added = cli("evidence", "add", str(pdf), str(html), cwd=root)
    assert added.code == 0, added.err
    ids = _sources(cli)
    assert "Hotel limit is 180 euros per night." in cli("evidence", "show", ids["policy.pdf"]).out
    shown = cli("evidence", "show", ids["page.html"]).out
    assert "# Travel" in shown and "Book **economy** flights." in shown and "alert" not in shown and "color" not in shown
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4\nthis is not a pdf body")
    result = cli("evidence", "add", str(broken))
    assert result.code == 5 and "broken.pdf: cannot read this PDF" in result.err and "Traceback" not in result.err
    binary = tmp_path / "data.txt"
    binary.write_bytes(b"header\x00\x00\x01\x02 rest")
    result = cli("evidence", "add", str(binary))
    assert result.code == 5 and "data.txt: contains NUL bytes" in result.err
    assert len(_sources(cli)) == 2  # nothing of the refused files was added
