"""YAML from outside (issue 10, items 5 and 9): alias bombs, impossible dates and deep nesting in
page headers, the config and case files end as one clear error with its exit code, at once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kb import yamltext
from kb.errors import FormatError
from kb.page import parse_page
from kb.yamltext import YamlProblem, load_yaml
from tests.builders import make_repo

BOMB = 'a: &a ["x","x","x","x","x","x","x","x","x"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\ne: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\ng: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n'


def page_with_header(header: str) -> str:
    return f"---\nid: knowledge/x\ntitle: X\n{header}---\n# X\n"


@pytest.mark.parametrize(
    ("header", "message", "line"),
    [
        (BOMB, "aliases", 5),
        ("valid_from: 2025-13-40\n", "impossible value", 1),
        ("tags: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply", 1),
        ("summary: " + "y" * 300_000 + "\n", "over the limit", 1),
    ],
)
def test_hostile_headers_are_format_errors_at_once(header: str, message: str, line: int) -> None:
    start = time.perf_counter()
    with pytest.raises(FormatError, match=message) as caught:
        parse_page(page_with_header(header), "knowledge/x.md")
    assert time.perf_counter() - start < 5
    assert caught.value.path == "knowledge/x.md" and caught.value.line is not None and caught.value.line >= line


def test_check_and_read_report_an_alias_bomb_with_their_exit_codes(cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "kb")
    (repo.root / "knowledge" / "x.md").write_text(page_with_header(BOMB))
    checked = cli("--repo", str(repo.root), "check")
    assert checked.code == 1 and "aliases" in checked.out
    repo.commit_worktree_paths(["knowledge/x.md"], "a hostile page\n")
    read = cli("--repo", str(repo.root), "read", "knowledge/x")
    assert read.code == 5 and "aliases" in read.err


def test_config_alias_bomb_and_bad_date_exit_4(cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "kb")
    config = repo.root / "kb.config.yaml"
    config.write_text("version: 1\n" + BOMB.replace("a:", "x-a:"))
    result = cli("--repo", str(repo.root), "check")
    assert result.code == 4 and "aliases" in result.err
    config.write_text("version: 1\nname: 2025-02-30\n")
    result = cli("--repo", str(repo.root), "check")
    assert result.code == 4 and "impossible value" in result.err


def test_case_file_alias_bomb_exits_5_and_ingests_nothing(cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "kb")
    case = tmp_path / "case.yaml"
    case.write_text("conversation_histories:\n  - " + BOMB.replace("\n", "\n    "))
    result = cli("--repo", str(repo.root), "memory", "ingest", "--user", "ann", str(case), "--no-index")
    assert result.code == 5 and "aliases" in result.err
    assert cli("--repo", str(repo.root), "evidence", "list").out == ""


def test_a_duplicate_header_key_is_a_finding_not_a_silent_overwrite(cli, tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "kb")
    (repo.root / "knowledge" / "x.md").write_text(page_with_header("status: active\nsummary: One.\nsummary: Two.\n"))
    checked = cli("--repo", str(repo.root), "check")
    assert checked.code == 1 and "duplicate key 'summary'" in checked.out
    with pytest.raises(FormatError, match="duplicate key") as caught:
        parse_page(page_with_header("status: active\nstatus: deprecated\n"), "knowledge/x.md")
    assert caught.value.line == 5


@pytest.mark.parametrize(
    "text", ["a: !!int \n", "a: !!timestamp x\n", "a: !!binary '!!'\n", "a: !!set {x}\n", "!!python/name:os.system a\n", "a: ! x\n"]
)
def test_explicit_tags_are_refused_not_a_crash(text: str) -> None:
    with pytest.raises(YamlProblem, match="tags .* are not accepted"):
        load_yaml(text, 1000)


# libyaml (issue 27 item 5): the C loader does the work on ordinary text; whatever it would treat
# differently from the pure loader goes to the pure loader, so results and messages are the same.

VARIED = [
    "id: knowledge/x\ntitle: X\nvalid_from: 2025-01-02\nupdated: 2025-01-02 10:20:30\n",
    "n: 12\nf: 1.5e3\nneg: -7\noct: 0o17\nhex: 0x1F\ninf: .inf\nflag: true\nno: off\nnothing: null\nempty:\n",
    "title: Café Zürich — 東京 ✓\nsummary: 'It''s here: a colon, a # hash'\nq: \"tab\\tand \\u00e9\"\n",
    "tags: [travel, budget, '2025']\nsources:\n- ev-1\n- ev-2\n- 3\n",
    "meta:\n  owner: ann\n  review:\n    every: 90\n    next: 2026-03-01\n  list:\n  - {a: 1, b: [x, y]}\n",
    "summary: >\n  folded text\n  over two lines\nbody: |\n  literal\n   kept\n",
    'summary: "*bold* and a star * and a bang ! and an amp & inside quotes"\nnote: plain text with a ! bang\n',
    "title: 'Version 1.10'\nversion: 1.10\ntime: 12:30\nlarge: 123456789012345678901234567890\n",
]

HOSTILE = [
    (BOMB, "aliases"),
    ("a: &x 1\nb: *x\n", "aliases"),
    ("a: !!int 3\n", "tags"),
    ("a: ! x\n", "tags"),
    ("!!python/object/apply:os.system [ls]\n", "tags"),
    ("tags: " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ("a:\n" + "".join("  " * k + f"k{k}:\n" for k in range(1, 400)) + "  " * 400 + "x: 1\n", "nested too deeply"),
    ("a: b: c\n", "malformed"),
    ("a: [1, 2\n", "malformed"),
    ("a: 1\nb: 2\na: 3\n", "duplicate key"),
    ("? [a, b]\n: 1\n", "key must be a scalar"),
    ("d: 2025-02-30\n", "impossible value"),
    ("a: \x07\n", "malformed"),
]


def outcome(text: str) -> tuple[str, object]:
    try:
        return "value", load_yaml(text, 1_000_000)
    except YamlProblem as problem:
        return "problem", (problem.message, problem.line)


@pytest.mark.parametrize("text", VARIED)
def test_libyaml_loads_varied_headers_exactly_as_the_pure_loader(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert yamltext.C_LOADER is not None  # PyYAML's wheels carry libyaml
    assert yamltext.libyaml_may_load(text)
    fast = outcome(text)
    monkeypatch.setattr(yamltext, "C_LOADER", None)
    assert fast == outcome(text) and fast[0] == "value"


@pytest.mark.parametrize(("text", "message"), HOSTILE)
def test_hostile_yaml_is_refused_with_the_same_message_and_line_either_way(
    text: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = time.perf_counter()
    fast = outcome(text)
    monkeypatch.setattr(yamltext, "C_LOADER", None)
    assert fast == outcome(text)
    assert fast[0] == "problem" and message in str(fast[1])
    assert time.perf_counter() - start < 5


def test_the_prescan_sends_aliases_anchors_tags_and_depth_to_the_pure_loader() -> None:
    for text in [BOMB, "a: &x 1\n", "a: !!str 1\n", "a: " + "[" * (yamltext.C_DEPTH + 1) + "]" * (yamltext.C_DEPTH + 1) + "\n"]:
        assert not yamltext.libyaml_may_load(text)
    assert yamltext.libyaml_may_load("a: '&x *y !z'\n" + "b: " + "[" * 10 + "]" * 10 + "\n")
