"""The passage shown for a hit: the window around the query's terms, matched as BM25 matches them."""

from __future__ import annotations

from kb.retrieval.snippet import passage


def test_the_window_holds_the_terms_and_marks_them() -> None:
    filler = "Nothing of interest is written in this sentence at all. " * 12
    text = filler + "Alice lives in Munich since June.[^a1] " + filler
    shown = passage(text, "where does alice live", width=120)
    assert "Alice lives in Munich" in shown.text and shown.text.startswith("… ") and shown.text.endswith(" …")
    assert "[^a1]" not in shown.text  # footnote references are noise in a preview
    marked = {shown.text[a:b] for a, b in shown.spans}
    assert marked == {"Alice", "lives"}  # "live" matches "lives": the analyser stems both
    assert shown.highlighted("<", ">").count("<") == 2 and "<Alice> <lives>" in shown.highlighted("<", ">")


def test_no_matching_term_shows_the_start() -> None:
    shown = passage("A short page about nothing in particular.", "quantum chromodynamics")
    assert shown.text == "A short page about nothing in particular." and shown.spans == ()


def test_chinese_terms_are_found() -> None:
    shown = passage("公司的差旅政策规定，出差必须提前十四天预订。" * 3, "差旅政策")
    assert shown.spans and all(shown.text[a:b] in ("差旅", "政策", "差旅政策") for a, b in shown.spans)


def test_markup_lines_and_references_go_and_the_answer_comes_first() -> None:
    from kb.retrieval.snippet import reader_text

    text = (
        '//// tab | Python\n/// tip[^5]\n\nUse `typer.echo` to print.\n\n///\n!!! note "Detail"\n'
        '    Indented admonition text.\n{!../docs_src/x.py!}\n--8<-- "inc.md"\n\n'
        "A [link](x.md){.internal-link target=_blank} here. `typer.Abort` prints Aborted! and exits with code 1.[^6]\n"
        '```python\n/// not markup inside code\n```\n////\n[^5]: ev-1#L1 "x"'
    )
    reader = reader_text(text)
    assert reader.citations == ("5", "6")
    assert "[^" not in reader.text and "{!" not in reader.text and "--8<--" not in reader.text and "{.internal" not in reader.text
    assert "/// not markup inside code" in reader.text and "//// tab" not in reader.text and "!!! note" not in reader.text
    shown = passage(text, "what does typer.Abort print")
    assert shown.answer == "`typer.Abort` prints Aborted! and exits with code 1."
    assert shown.text.startswith("… `typer.Abort` prints Aborted!")


def test_full_width_punctuation_is_kept() -> None:
    shown = passage("第一句话。出差必须提前十四天预订，经理批准后才能报销。", "出差 报销")
    assert shown.answer == "出差必须提前十四天预订，经理批准后才能报销。" and "，" in shown.text and "," not in shown.text


def test_the_passage_starts_where_its_window_holds_most_of_the_query() -> None:
    text = (
        "Unrelated opening words about history.\n\n"
        "The directory where the output files are created. It may be relative to the directory of the config.\n\n"
        "**default**: `'site'`\n\n"
        "Later prose that says nothing relevant at all and goes on for quite a while, "
        "long enough that a window starting at the first sentence cannot reach the default line below it.\n\n"
    )
    shown = passage(text, "which directory is the built site written to", width=120)
    # the best single sentence is the default line ("site" is rarer than "directory"); the window from
    # the lead sentence holds both
    assert shown.text.startswith("… The directory where the output files are created.")
    assert "`'site'`" in shown.text
