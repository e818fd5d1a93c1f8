"""No file in agents/ holds a proper noun of the benchmark cases (issue 22, item 5).

The offline agents once matched product names taken from the development memory cases; every
offline memory score then overstated how general the extractor is. The nouns are those of
``tests/agents/benchmark_nouns.txt`` (made by ``bench/benchmark_nouns.py`` from the memory cases
and LoCoMo, committed so that this runs without the data); each is searched as a whole word, case
and all, in every file under agents/.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOUNS = Path(__file__).with_name("benchmark_nouns.txt")


def load_nouns(path: Path = NOUNS) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def noun_pattern(nouns: list[str]) -> re.Pattern[str]:
    """One pattern for all nouns: whole words (no letter, digit or ``_`` on either side), the
    words of a name apart by any white space; longest first, so a name wins over its part."""
    parts = [r"\s+".join(re.escape(w) for w in noun.split()) for noun in sorted(nouns, key=len, reverse=True)]
    return re.compile(rf"(?<![\w])(?:{'|'.join(parts)})(?![\w])")


def benchmark_word_hits(root: Path, nouns: list[str]) -> list[str]:
    """``path:line: noun`` for each noun found in a file under ``root`` (caches skipped)."""
    pattern = noun_pattern(nouns)
    hits = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        text = path.read_bytes().decode("utf-8", errors="replace")
        for m in pattern.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            hits.append(f"{path.relative_to(root).as_posix()}:{line}: {m.group(0)}")
    return hits


def test_the_list_is_there_and_small() -> None:
    nouns = load_nouns()
    assert len(nouns) >= 100
    assert NOUNS.stat().st_size < 300_000
    assert all(n[0].isalpha() and not n.islower() for n in nouns)  # names, not ordinary words


def test_no_file_in_agents_holds_a_benchmark_noun() -> None:
    assert benchmark_word_hits(ROOT / "agents", load_nouns()) == []


def test_the_scan_finds_a_planted_noun(tmp_path: Path) -> None:
    nouns = load_nouns()
    word = next(n for n in nouns if " " not in n and n.isalpha())
    name = next(n for n in nouns if " " in n)
    (tmp_path / "clean.py").write_text(f"x = '{word.lower()} {word}x x{word}'\n", encoding="utf-8")
    assert benchmark_word_hits(tmp_path, nouns) == []  # in another case, or inside a word: no hit
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "rules.py").write_text(f"A = 1\nMAKES = r'(?:{word}|other)'\n", encoding="utf-8")
    (tmp_path / "pkg" / "vocab.txt").write_text("# a data file\n" + name.replace(" ", "\n   ") + "\n", encoding="utf-8")
    hits = benchmark_word_hits(tmp_path, nouns)
    assert hits == [f"pkg/rules.py:2: {word}", f"pkg/vocab.txt:2: {name.replace(' ', chr(10) + '   ')}"]
