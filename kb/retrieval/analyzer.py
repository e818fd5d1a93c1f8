"""Text analysis for BM25: one tokenizer for English and Chinese (and anything in between).

Runs of Han characters are segmented with jieba in "search" mode (words plus their in-vocabulary
sub-words, so 北京大学 is also found by 北京); every other run of letters and digits is
lower-cased, stop-worded and Porter-stemmed. Index and query use the same analysis. jieba is
imported on the first Han run only, so English-only work never loads its dictionary.

``ANALYZER_VERSION`` is recorded in index manifests: change it whenever tokens change.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

ANALYZER_VERSION = "kb-analyzer/1"

_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_RUN_RE = re.compile(rf"([{_HAN}]+)|([^\W_{_HAN}]+)")

ENGLISH_STOP_WORDS = frozenset(
    """a an and are as at be been but by can do does for from had has have he her his how i if in into is it its
    me my no nor not of on or our she so such than that the their them then there these they this those to
    too us was we were what when where which who whom why will with would you your""".split()
)
# Function words and particles that carry no topic; single Han characters otherwise stay.
CHINESE_STOP_WORDS = frozenset("的 了 是 在 和 与 及 或 而 也 都 就 被 把 对 于 之 其 这 那 个 吗 呢 吧 啊 着 过 得 地 从 以 为".split())


@lru_cache(maxsize=1)
def _jieba() -> Any:
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)  # it logs the dictionary build to stderr at DEBUG
    return jieba


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    from whoosh.lang.porter import stem

    return stem(word)


def _han_words(run: str) -> Iterator[tuple[str, int, int]]:
    for word, start, end in _jieba().tokenize(run, mode="search"):
        if word not in CHINESE_STOP_WORDS:
            yield word, start, end


@lru_cache(maxsize=4096)  # a page's title and summary are analysed once per chunk: mostly hits
def analyse(text: str) -> tuple[tuple[str, int, int], ...]:
    """(token, start char, end char) for ``text``, in order."""
    out: list[tuple[str, int, int]] = []
    text = unicodedata.normalize("NFKC", text)
    for match in _RUN_RE.finditer(text):
        han, word = match.group(1), match.group(2)
        if han:
            base = match.start()
            out.extend((token, base + start, base + end) for token, start, end in _han_words(han))
            continue
        lowered = word.lower()
        if (len(lowered) < 2 and not lowered.isdigit()) or lowered in ENGLISH_STOP_WORDS:
            continue
        out.append((_stem(lowered), match.start(), match.end()))
    return tuple(out)


def iter_tokens(text: str) -> Iterator[tuple[str, int, int]]:
    return iter(analyse(text))


def tokenize(text: str) -> list[str]:
    """The analysed terms of ``text`` (what BM25 indexes and queries)."""
    return [token for token, _, _ in iter_tokens(text)]


@lru_cache(maxsize=1)
def _tokenizer_class() -> type:
    """Built lazily so that importing this module does not import Whoosh."""
    from whoosh.analysis import Token, Tokenizer

    class MixedTokenizer(Tokenizer):
        def __call__(
            self,
            value: str,
            positions: bool = False,
            chars: bool = False,
            keeporiginal: bool = False,
            removestops: bool = True,
            start_pos: int = 0,
            start_char: int = 0,
            tokenize: bool = True,  # noqa: ARG002  # part of Whoosh's tokenizer interface; this one always tokenizes
            mode: str = "",
            **kwargs: Any,
        ) -> Iterator[Any]:
            token = Token(positions, chars, removestops=removestops, mode=mode, **kwargs)
            for pos, (text, start, end) in enumerate(iter_tokens(value), start_pos):
                token.text = text
                token.boost = 1.0
                token.stopped = False
                if keeporiginal:
                    token.original = text
                if positions:
                    token.pos = pos
                if chars:
                    token.startchar = start_char + start
                    token.endchar = start_char + end
                yield token

    MixedTokenizer.__module__ = __name__
    MixedTokenizer.__qualname__ = "MixedTokenizer"
    return MixedTokenizer


def __getattr__(name: str) -> Any:
    # Whoosh pickles the analyzer into the index's table of contents; unpickling looks the
    # class up here by name, so it must be reachable as ``kb.retrieval.analyzer.MixedTokenizer``.
    if name == "MixedTokenizer":
        return _tokenizer_class()
    raise AttributeError(name)


def make_analyzer() -> Any:
    """The Whoosh analyzer used for every text field of the index."""
    return _tokenizer_class()()
