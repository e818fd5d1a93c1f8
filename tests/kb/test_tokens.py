"""Token counting: the real tokenizer, and its documented fallback when the tokenizer's file
cannot be had (not bundled, no network)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kb.tokens import count_tokens, estimate_tokens

TEXT = "The daily meal allowance is 60 EUR within the European Union."

PROBE = """
from kb.tokens import count_tokens, estimate_tokens
text = {text!r}
print(count_tokens(text), estimate_tokens(text))
"""


def test_the_bundled_tokenizer_counts_real_tokens() -> None:
    assert count_tokens(TEXT) == 13 != estimate_tokens(TEXT)


def test_without_the_tokenizer_file_and_without_network_counting_falls_back_to_the_estimate(tmp_path: Path) -> None:
    # an empty tokenizer cache and a proxy nobody listens on: tiktoken's download fails with
    # requests' connection error (an OSError), the case the fallback is for; nothing leaves the machine
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path), "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"}
    env.pop("NO_PROXY", None)
    env.pop("no_proxy", None)
    run = subprocess.run([sys.executable, "-c", PROBE.format(text=TEXT)], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    counted, estimated = map(int, run.stdout.split())
    assert counted == estimated == estimate_tokens(TEXT)
