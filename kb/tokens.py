"""Token counting with a real tokenizer (tiktoken ``cl100k_base``), offline.

tiktoken normally downloads its BPE files; litellm (a dependency) ships them in its package,
so we point tiktoken's cache at that folder without importing litellm itself. If the file is
missing, counting falls back to a documented conservative estimate (never an undercount for
English or Chinese): one token per CJK character plus one per three other characters.
"""

from __future__ import annotations

import importlib.util
import math
import os
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tiktoken

_CJK_RE = re.compile(r"[\u3000-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")


@lru_cache(maxsize=1)
def _encoding() -> tiktoken.Encoding | None:
    spec = importlib.util.find_spec("litellm")
    if spec is not None and spec.origin:
        bundled = Path(spec.origin).parent / "litellm_core_utils" / "tokenizers"
        if bundled.is_dir():
            os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(bundled))
    try:
        import tiktoken

        return tiktoken.get_encoding("cl100k_base")
    except (ImportError, OSError, ValueError):  # no tiktoken (or requests); the file missing and no
        return None  # network (requests' errors are OSErrors); a download whose hash does not match


def estimate_tokens(text: str) -> int:
    cjk = len(_CJK_RE.findall(text))
    return cjk + math.ceil((len(text) - cjk) / 3)


def count_tokens(text: str) -> int:
    if not text:
        return 0
    encoding = _encoding()
    if encoding is None:
        return estimate_tokens(text)
    return len(encoding.encode(text, disallowed_special=()))
