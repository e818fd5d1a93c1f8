"""Issue 30 on a real MkDocs page (Typer's docs, MIT, tests/agents/offline/fixtures/typer):
an <abbr title="... (not ...)"> does not withdraw a sentence, pymdownx blocks and tabs are
labelled blocks, snippet includes bring in the files added with the docs, attribute lists are
not text, and the L0 is not a pointer sentence."""

from __future__ import annotations

from pathlib import Path

import pytest

from kb.evidence import add_items
from kb.intake import expand_inputs, prepare
from kb.page import Page, parse_page
from kb.repo import Repo
from kb.scaffold import init_repository
from pipeline.loop import RunStatus, run_loop

FIXTURE = Path(__file__).parent / "fixtures" / "typer"
PAGE = "knowledge/typer/docs/tutorial/arguments/help.md"


@pytest.fixture(scope="module")
def merged(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    repo = init_repository(tmp_path_factory.mktemp("mkdocs") / "kb")
    inputs = expand_inputs([FIXTURE], globs=("*.md",), label="typer")
    items = [prepare(path.read_bytes(), path.name, "document", "system", source=source) for path, source in inputs]
    add_items(repo, items)
    result = run_loop(repo, build_index=False)
    assert result.status is RunStatus.MERGED, result.reason
    assert [r.verdict for r in result.reviews] == ["approve"]  # nothing withdrawn, the abbr's "not" included
    return repo


def _page(repo: Repo) -> Page:
    return parse_page((repo.root / PAGE).read_text(encoding="utf-8"), PAGE)


def _shown(page: Page) -> str:
    return "\n".join(line for line in page.body.splitlines() if not line.startswith("[^"))


def test_a_folder_brings_in_the_files_its_pages_include() -> None:
    sources = [source for _, source in expand_inputs([FIXTURE], globs=("*.md",), label="typer")]
    assert "typer/docs_src/first_steps/tutorial006_py310.py" in sources
    assert "typer/docs_src/arguments/help/tutorial001_an_py310.py" in sources
    assert not any("missing" in s for s in sources)


def test_the_abbr_sentence_is_kept_with_its_visible_text(merged: Repo) -> None:
    shown = _shown(_page(merged))
    assert "by adding it to a function's docstring.[^" in shown
    assert "<abbr" not in shown and "title=" not in shown


def test_blocks_and_tabs_are_labelled_blocks_with_no_marker_left(merged: Repo) -> None:
    shown = _shown(_page(merged))
    assert "> **Linux, macOS**" in shown and "> **Windows PowerShell**" in shown
    assert "> **Tip**" in shown and "> **Argument help**" in shown
    assert "///" not in shown and "!!!" not in shown


def test_includes_are_the_files_content_or_say_they_are_missing(merged: Repo) -> None:
    page = _page(merged)
    shown = _shown(page)
    code = (FIXTURE / "docs_src/first_steps/tutorial006_py310.py").read_text(encoding="utf-8")
    assert code.strip().splitlines()[-1] in shown
    assert "{*" not in shown and "--8<--" not in shown
    assert "`docs_src/missing/example.py`" in shown and "not added with the documents" in shown
    cited = {c.evidence_id for c in page.structure.citations}
    assert len(cited) >= 3  # the page and the programs it includes
    assert not (merged.root / "knowledge/typer/docs-src").exists()  # an included program has no page of its own


def test_attribute_lists_are_not_text(merged: Repo) -> None:
    shown = _shown(_page(merged))
    assert "[Click docs](https://click.palletsprojects.com) for the options" in shown
    assert "target=_blank" not in shown and "{." not in shown


def test_the_l0_is_not_a_pointer_sentence(merged: Repo) -> None:
    summary = _page(merged).summary
    assert not summary.endswith(":") and "looked like" not in summary and "you saw" not in summary
