"""The proper nouns of the benchmark cases, for the test that keeps them out of the agents (issue 22).

    python bench/benchmark_nouns.py [--data ../shared/data] [--out tests/agents/benchmark_nouns.txt]
                                    [--dictionary /usr/share/dict/words]

Reads every string of the memory cases (``memory-cases/**/*.yaml``) and of LoCoMo
(``locomo/*.json``: turns, speakers, questions, answers, summaries) and writes, one a line, sorted:

- every word with a capital letter (``Honda``, ``AmEx``, ``iPhone``) that stands somewhere inside
  a sentence (not only as its first word: ``Honestly``), unless it is an ordinary word: one the
  data also write in lower case (``Premium`` / ``premium``, ``Visa`` / ``visa``), or one the
  dictionary lists in lower case only (``Document``, ``Chess``; a word it lists both ways, such as
  ``Chase`` / ``chase``, stays). Listing ordinary words would make the scan useless on English;
- every run of two or three capitalised words inside a sentence made only of such ordinary
  words (``Premium Checking``): a product's name can be made of ordinary words.

Words of fewer than three letters before any apostrophe are left out (``Dr``, ``OK``, ``I've``),
and so are the names of months and weekdays and their abbreviations (any code that reads dates
names them). The dictionary is the system's
word list (Debian's ``wamerican``: SCOWL, whose licence allows any use; ``apt-get install
wamerican``). The data are third-party (see
``../shared/data/README.md``); the list is a few hundred names cut from them, committed so that
``tests/agents/test_no_benchmark_words.py`` runs on a fresh clone without the data.
"""

from __future__ import annotations

import argparse
import calendar
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SKIP_KEYS = {"img_url", "dia_id", "evidence", "sample_id", "url", "blip_caption", "query", "re-download", "test_id", "conversation_id"}
WORD_RE = re.compile(r"[A-Za-z]+(?:['’\-][A-Za-z]+)*")
SENTENCE_RE = re.compile(r"(?<=[.!?:;])\s+|\n+|[\"“”(]")
HEADER = """# Proper nouns of the benchmark cases: words no file in agents/ may contain (case-sensitive,
# whole words; tests/agents/test_no_benchmark_words.py). Regenerate with
# `python bench/benchmark_nouns.py` (it says how they are chosen). Cut from third-party data:
# memory cases from bojieli/ai-agent-book (Apache-2.0) and LoCoMo from snap-research/LoCoMo
# (CC BY-NC 4.0), as ../shared/data holds them.
"""


def strings(value: object, key: str = "") -> Iterator[str]:
    """Every string in a parsed YAML or JSON value, except identifiers, links and image fields."""
    if key in SKIP_KEYS:
        return
    if isinstance(value, str):
        if not value.startswith(("http://", "https://")):
            yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings(v, str(k))
    elif isinstance(value, list):
        for v in value:
            yield from strings(v, key)


def texts(data: Path) -> Iterator[str]:
    for path in sorted((data / "memory-cases").rglob("*.yaml")):
        yield from strings(yaml.safe_load(path.read_text(encoding="utf-8")))
    for path in sorted((data / "locomo").glob("*.json")):
        yield from strings(json.loads(path.read_text(encoding="utf-8")))


def benchmark_nouns(data: Path, dictionary: set[str]) -> list[str]:
    lower: set[str] = set()
    inside: set[str] = set()  # capitalised words seen after the first word of a sentence
    runs: set[tuple[str, ...]] = set()
    for text in texts(data):
        for sentence in SENTENCE_RE.split(text):
            words = [re.sub(r"['’]s$", "", w) for w in WORD_RE.findall(sentence)]
            run: list[str] = []
            for n, word in enumerate(words + [""]):
                if word.islower():
                    lower.add(word)
                capital = bool(word) and not word.islower() and not word.isupper()
                if capital and n > 0:
                    inside.add(word)
                if capital and n > 0 and word[0].isupper():
                    run.append(word)
                    continue
                if 2 <= len(run) <= 3:
                    runs.add(tuple(run))
                run = []
    ordinary = lower | {w for w in dictionary if w.islower() and w.capitalize() not in dictionary}
    calendar_words = {*calendar.month_name, *calendar.month_abbr, *calendar.day_name, *calendar.day_abbr} - {""}
    nouns = {w for w in inside if len(re.split(r"['’]", w)[0]) >= 3 and w.lower() not in ordinary and w not in calendar_words}
    phrases = {" ".join(r) for r in runs if all(w.lower() in ordinary and len(w) >= 3 for w in r)}
    return sorted(nouns | phrases)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "agents" / "benchmark_nouns.txt")
    parser.add_argument("--dictionary", type=Path, default=Path("/usr/share/dict/words"))
    args = parser.parse_args()
    if not args.dictionary.is_file():
        print(f"no word list at {args.dictionary}: apt-get install wamerican, or pass --dictionary", file=sys.stderr)
        return 2
    if not (args.data / "memory-cases").is_dir() or not (args.data / "locomo").is_dir():
        print(f"no memory-cases/ and locomo/ under {args.data}: pass --data (see ../shared/data/README.md)", file=sys.stderr)
        return 2
    dictionary = set(args.dictionary.read_text(encoding="utf-8").split())
    nouns = benchmark_nouns(args.data, dictionary)
    args.out.write_text(HEADER + "".join(f"{n}\n" for n in nouns), encoding="utf-8")
    print(f"{len(nouns)} nouns -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
